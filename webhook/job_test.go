package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

var config = queuestest.New().
	Flavor("spot", "nodeLabels: {tier: spot}").
	Flavor("on-demand", "nodeLabels: {tier: on-demand}", "tolerations: [{key: on-demand, operator: Exists, effect: NoSchedule}]").
	ClusterQueue("q", "namespaceSelector: {}").Group("cpu", "memory").
	Quotas("spot", "cpu=4", "memory=8Gi").Quotas("on-demand", "cpu=8", "memory=16Gi").
	ClusterQueue("other", "namespaceSelector: {}").Group("cpu").Quotas("spot", "cpu=1").
	LocalQueue("team", "lq", "other").
	LocalQueue("lq-only", "x", "other").
	LocalQueue("lq-default", "default", "q").
	PriorityClass("high", 1000).
	PriorityClass("bench-small", 10).String()

func testConfig(t testing.TB) *queues.Config {
	t.Helper()
	cfg, _, errs := queues.Parse([]byte(config))
	if len(errs) > 0 {
		t.Fatalf("config: %v", errs)
	}
	return cfg
}

// nsReader serves Namespaces from a fixed set, as the manager's cache would.
type nsReader map[string]*corev1.Namespace

func (r nsReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ns, ok := r[key.Name]
	if !ok {
		return fmt.Errorf("namespace %q not found", key.Name)
	}
	ns.DeepCopyInto(obj.(*corev1.Namespace))
	return nil
}

func (r nsReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not supported")
}

// apiReader serves Namespaces from a fixed set and workloads of kinds
// served by CRDs from another, as the API server would to the mutator's
// owner check.
type apiReader struct {
	nsReader
	objects map[client.ObjectKey]*unstructured.Unstructured
}

func (r apiReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return r.nsReader.Get(ctx, key, obj, opts...)
	}
	o, ok := r.objects[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: u.GetKind()}, key.Name)
	}
	u.Object = runtime.DeepCopyJSON(o.Object)
	return nil
}

// jobSet is a JobSet of namespace team, suspended or not, queued (in q)
// or not.
func jobSet(name string, suspended, queued bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": name, "namespace": "team", "uid": "uid-" + name},
		"spec": map[string]any{"suspend": suspended, "replicatedJobs": []any{map[string]any{"name": "w", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "c"}}}}}}}}},
	}}
	if queued {
		u.SetLabels(map[string]string{queues.LabelQueue: "q"})
	}
	return u
}

func newMutator(t testing.TB, cfg *queues.Config) *JobMutator {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return &JobMutator{
		Store: queues.NewStore(cfg),
		Namespaces: nsReader{
			"team":         {ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "q"}}},
			"unbound":      {ObjectMeta: metav1.ObjectMeta{Name: "unbound"}},
			"tally-system": {ObjectMeta: metav1.ObjectMeta{Name: "tally-system", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "q"}}},
			"lq-only":      {ObjectMeta: metav1.ObjectMeta{Name: "lq-only", Labels: map[string]string{queues.LabelManaged: "true"}}},
			"lq-default":   {ObjectMeta: metav1.ObjectMeta{Name: "lq-default", Labels: map[string]string{queues.LabelManaged: "true"}}},
		},
		// The API server knows a namespace the cache has not seen yet.
		APIReader: apiReader{nsReader: nsReader{
			"fresh": {ObjectMeta: metav1.ObjectMeta{Name: "fresh", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "q"}}},
		}, objects: map[client.ObjectKey]*unstructured.Unstructured{
			{Namespace: "team", Name: "admitted"}: jobSet("admitted", false, true),
			{Namespace: "team", Name: "pending"}:  jobSet("pending", true, true),
			{Namespace: "team", Name: "unqueued"}: jobSet("unqueued", false, false),
		}},
		Namespace: "tally-system",
		Decoder:   admission.NewDecoder(scheme),
	}
}

func jobRequest(t testing.TB, job *batchv1.Job) admission.Request {
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: job.Namespace, Name: job.Name,
		Kind:   metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// ownedJob is a Job of namespace team, suspended or not, whose
// controller owner is the JobSet name of the given UID.
func ownedJob(name string, uid types.UID, suspended bool) *batchv1.Job {
	j := makeJob("team", "1")
	j.Spec.Suspend = ptr.To(suspended)
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: name, UID: uid, Controller: ptr.To(true)}}
	return j
}

