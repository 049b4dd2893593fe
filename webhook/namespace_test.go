package webhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tally.dev/tally/queues"
)

// A namespace named by a LocalQueue of the config is managed without the
// annotation: the mutator labels it, and keeps the label.
func TestNamespaceMutatorLocalQueues(t *testing.T) {
	cfg := testConfig(t) // LocalQueues in team, lq-only and lq-default
	op := func(obj string) hostileReq { return hostileReq{op: "UPDATE", user: alice, obj: obj} }
	for _, tc := range []struct {
		name string
		cfg  *queues.Config
		req  hostileReq
		want answer
	}{
		{"a namespace named by a LocalQueue is labelled", cfg, op(rawNamespace("lq-only", "")), patchedTo(`"labels":{"tally.dev/managed":"true"}`, "")},
		{"and keeps its label", cfg, op(rawNamespace("lq-only", `,"labels":{"tally.dev/managed":"true"}`)), allowed("")},
		{"a namespace no LocalQueue names loses a forged label", cfg, op(rawNamespace("elsewhere", `,"labels":{"tally.dev/managed":"true"}`)), unlabelled(`"name":"elsewhere"`)},
		{"kube-system is never managed, LocalQueue or not", cfg, op(rawNamespace("kube-system", `,"labels":{"tally.dev/managed":"true"}`)), unlabelled(`"name":"kube-system"`)},
		{"before any config the label is left to the ledger", nil, op(rawNamespace("lq-only", `,"labels":{"tally.dev/managed":"true"}`)), allowed("")},
		{"before any config an annotation still labels", nil, op(rawNamespace("x", `,"annotations":{"tally.dev/cluster-queue":"q"}`)), patchedTo(`"tally.dev/managed":"true"`, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wh := testWebhook(&NamespaceMutator{Store: queues.NewStore(tc.cfg), Namespace: "tally-system", Decoder: hostileDecoder()})
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.req.body()))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			wh.ServeHTTP(w, r)
			checkAnswer(t, w.Body.Bytes(), hostileUID, tc.req.obj, tc.want)
		})
	}
}
