package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/queues"
)

// anyReview reads v1 and v1beta1 AdmissionReviews alike, as the webhook
// server does, to tell which bodies hold a request.
type anyReview struct{ admissionv1.AdmissionReview }

func (r *anyReview) DeepCopyObject() runtime.Object {
	return &anyReview{*r.AdmissionReview.DeepCopy()}
}

// FuzzJobAdmission sends arbitrary bodies to the Job mutator and the Job
// guard. Neither may panic; each must answer with an AdmissionReview that
// carries the request's UID when there was a request, whose refusals say
// they are tally's, and whose patches turn the Job into a queued one.
func FuzzJobAdmission(f *testing.F) {
	update := updateRequest(f, alice, pendingJob(), admittedJob())
	for _, body := range []string{
		hostileReq{op: "CREATE", ns: "team", name: "j", user: alice, obj: rawJob("", "", "", `{"cpu":"1"}`)}.body(),
		hostileReq{op: "CREATE", ns: "team", name: "j", user: alice, obj: rawJob(`,"labels":{"tally.dev/cluster-queue":"other"}`, `,"parallelism":3`, `,"nodeSelector":{"tier":"spot"}`, `{"cpu":"1e30","memory":"1Gi"}`)}.body(),
		hostileReq{op: "UPDATE", ns: "team", name: "j", user: alice, old: guardJob("", ""), obj: guardJob(`,"tally.dev/flavors":"main=spot"`, `,"suspend":false`)}.body(),
		hostileReq{op: "UPDATE", ns: "team", name: "j", user: tallySA, old: guardJob("", ""), obj: guardJob("", "")}.body(),
		hostileReq{op: "CREATE", ns: "team", name: "j", user: alice, obj: rawJob("", "", "", `{"cpu":"9223E7203685477580927","memory":1e-30000000}`)}.body(),
		hostileReq{op: "UPDATE", ns: "team", name: "j", user: alice, old: guardJob("", ""), obj: withResources(guardJob("", ""), `{"limits":{"cpu":"1E-2147483648"}}`)}.body(),
		string(mustJSON(f, admissionv1.AdmissionReview{Request: &update.AdmissionRequest})),
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"b","operation":"CREATE","object":{"kind":"Job","apiVersion":"batch/v1"}}}`,
		"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest: {uid: y, operation: UPDATE, object: {}, oldObject: {}}\n",
		"null", "{", "",
	} {
		f.Add([]byte(body))
	}
	scheme := runtime.NewScheme()
	_ = admissionv1.AddToScheme(scheme)
	_ = admissionv1beta1.AddToScheme(scheme)
	reviews := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	decoder := hostileDecoder()
	handlers := map[string]http.Handler{
		JobPath:      testWebhook(newMutator(f, testConfig(f))),
		JobGuardPath: testWebhook(newGuard()),
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in := &anyReview{}
		in.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
		_, _, err := reviews.Decode(body, nil, in)
		decoded := err == nil && len(body) > 0
		req := in.Request
		for path, wh := range handlers {
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			wh.ServeHTTP(w, r)
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: not an AdmissionReview with a response (%v): %s", path, err, w.Body.Bytes())
			}
			resp := out.Response
			if !decoded || req == nil {
				if resp.UID != "" || (resp.Allowed && len(resp.Patch) > 0) {
					t.Fatalf("%s: no request, yet uid %q allowed %v patch %s", path, resp.UID, resp.Allowed, resp.Patch)
				}
				continue
			}
			if resp.UID != req.UID {
				t.Fatalf("%s: uid %q, want %q", path, resp.UID, req.UID)
			}
			if !resp.Allowed && (resp.Result == nil || !strings.HasPrefix(resp.Result.Message, "tally: ")) {
				t.Fatalf("%s: a refusal that does not say it is tally's: %+v", path, resp.Result)
			}
			if len(resp.Patch) > 0 {
				checkQueued(t, decoder, req.Object.Raw, resp.Patch)
			}
		}
	})
}

// checkQueued applies a Job mutator patch and checks the Job it makes,
// read by decoder.
func checkQueued(t *testing.T, decoder admission.Decoder, obj, patch []byte) {
	t.Helper()
	raw, err := applyJSONPatch(obj, patch)
	if err != nil {
		t.Fatalf("patch %s does not apply: %v", patch, err)
	}
	// Decode as the webhook does: encoding/json would also read fields
	// whose names differ in case, which the decoder ignores, and parse
	// hostile quantities there.
	job := &batchv1.Job{}
	if err := decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, job); err != nil {
		t.Fatalf("patched Job does not decode: %v", err)
	}
	state := queues.State(job.Labels[queues.LabelState])
	if !ptr.Deref(job.Spec.Suspend, false) || job.Labels[queues.LabelQueue] == "" || (state != queues.StatePending && state != queues.StateInadmissible) {
		t.Fatalf("patched Job is not queued: suspend %v labels %v", job.Spec.Suspend, job.Labels)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
