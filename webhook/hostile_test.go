package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// The hostile tables send malformed and hostile AdmissionReviews through
// each webhook's real HTTP handler and check the exact outcome: a clear
// error, or a well-defined allow or deny. Panics are not recovered here,
// so one fails the test.

const hostileUID = "hostile-1"

// hostileDeadline bounds each answer; the slowest case takes a fraction
// of a second.
const hostileDeadline = 5 * time.Second

// hostileReq renders an AdmissionReview around raw object JSON, which is
// pasted in as is.
type hostileReq struct {
	op, ns, name, user string
	obj, old           string
}

func (r hostileReq) body() string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,"operation":%q,"namespace":%q,"name":%q,"userInfo":{"username":%q}`,
		hostileUID, r.op, r.ns, r.name, r.user)
	if r.obj != "" {
		b.WriteString(`,"object":` + r.obj)
	}
	if r.old != "" {
		b.WriteString(`,"oldObject":` + r.old)
	}
	b.WriteString("}}")
	return b.String()
}

type hostile struct {
	name string
	req  hostileReq
	// body, when set, is sent instead of req; uid is then the UID the
	// answer must carry.
	body, uid string
	// ctype is the Content-Type; application/json when empty.
	ctype string
	want  answer
}

// answer is what the webhook must reply. msg and warn are substrings of
// the status message and of the warnings; patched is a substring of the
// object after the patch, and "" means there must be no patch; without
// must not be in the object after the patch.
type answer struct {
	allowed         bool
	code            int32
	msg, warn       string
	patched         string
	without         string
	responseVersion string
}

func allowed(msg string) answer { return answer{allowed: true, code: http.StatusOK, msg: msg} }
func denied(msg string) answer  { return answer{code: http.StatusForbidden, msg: msg} }
func badRequest(msg string) answer {
	return answer{code: http.StatusBadRequest, msg: msg}
}
func patchedTo(patched, warn string) answer {
	return answer{allowed: true, code: http.StatusOK, patched: patched, warn: warn}
}

// unlabelled is a patch that removes the managed label.
func unlabelled(patched string) answer {
	return answer{allowed: true, code: http.StatusOK, patched: patched, without: queues.LabelManaged}
}

// envelopeCases are broken AdmissionReviews, the same for every webhook.
// What the decoder reads as an empty review (no operation) is allowed with
// no UID: no API server sends one, and one would reject the answer.
func envelopeCases() []hostile {
	big := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"a":"` + strings.Repeat("x", 7<<20) + `"}}}`
	return []hostile{
		{name: "a blank body is an empty review", body: " ", want: allowed("")},
		{name: "a truncated review", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"`, want: badRequest("unexpected end of JSON input")},
		{name: "not JSON", body: "<xml>review</xml>", want: badRequest("couldn't get version/kind; json parse error")},
		{name: "a YAML review is read as one", body: "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest: {uid: y1, operation: DELETE}\n", uid: "y1", want: allowed("")},
		{name: "JSON null is an empty review", body: "null", want: allowed("")},
		{name: "a JSON array", body: "[1,2]", want: badRequest("cannot unmarshal array")},
		{name: "a JSON number", body: "42", want: badRequest("cannot unmarshal number")},
		{name: "a YAML content type", ctype: "application/yaml", body: hostileReq{op: "CREATE"}.body(), want: badRequest("contentType=application/yaml, expected application/json")},
		{name: "a body over 7 MiB", body: big, want: answer{code: http.StatusRequestEntityTooLarge, msg: "request entity is too large; limit is 7340032 bytes"}},
		{name: "a review of another kind is read as an empty review", body: `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[]}}`, want: allowed("")},
		{name: "a review with a uid of the wrong type", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}`,
			want: badRequest("cannot unmarshal number into Go struct field AdmissionRequest.AdmissionReview.request.uid of type types.UID")},
		{name: "a review nested 20000 deep", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
			want: badRequest("exceeded max depth")},
		{name: "a review with no request is an empty one", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, want: allowed("")},
		{name: "a v1beta1 review of a DELETE", body: `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"old-1","operation":"DELETE"}}`,
			uid: "old-1", want: answer{allowed: true, code: http.StatusOK, responseVersion: "admission.k8s.io/v1beta1"}},
	}
}

// runHostile serves each case through h's HTTP handler, and again through
// controller-runtime's webhook alone, which must answer the same bytes:
// Review's one-pass reading changes no answer. A review built from req, as
// the API server would send it, must take the one-pass path, which alone
// labels its answer application/json.
func runHostile(t *testing.T, h admission.Handler, cases []hostile) {
	t.Helper()
	if n := len(cases); n < 30 {
		t.Fatalf("only %d hostile cases", n)
	}
	wh, bare := testWebhook(h), bareWebhook(h)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, uid := tc.body, tc.uid
			if body == "" {
				body, uid = tc.req.body(), hostileUID
			}
			w := serveHostile(t, wh, body, tc.ctype)
			checkAnswer(t, w.Body.Bytes(), uid, tc.req.obj, tc.want)
			if bw := serveHostile(t, bare, body, tc.ctype); !sameAnswer(t, w.Body.Bytes(), bw.Body.Bytes()) {
				t.Errorf("Review answered\n%s\ncontroller-runtime's webhook alone\n%s", w.Body.Bytes(), bw.Body.Bytes())
			}
			if ct := w.Header().Get("Content-Type"); tc.body == "" && tc.ctype == "" && ct != "application/json" {
				t.Errorf("an API server's review was not read in one pass: answered as %q", ct)
			}
		})
	}
}

// sameAnswer tells whether two AdmissionReview answers say the same: the
// same bytes, but for the order of their JSON patches' operations, which
// some handlers (admission.PatchResponseFromRaw) leave to map order.
func sameAnswer(t *testing.T, a, b []byte) bool {
	t.Helper()
	canon := func(raw []byte) string {
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(raw, &review); err != nil || review.Response == nil {
			return string(raw)
		}
		var ops []any
		if err := json.Unmarshal(review.Response.Patch, &ops); err != nil && len(review.Response.Patch) > 0 {
			t.Fatalf("a patch that is not a JSON list: %s", review.Response.Patch)
		}
		sorted := make([]string, len(ops))
		for i, op := range ops {
			b, _ := json.Marshal(op)
			sorted[i] = string(b)
		}
		slices.Sort(sorted)
		review.Response.Patch = nil
		rest, _ := json.Marshal(review)
		return string(rest) + strings.Join(sorted, "\n")
	}
	return canon(a) == canon(b)
}

// serveHostile serves one request with body, of content type ctype
// (application/json when empty), through h.
func serveHostile(t *testing.T, h http.Handler, body, ctype string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	// A handler stuck parsing a hostile input fails the case rather than
	// hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("no answer within %s", hostileDeadline)
	}
	return w
}

// testWebhook serves h as the webhook server does, but lets panics
// through and logs nothing: until a logger is set, controller-runtime keeps
// every request's logger in memory.
func testWebhook(h admission.Handler) http.Handler { return Review(bareWebhook(h)) }

// bareWebhook is controller-runtime's webhook for h, without Review.
func bareWebhook(h admission.Handler) *admission.Webhook {
	return &admission.Webhook{Handler: h, RecoverPanic: ptr.To(false),
		LogConstructor: func(logr.Logger, *admission.Request) logr.Logger { return logr.Discard() }}
}

func checkAnswer(t *testing.T, out []byte, uid, obj string, want answer) {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		t.Fatalf("not an AdmissionReview with a response (%v): %s", err, out)
	}
	resp := review.Response
	if string(resp.UID) != uid {
		t.Errorf("uid = %q, want %q", resp.UID, uid)
	}
	if want.responseVersion != "" && review.APIVersion != want.responseVersion {
		t.Errorf("answered as %s, want %s", review.APIVersion, want.responseVersion)
	}
	msg := ""
	code := int32(0)
	if resp.Result != nil {
		msg, code = resp.Result.Message, resp.Result.Code
	}
	if resp.Allowed != want.allowed || code != want.code {
		t.Fatalf("allowed=%v code=%d, want allowed=%v code=%d; message %q", resp.Allowed, code, want.allowed, want.code, msg)
	}
	if !strings.Contains(msg, want.msg) || (want.msg == "" && msg != "" && !want.allowed) {
		t.Errorf("message %q does not contain %q", msg, want.msg)
	}
	if warnings := strings.Join(resp.Warnings, "\n"); (want.warn == "") != (warnings == "") || !strings.Contains(warnings, want.warn) {
		t.Errorf("warnings %q, want %q", warnings, want.warn)
	}
	if want.patched == "" {
		if len(resp.Patch) > 0 {
			t.Errorf("unexpected patch %s", resp.Patch)
		}
		return
	}
	patched, err := applyJSONPatch([]byte(obj), resp.Patch)
	if err != nil {
		t.Fatalf("patch %s: %v", resp.Patch, err)
	}
	// Re-encode with sorted keys: a patch may add labels in any order.
	var doc any
	if err := json.Unmarshal(patched, &doc); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(doc)
	if !strings.Contains(string(got), want.patched) {
		t.Errorf("patched object %s does not contain %s", got, want.patched)
	}
	if want.without != "" && strings.Contains(string(got), want.without) {
		t.Errorf("patched object %s contains %s", got, want.without)
	}
}

func hostileDecoder() admission.Decoder {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return admission.NewDecoder(scheme)
}

// rawJob renders a Job in namespace team with one container requesting
// requests; meta, spec and pod are spliced into its metadata, spec and
// pod spec (each starting with a comma).
func rawJob(meta, spec, pod, requests string) string {
	return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team"` + meta +
		`},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"x","resources":{"requests":` + requests + `}}]` + pod + `}}` + spec + `}}`
}

