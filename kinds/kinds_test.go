package kinds

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds/kindstest"
)

const gpuTrainingPyTorchJob = `{
  "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
  "metadata": {"name": "pytorch-dist-mnist", "namespace": "team-a", "uid": "u1",
    "labels": {"kueue.x-k8s.io/queue-name": "team-a-queue"}},
  "spec": {
    "runPolicy": {"suspend": true, "cleanPodPolicy": "Running"},
    "pytorchReplicaSpecs": {
      "Worker": {"replicas": 3, "template": {"spec": {"priorityClassName": "research-high",
        "containers": [{"name": "pytorch", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}}}]}}},
      "Master": {"replicas": 1, "template": {"spec": {"priorityClassName": "research-high",
        "containers": [{"name": "pytorch", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}}}]}}}
    }
  },
  "status": {
    "startTime": "2026-01-01T00:00:00Z",
    "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2, "succeeded": 1}},
    "conditions": [
      {"type": "Created", "status": "True"},
      {"type": "Suspended", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}
    ]
  }
}`

func decode(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPyTorchJobRead(t *testing.T) {
	o, ok := builtins.Of(decode(t, gpuTrainingPyTorchJob))
	if !ok {
		t.Fatal("Of: not a known kind")
	}
	if got := o.PodSetNames(); len(got) != 2 || got[0] != "master" || got[1] != "worker" {
		t.Fatalf("pod sets %v, want [master worker]", got)
	}
	if o.PodSets[1].Count != 3 || FieldPath(o.PodSets[1].Path) != "spec.pytorchReplicaSpecs.Worker.template" {
		t.Errorf("worker pod set %+v", o.PodSets[1])
	}
	if !o.Suspended || o.Finished || o.Active != 3 || !o.Started {
		t.Errorf("suspended %v finished %v active %d started %v", o.Suspended, o.Finished, o.Active, o.Started)
	}
	if want := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC); !o.StoppedSince.Equal(want) {
		t.Errorf("stopped since %v, want %v", o.StoppedSince, want)
	}
	if class := o.PriorityClassName(); class != "research-high" {
		t.Errorf("priority class %q", class)
	}
	w := o.Workload("cq", 7)
	if w.Kind != "PyTorchJob" || w.APIVersion != "kubeflow.org/v1" || w.Total().String() == "" {
		t.Errorf("workload %s %s total %s", w.APIVersion, w.Kind, w.Total())
	}
	if got := w.Total()["nvidia.com/gpu"].Format("nvidia.com/gpu"); got != "4" {
		t.Errorf("GPUs %s, want 4 (1 master + 3 workers)", got)
	}
	if p, v := o.SuspendOp(false); p != "/spec/runPolicy/suspend" || v != false {
		t.Errorf("suspend op %s %v", p, v)
	}
	if GVKOf(w) != (PyTorchJob).GVK() {
		t.Errorf("GVKOf %v", GVKOf(w))
	}
}

func TestPyTorchJobWithoutRunPolicy(t *testing.T) {
	u := decode(t, `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p", "namespace": "n"},
	  "spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
	  "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}`)
	o, ok := builtins.Of(u)
	if !ok {
		t.Fatal("not read")
	}
	if o.PodSets[0].Count != 1 {
		t.Errorf("replicas default to 1, got %d", o.PodSets[0].Count)
	}
	if !o.Finished || o.Suspended {
		t.Errorf("finished %v suspended %v", o.Finished, o.Suspended)
	}
	p, v := o.SuspendOp(true)
	if m, ok := v.(map[string]any); p != "/spec/runPolicy" || !ok || m["suspend"] != true {
		t.Errorf("suspend op without runPolicy: %s %v", p, v)
	}
}

func TestPyTorchJobBadReplicas(t *testing.T) {
	u := decode(t, `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
	  "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": "three"}}}}`)
	if _, err := (PyTorchJob).Read(u); err == nil || err.Error() != "spec.pytorchReplicaSpecs.Worker.replicas: not a number" {
		t.Errorf("err %v", err)
	}
}

// builtins is the registry of the built-in kinds.
var builtins = NewRegistry()

func TestJobRead(t *testing.T) {
	job := kindstest.Job("n", "j").ControlledBy("kubeflow.org/v1", "PyTorchJob", "p", "").
		Parallelism(4).Completions(2).Suspend(true).Obj()
	job.Status = batchv1.JobStatus{Active: 1, Terminating: ptr.To[int32](2), Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	o, ok := builtins.Of(job)
	if !ok {
		t.Fatal("not read")
	}
	if o.PodSets[0].Count != 2 || !o.Suspended || !o.Finished || o.Active != 3 || o.Started {
		t.Errorf("%+v", o)
	}
	if builtins.Owner(o) == nil {
		t.Error("a Job controlled by a PyTorchJob is owned by a workload")
	}
	job.OwnerReferences[0].Kind = "CronJob"
	job.OwnerReferences[0].APIVersion = "batch/v1"
	if builtins.Owner(o) != nil {
		t.Error("a CronJob is not a workload kind: its Jobs queue on their own")
	}
	if w := o.Workload("q", 0); w.Kind != "" || GVKOf(w) != (Job{}).GVK() {
		t.Errorf("a Job's Workload names no kind: %q", w.Kind)
	}
	if _, ok := builtins.Of(&corev1.Pod{}); ok {
		t.Error("a Pod is not a workload")
	}
}

func TestMergePatch(t *testing.T) {
	p := MergePatch{}
	p.Set([]string{"spec", "runPolicy", "suspend"}, false)
	p.Set([]string{"spec", "pytorchReplicaSpecs", "Master", "template", "spec"}, 1)
	spec := p["spec"].(map[string]any)
	if spec["runPolicy"].(map[string]any)["suspend"] != false || spec["pytorchReplicaSpecs"].(map[string]any)["Master"] == nil {
		t.Errorf("%v", p)
	}
	if got := Pointer([]string{"metadata", "labels", "tally.dev/state"}); got != "/metadata/labels/tally.dev~1state" {
		t.Errorf("pointer %s", got)
	}
}

// TestKubeflowKinds reads one object of each training-operator kind: the
// same code, another field and replica order.
func TestKubeflowKinds(t *testing.T) {
	for _, k := range []Kubeflow{TFJob, XGBoostJob, PaddleJob, JAXJob} {
		specs := map[string]any{}
		var want []string
		for _, r := range k.Order {
			specs[r] = map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c"}}}}}
			want = append(want, strings.ToLower(r))
		}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{k.Field: specs}}}
		u.SetGroupVersionKind(k.GVK())
		o, ok := builtins.Of(u)
		if !ok {
			t.Fatalf("%s: not read", k.Kind)
		}
		if got := o.PodSetNames(); !slices.Equal(got, want) {
			t.Errorf("%s: pod sets %v, want %v", k.Kind, got, want)
		}
		if o.PodCount() != int64(2*len(want)) {
			t.Errorf("%s: %d pods, want %d", k.Kind, o.PodCount(), 2*len(want))
		}
		if got, want := FieldPath(o.PodSets[0].Path), "spec."+k.Field+"."+k.Order[0]+".template"; got != want {
			t.Errorf("%s: first template at %s, want %s", k.Kind, got, want)
		}
	}
}
