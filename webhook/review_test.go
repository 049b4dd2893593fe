package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
)

// countingDecoder counts the objects it decodes.
type countingDecoder struct {
	admission.Decoder
	n int
}

func (d *countingDecoder) DecodeRaw(raw runtime.RawExtension, obj runtime.Object) error {
	d.n++
	return d.Decoder.DecodeRaw(raw, obj)
}

// TestDecodeObjectAsTheDecoder: decodeObject leaves the same Job, or the
// same error, as the decoder, and leaves to it every object that does not
// name batch/v1 Job or no kind at all.
func TestDecodeObjectAsTheDecoder(t *testing.T) {
	job := rawJob(`,"labels":{"a":"b"},"annotations":{"c":"d"}`, `,"parallelism":3,"suspend":false`, `,"nodeSelector":{"n":"1"}`, `{"cpu":"1500m","memory":"2Gi"}`)
	for _, tc := range []struct {
		name, raw string
		onePass   bool
	}{
		{"a Job", job, true},
		{"a Job with no apiVersion or kind", strings.Replace(job, `"apiVersion":"batch/v1","kind":"Job",`, "", 1), true},
		{"a Job with an apiVersion alone", strings.Replace(job, `"kind":"Job",`, "", 1), false},
		{"a Job with a kind alone", strings.Replace(job, `"apiVersion":"batch/v1",`, "", 1), false},
		{"a Pod", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, false},
		{"a Job of an unknown version", `{"apiVersion":"batch/v9","kind":"Job"}`, false},
		{"a spec that is a string", `{"apiVersion":"batch/v1","kind":"Job","spec":"x"}`, false},
		{"a cpu request that is not a quantity", rawJob("", "", "", `{"cpu":"lots"}`), false},
		{"an object that is a string", `"job"`, false},
		{"no object", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := runtime.RawExtension{Raw: []byte(tc.raw)}
			d := &countingDecoder{Decoder: hostileDecoder()}
			got, want := &batchv1.Job{}, &batchv1.Job{}
			err := decodeObject(d, raw, got, kinds.Job{}.GVK())
			wantErr := hostileDecoder().DecodeRaw(raw, want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("error %v, the decoder's %v", err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n%+v\nthe decoder's\n%+v", got, want)
			}
			if onePass := d.n == 0; onePass != tc.onePass {
				t.Errorf("read in one pass: %v, want %v", onePass, tc.onePass)
			}
		})
	}
}

// benchJob is a Job as the API server hands it to the webhook on create:
// defaulted, with the creating client's managed fields.
func benchJob(b *testing.B) []byte {
	job := makeJob("team", "500m")
	job.GenerateName = "bench-"
	job.Labels = map[string]string{"tally.dev/priority-class": "bench-small"}
	job.Spec.Parallelism, job.Spec.Completions, job.Spec.BackoffLimit = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](6)
	job.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	job.Spec.Template.Spec.SchedulerName = corev1.DefaultSchedulerName
	job.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	c := &job.Spec.Template.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = "registry.k8s.io/pause:3.10", corev1.PullIfNotPresent
	c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "batch/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:tally.dev/priority-class":{}}},"f:spec":{"f:backoffLimit":{},"f:completionMode":{},"f:completions":{},"f:parallelism":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:terminationGracePeriodSeconds":{}}}}}`)}}}
	req := jobRequest(b, job)
	req.Resource = metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	req.UserInfo.Username = alice
	review := admissionv1.AdmissionReview{Request: &req.AdmissionRequest}
	review.SetGroupVersionKind(v1Review)
	body, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkJobReview measures a Job create's review from the HTTP request
// to the written answer, through Review and through controller-runtime's
// webhook alone.
func BenchmarkJobReview(b *testing.B) {
	body := benchJob(b)
	for name, h := range map[string]http.Handler{
		"review": testWebhook(newMutator(b, testConfig(b))),
		"bare":   bareWebhook(newMutator(b, testConfig(b))),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, JobPath, strings.NewReader(string(body)))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if !strings.Contains(w.Body.String(), `"allowed":true`) {
					b.Fatal(w.Body.String())
				}
			}
		})
	}
}

// typedSeen records whether JobMutator's requests came with their object
// decoded (Review's typed reading) or as bytes.
type typedSeen struct {
	*JobMutator
	typed, raw int
}

func (m *typedSeen) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Object.Raw == nil && req.Object.Object != nil {
		m.typed++
	} else {
		m.raw++
	}
	return m.JobMutator.Handle(ctx, req)
}

// TestTypedReview: Review hands the Job mutator a create's object decoded
// with the request when the request names its kind before its object and
// the body holds no hostile quantity; otherwise the bytes. The answer is
// the same either way as controller-runtime's webhook's alone.
func TestTypedReview(t *testing.T) {
	job := rawJob(`,"labels":{"a":"b"}`, `,"parallelism":2`, "", `{"cpu":"500m"}`)
	jobKind := `"kind":{"group":"batch","version":"v1","kind":"Job"}`
	body := func(fields ...string) string {
		return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` + strings.Join(fields, ",") +
			`,"resource":{"group":"batch","version":"v1","resource":"jobs"},"namespace":"team","operation":"CREATE","userInfo":{"username":"alice"}}}`
	}
	for _, tc := range []struct {
		name, body string
		typed      bool
	}{
		{"a Job create", body(jobKind, `"object":`+job), true},
		{"a Job without apiVersion and kind", body(jobKind, `"object":`+strings.Replace(job, `"apiVersion":"batch/v1","kind":"Job",`, "", 1)), true},
		{"the object before the kind", body(`"object":`+job, jobKind), false},
		{"the kind twice", body(jobKind, `"object":`+job, jobKind), false},
		{"no object", body(jobKind), false},
		{"a null object", body(jobKind, `"object":null`), false},
		{"an empty object", body(jobKind, `"object":{}`), false},
		{"a Pod for a Job", body(jobKind, `"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`), false},
		{"a Job of another version", body(jobKind, `"object":`+strings.Replace(job, `batch/v1`, `batch/v2`, 1)), false},
		{"a kind tally does not queue", body(`"kind":{"group":"apps","version":"v1","kind":"Deployment"}`, `"object":`+job), false},
		{"a spec that is a string", body(jobKind, `"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":"x"}`), false},
		{"a hostile quantity outside the object", body(jobKind, `"object":`+job, `"dryRun":false,"options":{"q":"1e-30000000"}`), false},
		{"a hostile quantity in the object", body(jobKind, `"object":`+rawJob("", "", "", `{"cpu":"1e-30000000"}`)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &typedSeen{JobMutator: newMutator(t, testConfig(t))}
			w := serveHostile(t, testWebhook(m), tc.body, "")
			if got := m.typed == 1; got != tc.typed || m.typed+m.raw > 1 {
				t.Errorf("typed %d, raw %d; want typed: %v", m.typed, m.raw, tc.typed)
			}
			bare := serveHostile(t, bareWebhook(newMutator(t, testConfig(t))), tc.body, "")
			if !sameAnswer(t, w.Body.Bytes(), bare.Body.Bytes()) {
				t.Errorf("Review answered\n%s\ncontroller-runtime's webhook alone\n%s", w.Body.Bytes(), bare.Body.Bytes())
			}
		})
	}
}