func TestHostileJobMutator(t *testing.T) {
	create := func(obj string) hostileReq {
		return hostileReq{op: "CREATE", ns: "team", name: "j", user: alice, obj: obj}
	}
	cpu := func(q string) hostileReq { return create(rawJob("", "", "", `{"cpu":`+q+`}`)) }
	pending := `"tally.dev/cluster-queue":"q","tally.dev/state":"pending"`
	inadmissible := `"tally.dev/state":"inadmissible"`
	cases := append(envelopeCases(),
		hostile{name: "no object", req: hostileReq{op: "CREATE", ns: "team"}, want: badRequest("tally: decoding Job: there is no content to decode")},
		hostile{name: "a null object", req: create("null"), want: badRequest("tally: decoding Job: there is no content to decode")},
		hostile{name: "an object that is a string", req: create(`"job"`), want: badRequest("tally: decoding Job:")},
		hostile{name: "a Pod instead of a Job", req: create(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`), want: badRequest("tally: decoding Job: unable to decode")},
		hostile{name: "a Job of an unknown version", req: create(`{"apiVersion":"batch/v9","kind":"Job"}`), want: badRequest(`tally: decoding Job: no kind "Job" is registered for version "batch/v9"`)},
		hostile{name: "a spec that is a string", req: create(`{"apiVersion":"batch/v1","kind":"Job","spec":"x"}`), want: badRequest("tally: decoding Job:")},
		hostile{name: "annotations of the wrong type", req: create(rawJob(`,"annotations":{"a":1}`, "", "", `{"cpu":"1"}`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "labels that are a list", req: create(rawJob(`,"labels":["a"]`, "", "", `{"cpu":"1"}`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "a garbage user-affinity annotation", req: create(rawJob(`,"annotations":{"tally.dev/user-affinity":"{not json"}`, "", "", `{"cpu":"1"}`)),
			want: badRequest("tally: metadata.annotations[tally.dev/user-affinity]: annotation tally.dev/user-affinity: invalid character 'n'")},
		hostile{name: "a user-affinity annotation of the wrong shape", req: create(rawJob(`,"annotations":{"tally.dev/user-affinity":"{\"main\":1}"}`, "", "", `{"cpu":"1"}`)),
			want: badRequest("tally: metadata.annotations[tally.dev/user-affinity]: annotation tally.dev/user-affinity: json: cannot unmarshal number")},
		hostile{name: "a cpu request that is not a quantity", req: cpu(`"lots"`), want: badRequest("tally: decoding Job: quantities must match the regular expression")},
		hostile{name: "a cpu request of the wrong type", req: cpu(`true`), want: badRequest("tally: decoding Job:")},
		hostile{name: "a cpu request of 1e30", req: cpu(`"1e30"`), want: patchedTo(inadmissible, "will not be admitted. Can never fit: requests cpu=unlimited")},
		hostile{name: "a cpu request of MaxInt64", req: cpu(`"9223372036854775807"`), want: patchedTo(inadmissible, "Can never fit: requests cpu=unlimited")},
		hostile{name: "a memory request of 99999999999Ei", req: create(rawJob("", "", "", `{"memory":"99999999999Ei"}`)), want: patchedTo(inadmissible, "Can never fit: requests memory=unlimited")},
		hostile{name: "a negative cpu request is queued; the API server rejects it after", req: cpu(`"-1"`), want: patchedTo(pending, "")},
		hostile{name: "a tiny request rounds up", req: cpu(`"1e-30"`), want: patchedTo(pending, "")},
		hostile{name: "an enormous uncovered resource", req: create(rawJob("", "", "", `{"cpu":"1","example.com/x":"1e30"}`)),
			want: patchedTo(inadmissible, "which ClusterQueue q does not cover")},
		hostile{name: "an enormous init container", req: create(rawJob("", "", `,"initContainers":[{"name":"i","image":"x","resources":{"requests":{"cpu":"1e18"}}}]`, `{"cpu":"1"}`)),
			want: patchedTo(inadmissible, "Can never fit: requests cpu=")},
		hostile{name: "a negative overhead is queued", req: create(rawJob("", "", `,"overhead":{"cpu":"-5"}`, `{"cpu":"1"}`)), want: patchedTo(pending, "")},
		hostile{name: "parallelism beyond int32", req: create(rawJob("", `,"parallelism":2147483648`, "", `{"cpu":"1"}`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "the largest parallelism", req: create(rawJob("", `,"parallelism":2147483647`, "", `{"cpu":"1"}`)), want: patchedTo(inadmissible, "Can never fit: requests cpu=2147483647")},
		hostile{name: "a negative parallelism asks for nothing", req: create(rawJob("", `,"parallelism":-5`, "", `{"cpu":"1"}`)), want: patchedTo(pending, "")},
		hostile{name: "a priority beyond int32", req: create(rawJob("", "", `,"priority":3000000000`, `{"cpu":"1"}`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "a priority of a float", req: create(rawJob("", "", `,"priority":1.5`, `{"cpu":"1"}`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "the lowest priority", req: create(rawJob("", "", `,"priority":-2147483648`, `{"cpu":"1"}`)), want: patchedTo(pending, "")},
		hostile{name: "an unknown priority class label", req: create(rawJob(`,"labels":{"tally.dev/priority-class":"../../etc"}`, "", "", `{"cpu":"1"}`)),
			want: denied(`tally: metadata.labels[tally.dev/priority-class]: WorkloadPriorityClass "../../etc" not found; known: bench-small, high`)},
		hostile{name: "a known priority class label", req: create(rawJob(`,"labels":{"kueue.x-k8s.io/priority-class":"high"}`, "", "", `{"cpu":"1"}`)),
			want: patchedTo(`"kueue.x-k8s.io/priority-class":"high","tally.dev/cluster-queue":"q","tally.dev/state":"pending"`, "")},
		hostile{name: "a queue label of 10000 characters", req: create(rawJob(`,"labels":{"tally.dev/cluster-queue":"`+strings.Repeat("q", 10000)+`"}`, "", "", `{"cpu":"1"}`)),
			want: denied(`tally: metadata.labels[tally.dev/cluster-queue]: namespace team may not use ClusterQueue "` + strings.Repeat("q", 64) + `..."; it may use: other, q`)},
		hostile{name: "a forged admitted state and suspend false", req: create(rawJob(`,"labels":{"tally.dev/state":"admitted"}`, `,"suspend":false`, "", `{"cpu":"1"}`)),
			want: patchedTo(`"suspend":true`, "")},
		hostile{name: "unknown fields are ignored", req: create(rawJob(`,"evil":{"x":1}`, `,"evil":[1]`, "", `{"cpu":"1"}`)), want: patchedTo(pending, "")},
		hostile{name: "a Job with no metadata is refused, not patched where nothing can be added",
			req:  create(`{"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}}`),
			want: badRequest("tally: decoding Job: metadata: neither name nor generateName is set")},
		hostile{name: "a Job with no containers is refused, not patched where nothing can be added",
			req:  create(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"}}`),
			want: badRequest("tally: decoding Job: spec.template.spec.containers: a Job needs at least one container")},
		hostile{name: "an UPDATE is not mutated", req: hostileReq{op: "UPDATE", ns: "team", obj: `"garbage"`}, want: allowed("")},
		// Quantities ParseQuantity takes minutes over are refused unparsed.
		hostile{name: "a cpu request with an exponent beyond int32", req: cpu(`"9223E7203685477580927"`),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.requests[cpu]: quantity "9223E7203685477580927" has a decimal exponent beyond ±30`)},
		hostile{name: "a memory limit of 1e-30000000", req: create(rawJob("", "", "", `{"cpu":"1"},"limits":{"memory":"1e-30000000"}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.limits[memory]: quantity "1e-30000000" has a decimal exponent beyond ±30`)},
		hostile{name: "a cpu request of the lowest int32 exponent, as a JSON number", req: cpu(`1E-2147483648`),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.requests[cpu]: quantity "1E-2147483648" has a decimal exponent beyond ±30`)},
		hostile{name: "a hostile quantity padded with spaces, which the decoder trims", req: cpu(`"  1e-999999999 "`),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.requests[cpu]: quantity "1e-999999999" has a decimal exponent beyond ±30`)},
		hostile{name: "an init container limit of 9223e-3000000", req: create(rawJob("", "", `,"initContainers":[{"name":"i","image":"x"},{"name":"j","image":"x","resources":{"limits":{"cpu":"9223e-3000000"}}}]`, `{"cpu":"1"}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.initContainers[1].resources.limits[cpu]: quantity "9223e-3000000" has a decimal exponent beyond ±30`)},
		hostile{name: "an overhead of 1e-999999999", req: create(rawJob("", "", `,"overhead":{"cpu":"1e-999999999"}`, `{"cpu":"1"}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.overhead[cpu]: quantity "1e-999999999" has a decimal exponent beyond ±30`)},
		hostile{name: "an emptyDir size limit of 1E-2147483648", req: create(rawJob("", "", `,"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1E-2147483648"}}]`, `{"cpu":"1"}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.volumes[0].emptyDir.sizeLimit: quantity "1E-2147483648" has a decimal exponent beyond ±30`)},
		hostile{name: "an ephemeral volume claim of 1e-30000000", req: create(rawJob("", "", `,"volumes":[{"name":"v","ephemeral":{"volumeClaimTemplate":{"spec":{"resources":{"requests":{"storage":"1e-30000000"}}}}}}]`, `{"cpu":"1"}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]: quantity "1e-30000000" has a decimal exponent beyond ±30`)},
		hostile{name: "a quantity of 65 digits", req: cpu(`"` + strings.Repeat("9", 65) + `"`),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.requests[cpu]: quantity of 65 bytes is longer than the 64-byte limit`)},
		hostile{name: "a Pod with a hostile quantity is not a Job", req: create(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1e-30000000"}}}]}}`),
			want: badRequest(`tally: decoding Job: apiVersion "v1" and kind "Pod" are not batch/v1 Job`)},
		hostile{name: "hostile texts outside quantities pass", req: create(rawJob(`,"annotations":{"x":"1e-30000000"}`, "", `,"initContainers":[{"name":"i","image":"x","args":["9223E7203685477580927","1E-2147483648"]}]`, `{"cpu":"1"}`)),
			want: patchedTo(pending, "")},
		hostile{name: "a namespace tally cannot read is denied, not let through unqueued", req: hostileReq{op: "CREATE", ns: "ghost", obj: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}}`},
			want: answer{code: http.StatusServiceUnavailable, msg: "tally: cannot read namespace ghost to queue this Job"}},
	)
	runHostile(t, newMutator(t, testConfig(t)), cases)
}

// guardJob renders a Job tally manages, in namespace team, with labels
// and spec members spliced in.
func guardJob(labels, spec string) string {
	return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team","labels":{"tally.dev/cluster-queue":"q","tally.dev/state":"pending"` + labels +
		`}},"spec":{"suspend":true` + spec + `,"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}}`
}

