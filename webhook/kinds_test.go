package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// mutateRaw runs the mutating webhook on a created object of kind k and
// reads the object its JSON patch leaves (nil when denied).
func mutateRaw(t *testing.T, k kinds.Kind, raw string) (*kinds.Object, admission.Response) {
	t.Helper()
	gvk := k.GVK()
	resp := newMutator(t, testConfig(t)).Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: "team", Name: "x",
		Kind:   metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Object: runtime.RawExtension{Raw: []byte(raw)},
	}})
	if !resp.Allowed {
		return nil, resp
	}
	out, err := applyJSONPatch([]byte(raw), resp.Patch)
	if err != nil {
		t.Fatalf("applying the patch %s: %v", resp.Patch, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "affinity"); set {
		t.Errorf("the patch wrote spec.affinity on the %s itself: %s", gvk.Kind, resp.Patch)
	}
	o, err := k.Read(u)
	if err != nil {
		t.Fatal(err)
	}
	return o, resp
}

// mutateKind is mutateRaw for an object that is queued.
func mutateKind(t *testing.T, k kinds.Kind, raw string) *kinds.Object {
	t.Helper()
	o, resp := mutateRaw(t, k, raw)
	if o == nil {
		t.Fatalf("denied: %v", resp.Result)
	}
	if !o.Suspended || o.Meta.Labels[queues.LabelQueue] != "q" {
		t.Errorf("not suspended and queued: suspended %v, labels %v", o.Suspended, o.Meta.Labels)
	}
	return o
}

// TestRayJobMutation: every template the RayJob holds, in the worker
// group list too, requires its candidate flavors; KubeRay's default
// submitter, which it does not hold, is left alone.
func TestRayJobMutation(t *testing.T) {
	o := mutateKind(t, kinds.RayJob{}, `{"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "team"},
	  "spec": {"entrypoint": "python x.py", "rayClusterSpec": {
	    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}}},
	    "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "rayStartParams": {},
	      "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}}]}}}`)
	for _, ps := range o.PodSets {
		aff := ps.Template.Spec.Affinity
		switch {
		case ps.Path == nil && aff != nil:
			t.Errorf("%s: the default submitter got an affinity", ps.Name)
		case ps.Path != nil && (aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil):
			t.Errorf("%s at %s: no required node affinity", ps.Name, kinds.FieldPath(ps.Path))
		}
	}
}

// TestJobSetMutation: a JobSet's own nodeSelector moves into the
// required node affinity, so the nodeSelector is tally's to narrow.
func TestJobSetMutation(t *testing.T) {
	o := mutateKind(t, kinds.JobSet{}, `{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "team"},
	  "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"template": {"spec": {
	    "nodeSelector": {"disk": "ssd"}, "containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}}}}]}}`)
	spec := o.PodSets[0].Template.Spec
	if spec.NodeSelector != nil {
		t.Errorf("nodeSelector %v left", spec.NodeSelector)
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
		t.Fatal("no node affinity")
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		b, _ := json.Marshal(term)
		if !strings.Contains(string(b), `{"key":"disk","operator":"In","values":["ssd"]}`) {
			t.Errorf("term %s lacks the user's disk=ssd", b)
		}
	}
	if ann := o.Meta.Annotations[queues.AnnotationUserAffinity]; !strings.Contains(ann, "disk") {
		t.Errorf("the user's own terms (%q) do not keep disk=ssd for the next mutation", ann)
	}
}

// benchWebhook measures the mutating webhook on req, reporting the median
// and 99th percentile latency of single requests.
func benchWebhook(b *testing.B, ks *kinds.Registry, req admission.Request) {
	m := newMutator(b, testConfig(b))
	m.Kinds = ks
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		resp := m.Handle(context.Background(), req)
		lat = append(lat, time.Since(start))
		if !resp.Allowed || len(resp.Patch) == 0 {
			b.Fatalf("allowed %v, patch %s: %v", resp.Allowed, resp.Patch, resp.Result)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkKindWebhook measures the mutating webhook on a workload of each
// kind beyond Job and PyTorchJob: an MPIJob (launcher and 2 workers), a
// JobSet (2 replicated Jobs), a RayJob (head, a worker group, the default
// submitter) and a declared kind.
func BenchmarkKindWebhook(b *testing.B) {
	containers := `"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]`
	declared := kinds.NewDeclared(queues.WorkloadKind{Name: "t", Group: "example.com", Version: "v1", Kind: "TrainJob",
		SuspendPath: []string{"spec", "suspend"}, FinishedConditions: []string{"Succeeded"},
		PodSets: []queues.WorkloadKindPodSet{{Name: "worker", TemplatePath: []string{"spec", "worker", "template"}, CountPath: []string{"spec", "worker", "replicas"}}}}, "trainjobs")
	ks := kinds.NewRegistry()
	ks.Declare([]*kinds.Declared{declared})
	for _, tc := range []struct {
		k   kinds.Kind
		raw string
	}{
		{kinds.MPIJob, `{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m", "namespace": "team"}, "spec": {"mpiReplicaSpecs": {
		  "Launcher": {"replicas": 1, "template": {"spec": {` + containers + `}}}, "Worker": {"replicas": 2, "template": {"spec": {` + containers + `}}}}}}`},
		{kinds.JobSet{}, `{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "team"}, "spec": {"replicatedJobs": [
		  {"name": "leader", "template": {"spec": {"template": {"spec": {` + containers + `}}}}},
		  {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": {"spec": {"nodeSelector": {"disk": "ssd"}, ` + containers + `}}}}}]}}`},
		{kinds.RayJob{}, `{"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "team"}, "spec": {"entrypoint": "python x.py", "rayClusterSpec": {
		  "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {` + containers + `}}},
		  "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "rayStartParams": {}, "template": {"spec": {` + containers + `}}}]}}}`},
		{declared, `{"apiVersion": "example.com/v1", "kind": "TrainJob", "metadata": {"name": "t", "namespace": "team"}, "spec": {"worker": {"replicas": 3, "template": {"spec": {` + containers + `}}}}}`},
	} {
		gvk := tc.k.GVK()
		b.Run(gvk.Kind, func(b *testing.B) {
			benchWebhook(b, ks, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Operation: admissionv1.Create, Namespace: "team", Name: "x",
				Kind:   metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
				Object: runtime.RawExtension{Raw: []byte(tc.raw)},
			}})
		})
	}
}