func makeJob(ns string, cpu string) *batchv1.Job {
	return kindstest.Job(ns, "j").TypeMeta().Request(corev1.ResourceCPU, cpu).Obj()
}

// apply runs the handler and applies its patch, returning the mutated Job.
func apply(t testing.TB, m *JobMutator, job *batchv1.Job) (*batchv1.Job, admission.Response) {
	t.Helper()
	resp := m.Handle(context.Background(), jobRequest(t, job))
	if !resp.Allowed {
		return nil, resp
	}
	raw, _ := json.Marshal(job)
	if len(resp.Patch) > 0 {
		var err error
		raw, err = applyJSONPatch(raw, resp.Patch)
		if err != nil {
			t.Fatalf("applying patch: %v", err)
		}
	}
	out := &batchv1.Job{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out, resp
}

func TestJobMutation(t *testing.T) {
	m := newMutator(t, testConfig(t))
	got, resp := apply(t, m, makeJob("team", "1"))
	if len(resp.Warnings) != 0 {
		t.Errorf("warnings: %v", resp.Warnings)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend {
		t.Fatalf("not suspended")
	}
	wantLabels := map[string]string{queues.LabelQueue: "q", queues.LabelState: "pending"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantTerms := []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}},
	}
	if diff := cmp.Diff(wantTerms, queues.RequiredTerms(&got.Spec.Template.Spec)); diff != "" {
		t.Errorf("candidate affinity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Key: "on-demand", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, got.Spec.Template.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}

	again, _ := apply(t, m, got)
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("not idempotent (-once +twice):\n%s", diff)
	}
}

// TestJobPatchTouchesOnlyItsFields: the patch replaces the fields tally
// sets and leaves the rest of the object as the API server sent it, fields
// that tally's client types do not know included.
func TestJobPatchTouchesOnlyItsFields(t *testing.T) {
	m := newMutator(t, testConfig(t))
	req := jobRequest(t, makeJob("team", "1"))
	var doc map[string]any
	if err := json.Unmarshal(req.Object.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["spec"].(map[string]any)["futureKnob"] = "on"
	podSpec := doc["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	podSpec["futurePodField"] = map[string]any{"a": 1.0}
	req.Object.Raw, _ = json.Marshal(doc)

	resp := m.Handle(context.Background(), req)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v, want an allowed JSON patch", resp.AdmissionResponse)
	}
	var paths []string
	for _, op := range patchOps(t, resp) {
		paths = append(paths, op.Op+" "+op.Path)
	}
	want := []string{"add /metadata/labels", "add /metadata/annotations", "add /spec/suspend",
		"add /spec/template/spec/affinity", "add /spec/template/spec/tolerations"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("patch operations (-want +got):\n%s", diff)
	}
	raw, err := applyJSONPatch(req.Object.Raw, resp.Patch)
	if err != nil {
		t.Fatalf("applying patch: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	spec := out["spec"].(map[string]any)
	if spec["futureKnob"] != "on" || spec["suspend"] != true {
		t.Errorf("spec after the patch: futureKnob %v, suspend %v", spec["futureKnob"], spec["suspend"])
	}
	podOut := spec["template"].(map[string]any)["spec"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"a": 1.0}, podOut["futurePodField"]); diff != "" {
		t.Errorf("unknown pod spec field (-want +got):\n%s", diff)
	}
	if podOut["affinity"] == nil || podOut["tolerations"] == nil {
		t.Errorf("affinity or tolerations missing after the patch: %v", podOut)
	}
}

func TestJobMutationCases(t *testing.T) {
	cfg := testConfig(t)
	cases := []struct {
		name      string
		job       func() *batchv1.Job
		noConfig  bool // none has loaded yet
		allowed   bool
		mutated   bool
		state     string
		queue     string
		terms     int
		warning   string
		errSubstr string
		code      int32 // of a denial
		// localQueue is the kueue.x-k8s.io/queue-name label it gets.
		localQueue string
	}{
		{name: "unbound namespace passes untouched", job: func() *batchv1.Job { return makeJob("unbound", "1") }, allowed: true},
		{name: "a namespace neither the cache nor the API server can read is denied, retryably", job: func() *batchv1.Job { return makeJob("ghost", "1") },
			code: http.StatusServiceUnavailable, errSubstr: `tally: cannot read namespace ghost to queue this Job (namespace "ghost" not found); this is temporary, retry the request`},
		{name: "a namespace the cache misses is read from the API server", job: func() *batchv1.Job { return makeJob("fresh", "1") },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "an unknown queue-name is denied with the namespace's LocalQueues", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{queues.LabelKueueQueueName: "nope"}
			return j
		}, code: http.StatusForbidden, errSubstr: `tally: metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue "nope" does not exist in namespace team; its LocalQueues: lq`},
		{name: "a namespace with LocalQueues only is managed through them", job: func() *batchv1.Job {
			j := makeJob("lq-only", "1")
			j.Labels = map[string]string{queues.LabelKueueQueueName: "x"}
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "other", terms: 1, localQueue: "x"},
		{name: "no queue-name and no default LocalQueue: created unqueued, with a warning", job: func() *batchv1.Job { return makeJob("lq-only", "1") },
			allowed: true, warning: "tally: this Job is not queued and runs outside any quota: it has no kueue.x-k8s.io/queue-name label, and namespace lq-only has no tally.dev/cluster-queue annotation and no LocalQueue named default (its LocalQueues: x)"},
		{name: "no queue-name goes to the LocalQueue named default, and is labelled so", job: func() *batchv1.Job { return makeJob("lq-default", "1") },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2, localQueue: queues.DefaultLocalQueue},
		{name: "tally's own namespace is never managed", job: func() *batchv1.Job { return makeJob("tally-system", "1") }, allowed: true},
		{name: "a Job that fits is pending with both candidates", job: func() *batchv1.Job { return makeJob("team", "1") }, allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "a nodeSelector narrows the candidates", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "on-demand"}
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "q", terms: 1},
		{name: "a Job too big for any flavor is inadmissible with a warning", job: func() *batchv1.Job { return makeJob("team", "9") },
			// Narrowed to its candidates all the same, should a config
			// change let it be admitted.
			allowed: true, mutated: true, state: "inadmissible", queue: "q", terms: 2, warning: "Can never fit: requests cpu=9, ClusterQueue q allows at most 8 in flavor on-demand (nominal 8 + borrowing 0)"},
		{name: "an uncovered resource is inadmissible with a warning", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Spec.Template.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			return j
		}, allowed: true, mutated: true, state: "inadmissible", queue: "q", terms: 2, warning: "requests nvidia.com/gpu=1, which ClusterQueue q does not cover"},
		{name: "the queue label overrides the namespace", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{queues.LabelQueue: "other"}
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "other", terms: 1},
		{name: "Kueue's queue-name resolves through a LocalQueue", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{queues.LabelKueueQueueName: "lq"}
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "other", terms: 1, localQueue: "lq"},
		{name: "a queue label naming a queue the namespace is not bound to is denied with the queues it may use", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{queues.LabelQueue: "nope"}
			return j
		}, code: http.StatusForbidden, errSubstr: `tally: metadata.labels[tally.dev/cluster-queue]: namespace team may not use ClusterQueue "nope"; it may use: other, q`},
		{name: "a user-set admitted state is reset to pending", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Labels = map[string]string{queues.LabelState: "admitted"}
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "an explicit suspend=false is overridden", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			f := false
			j.Spec.Suspend = &f
			return j
		}, allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "before any config the Job waits as pending", noConfig: true, job: func() *batchv1.Job { return makeJob("team", "1") },
			allowed: true, mutated: true, state: "pending", queue: "q", warning: "has not loaded a valid config"},
		{name: "before any config a namespace labelled managed by its LocalQueues is denied, retryably", noConfig: true,
			job: func() *batchv1.Job { return makeJob("lq-only", "1") }, code: http.StatusServiceUnavailable,
			errSubstr: "tally: namespace lq-only is managed, but this tally replica has not loaded a valid config yet; retry the request"},
		{name: "before any config an unbound namespace passes untouched", noConfig: true, job: func() *batchv1.Job { return makeJob("unbound", "1") }, allowed: true},
		{name: "a Job of an admitted JobSet is part of it", job: func() *batchv1.Job { return ownedJob("admitted", "uid-admitted", false) }, allowed: true},
		{name: "a suspended Job of a pending JobSet is part of it", job: func() *batchv1.Job { return ownedJob("pending", "uid-pending", true) }, allowed: true},
		{name: "a running Job of a pending JobSet is queued", job: func() *batchv1.Job { return ownedJob("pending", "uid-pending", false) },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "a Job that names an admitted JobSet by a wrong UID is queued", job: func() *batchv1.Job { return ownedJob("admitted", "uid-forged", false) },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "a Job that names an unqueued JobSet is queued", job: func() *batchv1.Job { return ownedJob("unqueued", "uid-unqueued", false) },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "a Job that names a JobSet that does not exist is queued", job: func() *batchv1.Job { return ownedJob("ghost", "uid-ghost", false) },
			allowed: true, mutated: true, state: "pending", queue: "q", terms: 2},
		{name: "a malformed user-affinity annotation is rejected", job: func() *batchv1.Job {
			j := makeJob("team", "1")
			j.Annotations = map[string]string{queues.AnnotationUserAffinity: "{not json"}
			return j
		}, errSubstr: "metadata.annotations[tally.dev/user-affinity]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.noConfig {
				c = nil
			}
			m := newMutator(t, c)
			got, resp := apply(t, m, tc.job())
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if !resp.Allowed {
				if !strings.Contains(resp.Result.Message, tc.errSubstr) {
					t.Fatalf("message %q does not contain %q", resp.Result.Message, tc.errSubstr)
				}
				if tc.code != 0 && resp.Result.Code != tc.code {
					t.Fatalf("code %d, want %d", resp.Result.Code, tc.code)
				}
				return
			}
			if tc.mutated != (len(resp.Patch) > 0) {
				t.Fatalf("mutated = %v, want %v", len(resp.Patch) > 0, tc.mutated)
			}
			w := strings.Join(resp.Warnings, "\n")
			if (tc.warning == "") != (w == "") || !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q, want one containing %q", w, tc.warning)
			}
			if !tc.mutated {
				return
			}
			if got.Labels[queues.LabelKueueQueueName] != tc.localQueue {
				t.Errorf("queue-name %q, want %q", got.Labels[queues.LabelKueueQueueName], tc.localQueue)
			}
			if got.Labels[queues.LabelState] != tc.state || got.Labels[queues.LabelQueue] != tc.queue {
				t.Errorf("state,queue = %q,%q want %q,%q", got.Labels[queues.LabelState], got.Labels[queues.LabelQueue], tc.state, tc.queue)
			}
			if n := len(queues.RequiredTerms(&got.Spec.Template.Spec)); n != tc.terms {
				t.Errorf("%d affinity terms, want %d", n, tc.terms)
			}
			if !*got.Spec.Suspend {
				t.Errorf("not suspended")
			}
		})
	}
}