// withResources sets the resources of job's first container.
func withResources(job, resources string) string {
	return strings.Replace(job, `"image":"x"`, `"image":"x","resources":`+resources, 1)
}

func TestHostileJobGuard(t *testing.T) {
	update := func(user, old, obj string) hostileReq {
		return hostileReq{op: "UPDATE", ns: "team", name: "j", user: user, obj: obj, old: old}
	}
	base := guardJob("", "")
	running := strings.Replace(base, `"suspend":true`, `"suspend":false`, 1)
	many := &strings.Builder{}
	for i := range 5000 {
		fmt.Fprintf(many, `,"tally.dev/k%04d":"x"`, i)
	}
	bigJob := guardJob(`,"x":"`+strings.Repeat("x", 3<<20)+`"`, "")
	huge := `,"tally.dev/flavors":"` + strings.Repeat("z", 1<<20) + `"`
	cases := append(envelopeCases(),
		hostile{name: "no old object", req: update(alice, "", base), want: badRequest("tally: decoding the old Job: there is no content to decode")},
		hostile{name: "no object", req: update(alice, base, ""), want: badRequest("tally: decoding Job: there is no content to decode")},
		hostile{name: "a null object", req: update(alice, base, "null"), want: badRequest("tally: decoding Job: there is no content to decode")},
		hostile{name: "an old Pod", req: update(alice, `{"apiVersion":"v1","kind":"Pod"}`, base), want: badRequest("tally: decoding the old Job: unable to decode")},
		hostile{name: "an object of an unknown version", req: update(alice, base, `{"apiVersion":"batch/v2","kind":"Job"}`), want: badRequest(`no kind "Job" is registered for version "batch/v2"`)},
		hostile{name: "an old object over 3 MiB", req: update(alice, bigJob, base),
			want: answer{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("tally: a Job of %d bytes is larger than the 3145728-byte limit", len(bigJob))}},
		hostile{name: "labels of the wrong type", req: update(alice, base, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"labels":{"a":[]}}}`), want: badRequest("tally: decoding Job:")},
		hostile{name: "suspend as a string", req: update(alice, base, guardJob("", `,"suspend":"false"`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "parallelism beyond int32", req: update(alice, base, guardJob("", `,"parallelism":1e10`)), want: badRequest("tally: decoding Job:")},
		hostile{name: "tolerations that are an object", req: update(alice, base, strings.Replace(base, `"containers"`, `"tolerations":{"a":1},"containers"`, 1)), want: badRequest("tally: decoding Job:")},
		hostile{name: "a suspend of null un-suspends", req: update(alice, base, strings.Replace(base, `"suspend":true`, `"suspend":null`, 1)), want: denied(unsuspendDenied)},
		hostile{name: "an unchanged Job passes", req: update(alice, base, base), want: allowed("")},
		hostile{name: "garbage values in tally's labels, unchanged, pass", req: update(alice, guardJob(`,"tally.dev/flavors":"\u0000\ufffd"`, ""), guardJob(`,"tally.dev/flavors":"\u0000\ufffd"`, "")), want: allowed("")},
		hostile{name: "tally's service account passes, even with garbage", req: update(tallySA, `"x"`, `[1]`), want: allowed("tally's own update")},
		hostile{name: "a user name differing in case is not tally", req: update(strings.ToUpper(tallySA), base, running), want: denied(unsuspendDenied)},
		hostile{name: "a user name with a trailing space is not tally", req: update(tallySA+" ", base, running), want: denied(unsuspendDenied)},
		hostile{name: "an empty user name is not tally", req: update("", base, running), want: denied(unsuspendDenied)},
		hostile{name: "5000 tally.dev/ labels are listed ten at most", req: update(alice, base, guardJob(many.String(), "")),
			want: denied("metadata.labels[tally.dev/k0009]: only tally may add this label of a Job in a managed namespace; tally records its decisions in the tally.dev/ labels; and 4990 more")},
		hostile{name: "a 1 MiB flavors annotation is denied without echoing it", req: update(alice, base, strings.Replace(base, `"labels"`, `"annotations":{`+huge[1:]+`},"labels"`, 1)),
			want: denied("tally: metadata.annotations[tally.dev/flavors]: only tally may add this annotation of a Job in a managed namespace; tally records its decisions in the tally.dev/ annotations")},
		hostile{name: "the bare tally.dev/ prefix is reserved", req: update(alice, base, guardJob(`,"tally.dev/":"x"`, "")), want: denied("metadata.labels[tally.dev/]: only tally may add this label")},
		hostile{name: "an upper-case look-alike key is not tally's", req: update(alice, base, guardJob(`,"TALLY.DEV/state":"admitted"`, "")), want: allowed("")},
		hostile{name: "all labels dropped", req: update(alice, base, strings.Replace(base, `"labels":{"tally.dev/cluster-queue":"q","tally.dev/state":"pending"}`, `"labels":null`, 1)),
			want: denied("tally: metadata.labels[tally.dev/cluster-queue]: only tally may remove this label of a Job in a managed namespace; the queue is fixed when the Job is created (delete and re-create the Job to use another ClusterQueue); metadata.labels[tally.dev/state]: only tally may remove this label")},
		hostile{name: "an unmanaged Job made to look admitted", req: update(alice, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"}}`, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","labels":{"tally.dev/state":"admitted"}}}`),
			want: denied("tally: metadata.labels[tally.dev/state]: only tally may add this label")},
		hostile{name: "an unmanaged Job may be un-suspended", req: update(alice, `{"apiVersion":"batch/v1","kind":"Job","spec":{"suspend":true}}`, `{"apiVersion":"batch/v1","kind":"Job","spec":{"suspend":false}}`), want: allowed("")},
		hostile{name: "a Job being deleted is still guarded", req: update(alice, base, strings.Replace(running, `"name":"j"`, `"name":"j","deletionTimestamp":"2030-01-01T00:00:00Z"`, 1)), want: denied(unsuspendDenied)},
		hostile{name: "a running Job raised from the default parallelism", req: update(alice, running, strings.Replace(running, `"suspend":false`, `"suspend":false,"parallelism":2`, 1)),
			want: denied("spec.parallelism: only tally may raise the pod count of a running Job in a managed namespace; its quota was admitted for 1 pods, not 2")},
		hostile{name: "a running Job with a negative parallelism lowered further", req: update(alice, strings.Replace(running, `"suspend":false`, `"suspend":false,"parallelism":-1`, 1), strings.Replace(running, `"suspend":false`, `"suspend":false,"parallelism":-9`, 1)),
			want: allowed("")},
		hostile{name: "a nodeSelector of null equals none", req: update(alice, base, strings.Replace(base, `"containers"`, `"nodeSelector":null,"containers"`, 1)), want: allowed("")},
		hostile{name: "an affinity of garbage operators is still a change", req: update(alice, base, strings.Replace(base, `"containers"`, `"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"","operator":"Evil"}]}]}}},"containers"`, 1)),
			want: denied("tally: spec.template.spec.affinity: only tally may change the affinity")},
		hostile{name: "a CREATE is not guarded", req: hostileReq{op: "CREATE", ns: "team", user: alice, obj: `"garbage"`}, want: allowed("")},
		hostile{name: "a hostile quantity in the object", req: update(alice, base, withResources(base, `{"limits":{"cpu":"9223E7203685477580927"}}`)),
			want: badRequest(`tally: decoding Job: spec.template.spec.containers[0].resources.limits[cpu]: quantity "9223E7203685477580927" has a decimal exponent beyond ±30`)},
		hostile{name: "a hostile quantity in the old object", req: update(alice, withResources(base, `{"requests":{"memory":"1e-30000000"}}`), base),
			want: badRequest(`tally: decoding the old Job: spec.template.spec.containers[0].resources.requests[memory]: quantity "1e-30000000" has a decimal exponent beyond ±30`)},
		hostile{name: "a hostile text in args passes", req: update(alice, base, strings.Replace(base, `"image":"x"`, `"image":"x","args":["1e-30000000"]`, 1)), want: allowed("")},
	)
	runHostile(t, newGuard(), cases)
}

func rawNamespace(name, meta string) string {
	return `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `"` + meta + `}}`
}

// namespaceCases are hostile Namespaces, shared by both Namespace webhooks.
func namespaceCases(op func(obj string) hostileReq) []hostile {
	return append(envelopeCases(),
		hostile{name: "no object", req: hostileReq{op: "CREATE"}, want: badRequest("tally: decoding Namespace: there is no content to decode")},
		hostile{name: "a null object", req: op("null"), want: badRequest("tally: decoding Namespace: there is no content to decode")},
		hostile{name: "a Job instead of a Namespace", req: op(`{"apiVersion":"batch/v1","kind":"Job"}`), want: badRequest("tally: decoding Namespace: unable to decode")},
		hostile{name: "annotations that are a list", req: op(rawNamespace("team", `,"annotations":["tally.dev/cluster-queue"]`)), want: badRequest("tally: decoding Namespace:")},
		hostile{name: "a binding that is a number", req: op(rawNamespace("team", `,"annotations":{"tally.dev/cluster-queue":1}`)), want: badRequest("tally: decoding Namespace:")},
		hostile{name: "labels of the wrong type", req: op(rawNamespace("team", `,"labels":"managed"`)), want: badRequest("tally: decoding Namespace:")},
		hostile{name: "a name of the wrong type", req: op(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":{}}}`), want: badRequest("tally: decoding Namespace:")},
		hostile{name: "metadata nested 20000 deep", body: op(`{"apiVersion":"v1","kind":"Namespace","metadata":{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`).body(),
			want: badRequest("exceeded max depth")},
		hostile{name: "a DELETE passes", req: hostileReq{op: "DELETE", obj: `"garbage"`}, want: allowed("")},
		hostile{name: "a CONNECT passes", req: hostileReq{op: "CONNECT", obj: `"garbage"`}, want: allowed("")},
		hostile{name: "an unknown operation passes", req: hostileReq{op: "EVIL", obj: `"garbage"`}, want: allowed("")},
	)
}

func TestHostileNamespaceMutator(t *testing.T) {
	op := func(obj string) hostileReq { return hostileReq{op: "UPDATE", user: alice, obj: obj} }
	bound := func(name, queue, meta string) hostileReq {
		return op(rawNamespace(name, `,"annotations":{"tally.dev/cluster-queue":`+queue+`}`+meta))
	}
	cases := append(namespaceCases(op),
		hostile{name: "a bound namespace is labelled", req: bound("team", `"q"`, ""), want: patchedTo(`"labels":{"tally.dev/managed":"true"}`, "")},
		hostile{name: "a binding to a queue no one defined is labelled; the validator denies it", req: bound("team", `"nope"`, ""), want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "a 100 KiB binding is labelled", req: bound("team", `"`+strings.Repeat("q", 100<<10)+`"`, ""), want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "an empty binding is not", req: bound("team", `""`, `,"labels":{"tally.dev/managed":"true"}`), want: unlabelled(`"annotations":{"tally.dev/cluster-queue":""}`)},
		hostile{name: "a binding of null is not", req: bound("team", `null`, `,"labels":{"tally.dev/managed":"true","a":"b"}`), want: unlabelled(`"labels":{"a":"b"}`)},
		hostile{name: "kube-system is never managed", req: bound("kube-system", `"q"`, `,"labels":{"tally.dev/managed":"true"}`), want: unlabelled(`"name":"kube-system"`)},
		hostile{name: "tally's own namespace is never managed", req: bound("tally-system", `"q"`, ""), want: allowed("")},
		hostile{name: "a forged label on an unbound namespace is removed", req: op(rawNamespace("team", `,"labels":{"tally.dev/managed":"true"}`)), want: unlabelled(`"name":"team"`)},
		hostile{name: "a label of TRUE is set to true", req: bound("team", `"q"`, `,"labels":{"tally.dev/managed":"TRUE"}`), want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "a namespace with no name but a binding is labelled", req: op(`{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{"tally.dev/cluster-queue":"q"}}}`),
			want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "a binding with a newline is labelled", req: bound("team", `"q\nrm -rf"`, ""), want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "an already labelled namespace is left alone", req: bound("team", `"q"`, `,"labels":{"tally.dev/managed":"true"}`), want: allowed("")},
		hostile{name: "an unbound namespace is left alone", req: op(rawNamespace("team", "")), want: allowed("")},
		hostile{name: "unknown fields are dropped, as the API server drops them", req: bound("team", `"q"`, `,"evil":1`),
			want: answer{allowed: true, code: http.StatusOK, patched: `"tally.dev/managed":"true"`, without: `evil`}},
		hostile{name: "a CREATE is handled alike", req: hostileReq{op: "CREATE", obj: rawNamespace("team", `,"annotations":{"tally.dev/cluster-queue":"q"}`)},
			want: patchedTo(`"tally.dev/managed":"true"`, "")},
		hostile{name: "a namespace of a future version", req: op(`{"apiVersion":"v2","kind":"Namespace"}`), want: badRequest(`no kind "Namespace" is registered for version "v2"`)},
	)
	// A config in force that names no namespace in a LocalQueue.
	runHostile(t, &NamespaceMutator{Store: queues.NewStore(&queues.Config{}), Namespace: "tally-system", Decoder: hostileDecoder()}, cases)
}

func TestHostileNamespaceValidator(t *testing.T) {
	op := func(obj string) hostileReq { return hostileReq{op: "CREATE", user: alice, obj: obj} }
	bind := func(name, queue string) hostileReq {
		return op(rawNamespace(name, `,"annotations":{"tally.dev/cluster-queue":`+queue+`}`))
	}
	unknown := `metadata.annotations[tally.dev/cluster-queue]: ClusterQueue %q is not defined; known ClusterQueues: other, q`
	cases := append(namespaceCases(op),
		hostile{name: "a known queue passes", req: bind("team", `"q"`), want: allowed("")},
		hostile{name: "an unknown queue lists the known ones", req: bind("team", `"nope"`), want: denied(fmt.Sprintf(unknown, "nope"))},
		hostile{name: "a queue name differing in case is unknown", req: bind("team", `"Q"`), want: denied(fmt.Sprintf(unknown, "Q"))},
		hostile{name: "a queue name with a newline is quoted", req: bind("team", `"q\nq"`), want: denied(`ClusterQueue "q\nq" is not defined`)},
		hostile{name: "a queue name with control characters is quoted", req: bind("team", `"\u0000\u001b[31m"`), want: denied(`ClusterQueue "\x00\x1b[31m" is not defined`)},
		hostile{name: "a queue name of 100 KiB is unknown", req: bind("team", `"`+strings.Repeat("q", 100<<10)+`"`), want: denied("ClusterQueue \"qqqq")},
		hostile{name: "an empty binding must name a queue", req: bind("team", `""`), want: denied("metadata.annotations[tally.dev/cluster-queue]: must name a ClusterQueue")},
		hostile{name: "a binding of null must name a queue", req: bind("team", `null`), want: denied("metadata.annotations[tally.dev/cluster-queue]: must name a ClusterQueue")},
		hostile{name: "kube-system may not be bound", req: bind("kube-system", `"q"`), want: denied("namespace kube-system is never managed by tally")},
		hostile{name: "tally's own namespace may not be bound", req: bind("tally-system", `"q"`), want: denied("namespace tally-system is never managed by tally")},
		hostile{name: "an unbound namespace passes", req: op(rawNamespace("team", `,"annotations":{"other":"x"}`)), want: allowed("")},
		hostile{name: "a forged managed label alone passes; the mutator removes it", req: op(rawNamespace("team", `,"labels":{"tally.dev/managed":"true"}`)), want: allowed("")},
		hostile{name: "an UPDATE is validated alike", req: hostileReq{op: "UPDATE", obj: rawNamespace("team", `,"annotations":{"tally.dev/cluster-queue":"nope"}`)}, want: denied(fmt.Sprintf(unknown, "nope"))},
		hostile{name: "a Kueue LocalQueue name is not a ClusterQueue", req: bind("team", `"lq"`), want: denied(fmt.Sprintf(unknown, "lq"))},
		hostile{name: "a flavor name is not a ClusterQueue", req: bind("team", `"spot"`), want: denied(fmt.Sprintf(unknown, "spot"))},
		hostile{name: "a namespace of a future version", req: op(`{"apiVersion":"v2","kind":"Namespace"}`), want: badRequest(`no kind "Namespace" is registered for version "v2"`)},
	)
	runHostile(t, &NamespaceValidator{Store: queues.NewStore(testConfig(t)), Namespace: "tally-system", Decoder: hostileDecoder()}, cases)
	t.Run("before any config, only the names are checked", func(t *testing.T) {
		runHostile(t, &NamespaceValidator{Store: queues.NewStore(nil), Namespace: "tally-system", Decoder: hostileDecoder()}, append(envelopeCases(),
			hostile{name: "an unknown queue passes", req: bind("team", `"nope"`), want: allowed("")},
			hostile{name: "kube-system may not be bound", req: bind("kube-system", `"q"`), want: denied("namespace kube-system is never managed by tally")},
			hostile{name: "a garbage Namespace", req: op(`[]`), want: badRequest("tally: decoding Namespace:")},
			hostile{name: "an empty binding must name a queue", req: bind("team", `""`), want: denied("must name a ClusterQueue")},
			hostile{name: "an unbound namespace passes", req: op(rawNamespace("team", "")), want: allowed("")},
			hostile{name: "no object", req: hostileReq{op: "CREATE"}, want: badRequest("tally: decoding Namespace: there is no content to decode")},
			hostile{name: "tally's own namespace may not be bound", req: bind("tally-system", `"q"`), want: denied("namespace tally-system is never managed by tally")},
			hostile{name: "a binding that is a number", req: bind("team", `7`), want: badRequest("tally: decoding Namespace:")},
			hostile{name: "a DELETE passes", req: hostileReq{op: "DELETE"}, want: allowed("")},
			hostile{name: "a queue name of 100 KiB passes", req: bind("team", `"`+strings.Repeat("q", 100<<10)+`"`), want: allowed("")},
			hostile{name: "a null object", req: op("null"), want: badRequest("tally: decoding Namespace: there is no content to decode")},
			hostile{name: "a Pod", req: op(`{"apiVersion":"v1","kind":"Pod"}`), want: badRequest("tally: decoding Namespace: unable to decode")},
			hostile{name: "a binding of null must name a queue", req: bind("team", `null`), want: denied("must name a ClusterQueue")},
			hostile{name: "a namespace with no name binding q", req: op(`{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{"tally.dev/cluster-queue":"q"}}}`), want: allowed("")},
			hostile{name: "an UPDATE of kube-system's binding", req: hostileReq{op: "UPDATE", obj: rawNamespace("kube-system", `,"annotations":{"tally.dev/cluster-queue":"x"}`)}, want: denied("namespace kube-system is never managed by tally")},
			hostile{name: "labels of the wrong type", req: op(rawNamespace("team", `,"labels":[1]`)), want: badRequest("tally: decoding Namespace:")},
		))
	})
}

// configMap renders the config ConfigMap with queues.yaml set to config.
func configMap(config string) string {
	data, _ := json.Marshal(map[string]string{queues.ConfigKey: config})
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"tally-config","namespace":"tally-system"},"data":` + string(data) + `}`
}

func TestHostileConfigValidator(t *testing.T) {
	op := func(obj string) hostileReq {
		return hostileReq{op: "UPDATE", ns: "tally-system", name: "tally-config", user: alice, obj: obj}
	}
	cfg := func(config string) hostileReq { return op(configMap(config)) }
	invalid := "data[queues.yaml]: invalid config: "
	cpuGroup := "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources: [{name: cpu, nominalQuota: %s}]\n"
	good := queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "1"))
	laughs := "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	for i, c := range "bcdefghi" {
		prev := string("abcdefgh"[i])
		laughs += fmt.Sprintf("%c: &%c [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", c, c, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	cases := append(envelopeCases(),
		hostile{name: "a valid config passes", req: cfg(good), want: allowed("")},
		hostile{name: "an empty config passes", req: cfg(""), want: allowed("")},
		hostile{name: "another ConfigMap is not checked", req: hostileReq{op: "UPDATE", ns: "tally-system", name: "other", obj: `"garbage"`}, want: allowed("")},
		hostile{name: "a ConfigMap of that name elsewhere is not checked", req: hostileReq{op: "CREATE", ns: "team", name: "tally-config", obj: `"garbage"`}, want: allowed("")},
		hostile{name: "no object", req: hostileReq{op: "CREATE", ns: "tally-system", name: "tally-config"}, want: badRequest("tally: decoding ConfigMap: there is no content to decode")},
		hostile{name: "data that is a list", req: op(`{"apiVersion":"v1","kind":"ConfigMap","data":["a"]}`), want: badRequest("tally: decoding ConfigMap:")},
		hostile{name: "a config that is a number", req: op(`{"apiVersion":"v1","kind":"ConfigMap","data":{"queues.yaml":1}}`), want: badRequest("tally: decoding ConfigMap:")},
		hostile{name: "a Secret instead", req: op(`{"apiVersion":"v1","kind":"Secret"}`), want: badRequest("tally: decoding ConfigMap: unable to decode")},
		hostile{name: "no queues.yaml key", req: op(`{"apiVersion":"v1","kind":"ConfigMap","data":{"queues.yml":"x"}}`), want: denied("data[queues.yaml]: required: the config documents live under this key")},
		hostile{name: "the config in binaryData", req: op(`{"apiVersion":"v1","kind":"ConfigMap","binaryData":{"queues.yaml":"YQ=="}}`), want: denied("data[queues.yaml]: required")},
		hostile{name: "a billion laughs", req: cfg(laughs), want: denied(invalid + "document[0]: yaml: document contains excessive aliasing")},
		hostile{name: "an anchor that contains itself", req: cfg("a: &a [*a]\n"), want: denied(invalid + "document[0]: yaml: anchor 'a' value contains itself")},
		hostile{name: "an alias to no anchor", req: cfg("a: *nope\n"), want: denied(invalid + `document[0]: yaml: unknown anchor 'nope' referenced`)},
		hostile{name: "YAML nested 20000 deep", req: cfg(strings.Repeat("[", 20000)), want: denied(invalid + "document[0]: yaml: exceeded max depth of 10000")},
		hostile{name: "a config over 1 MiB", req: cfg(good + "#" + strings.Repeat("x", 1<<20)), want: denied("is larger than the 1 MiB limit")},
		hostile{name: "tabs for indentation", req: cfg("\tkind: x"), want: denied(invalid + "document[0]: yaml: found character that cannot start any token")},
		hostile{name: "a document that is a list", req: cfg("- a\n- b\n"), want: denied(invalid + "document[0]")},
		hostile{name: "a Cohort that is its own parent", req: cfg("apiVersion: tally.dev/v1\nkind: Cohort\nmetadata: {name: x}\nspec: {parentName: x}\n"),
			want: denied(invalid + `Cohort "x".spec.parentName: cycle x -> x`)},
		hostile{name: "a kind that does not exist", req: cfg("apiVersion: tally.dev/v1\nkind: Evil\nmetadata: {name: x}\n"),
			want: denied(invalid + `document[0].kind: unknown kind "Evil": must be one of ResourceFlavor, Topology, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, WorkloadKind`)},
		hostile{name: "an unknown apiVersion", req: cfg("apiVersion: evil/v1\nkind: ResourceFlavor\nmetadata: {name: x}\n"), want: denied(invalid + "document[0].apiVersion")},
		hostile{name: "duplicate flavor names", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.Flavor("f")), want: denied(`ResourceFlavor "f"`)},
		hostile{name: "duplicate ClusterQueue names", req: cfg(good + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "2"))), want: denied(`ClusterQueue "a"`)},
		hostile{name: "an unknown flavor", req: cfg(queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "1"))), want: denied(invalid + `ClusterQueue "a".spec.resourceGroups[0].flavors[0].name: flavor "f" is not defined`)},
		hostile{name: "a resource not covered", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources: [{name: cpu, nominalQuota: 1}, {name: memory, nominalQuota: 1Gi}]\n")),
			want: denied(`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources`)},
		hostile{name: "a resource covered twice", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.Flavor("g") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "1")+"  - coveredResources: [cpu]\n    flavors:\n    - name: g\n      resources: [{name: cpu, nominalQuota: 1}]\n")),
			want: denied(`ClusterQueue "a".spec.resourceGroups[1]`)},
		hostile{name: "a quota of 1e31", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "1e31"))), want: denied(`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`)},
		hostile{name: "a negative quota", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "-1"))), want: denied(`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`)},
		hostile{name: "a quota that is not a quantity", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "lots"))), want: denied(`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`)},
		hostile{name: "a priority beyond int32", req: cfg("apiVersion: tally.dev/v1\nkind: WorkloadPriorityClass\nmetadata: {name: x}\nvalue: 3000000000\n"),
			want: denied(invalid + `WorkloadPriorityClass "x".value: must be an integer from -2147483648 to 2147483647, got 3000000000`)},
		hostile{name: "a priority below int32", req: cfg("apiVersion: tally.dev/v1\nkind: WorkloadPriorityClass\nmetadata: {name: x}\nvalue: -2147483649\n"),
			want: denied(`WorkloadPriorityClass "x".value: must be an integer from -2147483648 to 2147483647`)},
		hostile{name: "a LocalQueue naming an unknown ClusterQueue", req: cfg(good + "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, namespace: team}\nspec: {clusterQueue: nope}\n"),
			want: denied(`LocalQueue "team/lq"`)},
		hostile{name: "a cohort of one queue borrowing from itself", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", "  cohort: a\n"+fmt.Sprintf(cpuGroup, "1"))), want: allowed("")},
		hostile{name: "11000 empty documents", req: cfg(strings.Repeat("---\n{}\n", 11000)), want: denied("config")},
		hostile{name: "a quota with an exponent beyond int32", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, "9223E7203685477580927"))),
			want: denied(invalid + `ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "9223E7203685477580927" is out of range`)},
		// Unquoted, YAML reads 1e-30000000 as the number 0.
		hostile{name: "a quota of 1e-30000000", req: cfg(queuestest.Flavor("f") + "---\n" + queuestest.ClusterQueue("a", fmt.Sprintf(cpuGroup, `"1e-30000000"`))),
			want: denied(invalid + `ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "1e-30000000" is out of range`)},
	)
	runHostile(t, &ConfigValidator{Namespace: "tally-system", Name: "tally-config", Decoder: hostileDecoder()}, cases)
}