func TestJobMutationBadRequests(t *testing.T) {
	m := newMutator(t, testConfig(t))
	cases := []struct {
		name string
		raw  string
		op   admissionv1.Operation
		code int32
	}{
		{"truncated object", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team"`, admissionv1.Create, http.StatusBadRequest},
		{"wrong type for spec", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team"},"spec":"x"}`, admissionv1.Create, http.StatusBadRequest},
		{"annotations of the wrong type", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"team","annotations":{"a":1}}}`, admissionv1.Create, http.StatusBadRequest},
		{"empty object", ``, admissionv1.Create, http.StatusBadRequest},
		{"an UPDATE is not mutated", `{}`, admissionv1.Update, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: tc.op, Namespace: "team", Object: runtime.RawExtension{Raw: []byte(tc.raw)},
			}})
			if resp.Result.Code != tc.code {
				t.Errorf("code = %d, want %d (%s)", resp.Result.Code, tc.code, resp.Result.Message)
			}
			if tc.code != http.StatusOK && (resp.Allowed || !strings.Contains(resp.Result.Message, "tally: decoding Job")) {
				t.Errorf("want a decoding error, got allowed=%v %q", resp.Allowed, resp.Result.Message)
			}
		})
	}
}

// BenchmarkJobWebhook measures the Job handler in process, reporting the
// median and 99th percentile latency of single requests.
func BenchmarkJobWebhook(b *testing.B) {
	m := newMutator(b, testConfig(b))
	req := jobRequest(b, makeJob("team", "1"))
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		resp := m.Handle(context.Background(), req)
		lat = append(lat, time.Since(start))
		if !resp.Allowed {
			b.Fatal(resp.Result.Message)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func applyJSONPatch(doc, patch []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}

// TestDefaultWorkloadPriorityClass: with a WorkloadPriorityClass named
// default in the config, a workload that names none is labelled with it
// at creation, as Kueue's WorkloadPriorityClassDefaulting does; one that
// names a class keeps it; without one, nothing is added.
func TestDefaultWorkloadPriorityClass(t *testing.T) {
	withDefault, _, errs := queues.Parse([]byte(config + "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: default}\nvalue: 50\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	named := func() *batchv1.Job {
		j := makeJob("team", "1")
		j.Labels = map[string]string{queues.LabelPriorityClass: "high"}
		return j
	}
	for _, tc := range []struct {
		name      string
		cfg       *queues.Config
		job       *batchv1.Job
		kueue, my string
	}{
		{"names none: the default", withDefault, makeJob("team", "1"), queues.DefaultWorkloadPriorityClass, ""},
		{"names one: kept", withDefault, named(), "", "high"},
		{"no default class: nothing", testConfig(t), makeJob("team", "1"), "", ""},
	} {
		got, resp := apply(t, newMutator(t, tc.cfg), tc.job)
		if !resp.Allowed {
			t.Fatalf("%s: denied: %v", tc.name, resp.Result)
		}
		if got.Labels[queues.LabelKueuePriorityClass] != tc.kueue || got.Labels[queues.LabelPriorityClass] != tc.my {
			t.Errorf("%s: labels %v, want %s=%q and %s=%q", tc.name, got.Labels, queues.LabelKueuePriorityClass, tc.kueue, queues.LabelPriorityClass, tc.my)
		}
	}
}

// patchOps is resp's JSON patch, decoded.
func patchOps(t testing.TB, resp admission.Response) []kinds.JSONPatchOp {
	t.Helper()
	var ops []kinds.JSONPatchOp
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("the response's patch %q: %v", resp.Patch, err)
	}
	return ops
}

// TestWithPatch: the response's patch is the ops as RFC 6902 has them: an
// add or replace carries its value, null included, a remove none; no ops
// leave the response without a patch.
func TestWithPatch(t *testing.T) {
	for _, tc := range []struct {
		ops  []kinds.JSONPatchOp
		want string
	}{
		{nil, ""},
		{[]kinds.JSONPatchOp{{Op: "add", Path: "/spec/suspend", Value: true}}, `[{"op":"add","path":"/spec/suspend","value":true}]`},
		{[]kinds.JSONPatchOp{{Op: "add", Path: "/a"}, {Op: "replace", Path: "/b"}}, `[{"op":"add","path":"/a","value":null},{"op":"replace","path":"/b","value":null}]`},
		{[]kinds.JSONPatchOp{{Op: "remove", Path: "/metadata/labels/a~1b"}}, `[{"op":"remove","path":"/metadata/labels/a~1b"}]`},
		{[]kinds.JSONPatchOp{{Op: "add", Path: "/metadata/labels", Value: map[string]string{"q": "<&>"}}},
			`[{"op":"add","path":"/metadata/labels","value":{"q":"\u003c\u0026\u003e"}}]`},
	} {
		resp := admission.Allowed("")
		if err := withPatch(&resp, tc.ops); err != nil {
			t.Fatal(err)
		}
		if string(resp.Patch) != tc.want || (tc.want == "") != (resp.PatchType == nil) {
			t.Errorf("ops %+v: patch %s (type %v), want %s", tc.ops, resp.Patch, resp.PatchType, tc.want)
		}
	}
}
