package kinds

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// torchRuntime is a ClusterTrainingRuntime in the shape of Trainer
// v2.3's torch-distributed, with both initializers and a default of two
// nodes.
const torchRuntime = `{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
  "metadata": {"name": "torch", "resourceVersion": "5"},
  "spec": {"mlPolicy": {"numNodes": 2, "torch": {}}, "template": {"spec": {"replicatedJobs": [
    {"name": "dataset-initializer", "replicas": 3, "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
      "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "resources": {"requests": {"cpu": "1"}}}]}}}}},
    {"name": "node", "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
      "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
      "spec": {"template": {"spec": {"containers": [
        {"name": "node", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
        {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}}]}}}}},
    {"name": "evaluator", "replicas": 2, "template": {"spec": {"parallelism": 3,
      "template": {"spec": {"containers": [{"name": "e", "resources": {"requests": {"cpu": "1"}}}]}}}}}
  ]}}}}`

func newTrainJob(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	return decode(t, `{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
	  "metadata": {"name": "tj", "namespace": "team-a", "uid": "u1", "resourceVersion": "9"}, "spec": `+spec+`}`)
}

// lookupOf serves objs by kind, namespace and name.
func lookupOf(objs ...*unstructured.Unstructured) Lookup {
	return func(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
		for _, o := range objs {
			if o.GroupVersionKind() == gvk && o.GetNamespace() == ns && o.GetName() == name {
				return o, nil
			}
		}
		return nil, nil
	}
}

// podSetSummary is each pod set as name=count, with the requests of its
// containers.
func podSetSummary(o *Object) []string {
	var out []string
	for _, ps := range o.PodSets {
		s := fmt.Sprintf("%s=%d", ps.Name, ps.Count)
		for _, c := range ps.Template.Spec.Containers {
			s += fmt.Sprintf(" %s:%v", c.Name, resources(c.Resources))
		}
		out = append(out, s)
	}
	return out
}

func resources(r corev1.ResourceRequirements) string {
	s := ""
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"req", r.Requests}, {"lim", r.Limits}} {
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"} {
			if q, ok := l.list[n]; ok {
				s += fmt.Sprintf("[%s %s=%s]", l.name, n, q.String())
			}
		}
	}
	return s
}

func TestTrainJobPodSets(t *testing.T) {
	ctr := decode(t, torchRuntime)
	tr := decode(t, torchRuntime)
	tr.SetKind("TrainingRuntime")
	tr.SetNamespace("team-a")
	tr.SetName("own")
	mpi := decode(t, `{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "mpi"},
	  "spec": {"mlPolicy": {"numNodes": 1, "mpi": {"runLauncherAsNode": true}}, "template": {"spec": {"replicatedJobs": [
	    {"name": "launcher", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
	      "spec": {"template": {"spec": {"containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}]}}}}},
	    {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}]}}}}}]}}}}`)
	k := TrainJob{get: lookupOf(ctr, tr, mpi)}
	for _, tc := range []struct {
		name, spec string
		want       []string
		ref        ObjectRef
	}{{
		name: "the runtime's own counts: mlPolicy.numNodes for the trainer, one replica of an initializer, replicas × parallelism for the rest",
		spec: `{"runtimeRef": {"name": "torch"}}`,
		want: []string{"dataset-initializer=1 dataset-initializer:[req cpu=1]", "node=2 node:[req cpu=2][req memory=1Gi] sidecar:[req cpu=100m]", "evaluator=6 e:[req cpu=1]"},
		ref:  ObjectRef{GVK: trainJobRefs[0].GVK, Name: "torch"},
	}, {
		name: "numNodes and resourcesPerNode override the trainer's Job, resource by resource, in its container node only",
		spec: `{"runtimeRef": {"name": "torch", "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
		  "trainer": {"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "8"}, "limits": {"nvidia.com/gpu": "2"}}}}`,
		want: []string{"dataset-initializer=1 dataset-initializer:[req cpu=1]", "node=4 node:[req cpu=8][req memory=1Gi][lim nvidia.com/gpu=2] sidecar:[req cpu=100m]", "evaluator=6 e:[req cpu=1]"},
		ref:  ObjectRef{GVK: trainJobRefs[0].GVK, Name: "torch"},
	}, {
		name: "a TrainingRuntime of the TrainJob's namespace",
		spec: `{"runtimeRef": {"name": "own", "kind": "TrainingRuntime"}, "trainer": {"numNodes": 3}}`,
		want: []string{"dataset-initializer=1 dataset-initializer:[req cpu=1]", "node=3 node:[req cpu=2][req memory=1Gi] sidecar:[req cpu=100m]", "evaluator=6 e:[req cpu=1]"},
		ref:  ObjectRef{GVK: trainJobRefs[1].GVK, Namespace: "team-a", Name: "own"},
	}, {
		name: "MPI that runs its launcher as a node: the Job named node runs numNodes-1",
		spec: `{"runtimeRef": {"name": "mpi"}, "trainer": {"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": "4"}}}}`,
		want: []string{"launcher=1 node:[req cpu=4]", "node=2 node:[req cpu=4]"},
		ref:  ObjectRef{GVK: trainJobRefs[0].GVK, Name: "mpi"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := k.Read(newTrainJob(t, tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if o.Unresolved != "" {
				t.Fatalf("unresolved: %s", o.Unresolved)
			}
			if diff := cmp.Diff(tc.want, podSetSummary(o)); diff != "" {
				t.Errorf("pod sets (-want +got):\n%s", diff)
			}
			if !o.DependsOn(tc.ref) || len(o.Refs) != 1 {
				t.Errorf("refs %v, want %v", o.Refs, tc.ref)
			}
		})
	}
}

// TestTrainJobUnresolved: a TrainJob whose runtime does not exist reads,
// with no pod sets, names the runtime it waits for, and its Workload
// can never be admitted until it appears.
func TestTrainJobUnresolved(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    TrainJob
		spec string
		want string
	}{
		{"missing ClusterTrainingRuntime", TrainJob{get: lookupOf()}, `{"runtimeRef": {"name": "x"}}`, `ClusterTrainingRuntime "x" not found`},
		{"missing TrainingRuntime", TrainJob{get: lookupOf()}, `{"runtimeRef": {"name": "x", "kind": "TrainingRuntime"}}`, `TrainingRuntime "team-a/x" not found`},
		{"another kind", TrainJob{get: lookupOf()}, `{"runtimeRef": {"name": "x", "kind": "Runtime", "apiGroup": "example.com"}}`,
			`spec.runtimeRef: "x" of kind "Runtime" in group "example.com" is not a ClusterTrainingRuntime or TrainingRuntime of trainer.kubeflow.org`},
		{"no lookup", TrainJob{}, `{"runtimeRef": {"name": "x"}}`, `ClusterTrainingRuntime "x" cannot be read here`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.k.Read(newTrainJob(t, tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if o.Unresolved != tc.want || len(o.PodSets) != 0 {
				t.Errorf("unresolved %q with %d pod sets, want %q", o.Unresolved, len(o.PodSets), tc.want)
			}
			if w := o.Workload("q", 0); w.Unresolved != tc.want {
				t.Errorf("Workload.Unresolved %q", w.Unresolved)
			}
		})
	}
}

// TestRegistryLookup: the registry's TrainJob reads through the Lookup
// SetLookup gives it, declared kinds or not.
func TestRegistryLookup(t *testing.T) {
	r := NewRegistry()
	r.Declare(nil)
	r.SetLookup(lookupOf(decode(t, torchRuntime)))
	o, ok := r.Of(newTrainJob(t, `{"runtimeRef": {"name": "torch"}}`))
	if !ok || o.Unresolved != "" || o.PodCount() != 9 || o.RefsVersion != "5" {
		t.Fatalf("read %v: unresolved %q, %d pods, refs version %q", ok, o.Unresolved, o.PodCount(), o.RefsVersion)
	}
	if got := References(r.For(trainJobGVK)); len(got) != 2 {
		t.Errorf("references %v", got)
	}
}

// TestTrainJobWrites: admission is tally's entry of spec.runtimePatches,
// beside other managers' (kept whole), with the flavor's node labels as
// the nodeSelector and its tolerations on every replicated Job, and
// un-suspends; eviction suspends; the restore drops tally's entry.
func TestTrainJobWrites(t *testing.T) {
	u := newTrainJob(t, `{"suspend": true, "runtimeRef": {"name": "torch"}, "runtimePatches": [
	  {"manager": "someone", "time": "2026-01-01T00:00:00Z", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}}]}`)
	o, err := TrainJob{get: lookupOf(decode(t, torchRuntime))}.Read(u)
	if err != nil {
		t.Fatal(err)
	}
	tgt := Target{Kind: o.Kind, W: o.Workload("q", 0), RV: "9", Paths: o.TemplatePaths(), Suspend: o.Kind.SuspendPath(), Src: o.Source()}
	gpu := []*flavors.Flavor{{Name: "a100", NodeLabels: map[string]string{"gpu": "a100"},
		Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	admit, err := tgt.Admit([][]*flavors.Flavor{gpu}, map[string]any{queues.AnnotationFlavors: "node=a100"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Spec struct {
			Suspend        *bool `json:"suspend"`
			RuntimePatches []struct {
				Manager string          `json:"manager"`
				Time    string          `json:"time"`
				Spec    json.RawMessage `json:"trainingRuntimeSpec"`
			} `json:"runtimePatches"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(admit, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend == nil || *got.Spec.Suspend || len(got.Spec.RuntimePatches) != 2 {
		t.Fatalf("admission %s: want suspend false and two runtime patches", admit)
	}
	if p := got.Spec.RuntimePatches[0]; p.Manager != "someone" || p.Time != "2026-01-01T00:00:00Z" {
		t.Errorf("another manager's patch changed: %+v", p)
	}
	ours := got.Spec.RuntimePatches[1]
	var spec struct {
		Template struct {
			Spec struct {
				ReplicatedJobs []struct {
					Name     string `json:"name"`
					Template struct {
						Spec struct {
							Template corev1.PodTemplateSpec `json:"template"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"replicatedJobs"`
			} `json:"spec"`
		} `json:"template"`
	}
	if err := json.Unmarshal(ours.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if ours.Manager != TrainJobPatchManager || len(spec.Template.Spec.ReplicatedJobs) != 3 {
		t.Fatalf("tally's patch %s", ours.Spec)
	}
	for _, rj := range spec.Template.Spec.ReplicatedJobs {
		pod := rj.Template.Spec.Template
		if pod.Spec.NodeSelector["gpu"] != "a100" || len(pod.Spec.Tolerations) != 1 || pod.Labels[queues.LabelWorkload] != "u1" ||
			pod.Annotations[queues.AnnotationFlavors] != "node=a100" || pod.Annotations[queues.AnnotationPodQueue] != "q" {
			t.Errorf("replicated Job %s: %+v", rj.Name, pod)
		}
	}

	// Admitted, then evicted: suspended, and due a restore while tally's
	// patch is there.
	var m map[string]any
	_ = json.Unmarshal(admit, &m)
	admitted := u.DeepCopy()
	_ = unstructured.SetNestedField(admitted.Object, runtimeJSON(m["spec"].(map[string]any)["runtimePatches"]), "spec", "runtimePatches")
	_ = unstructured.SetNestedField(admitted.Object, false, "spec", "suspend")
	ao, _ := TrainJob{get: lookupOf(decode(t, torchRuntime))}.Read(admitted)
	if !ao.RestoreDue(nil) || o.RestoreDue(nil) {
		t.Errorf("RestoreDue: admitted %v (want true), never admitted %v (want false)", ao.RestoreDue(nil), o.RestoreDue(nil))
	}
	tgt.Src = ao.Source()
	ev, err := tgt.Evict(nil)
	if err != nil || string(ev.Patch) != `{"metadata":{"labels":{"tally.dev/state":"pending"}},"spec":{"suspend":true}}` {
		t.Errorf("eviction %s, %v", ev.Patch, err)
	}
	restore, err := tgt.Restore(nil)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.RuntimePatches = nil
	if err := json.Unmarshal(restore, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend || len(got.Spec.RuntimePatches) != 1 || got.Spec.RuntimePatches[0].Manager != "someone" {
		t.Errorf("restore %s: want suspended, with only the other manager's patch", restore)
	}
}

// runtimeJSON is v as the JSON decoder gives it, for an unstructured
// object.
func runtimeJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// TestTrainJobRuntimePatches: each pod set's template is the runtime's
// with the TrainJob's runtime patches applied in order, as strategic
// merge patches of the Job's pod template, as the trainer controller
// applies them: a later entry wins a key of the nodeSelector, and the
// tolerations of the last entry that sets them replace the others.
func TestTrainJobRuntimePatches(t *testing.T) {
	k := TrainJob{get: lookupOf(decode(t, torchRuntime))}
	o, err := k.Read(newTrainJob(t, `{"runtimeRef": {"name": "torch"}, "runtimePatches": [
	  {"manager": "mallory", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
	    "metadata": {"labels": {"team": "x"}},
	    "spec": {"nodeSelector": {"flavor": "b", "zone": "z"}, "tolerations": [{"operator": "Exists"}],
	      "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}},
	  {"manager": "tally.dev/tally", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
	    "spec": {"nodeSelector": {"flavor": "a"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}}}}]}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dataset-initializer=1 dataset-initializer:[req cpu=1]", "node=2 node:[req cpu=2][req memory=1Gi] sidecar:[req cpu=100m]", "evaluator=6 e:[req cpu=1]"}, podSetSummary(o)); diff != "" {
		t.Errorf("pod sets (-want +got):\n%s", diff)
	}
	node := o.PodSets[1].Template
	got := fmt.Sprintf("labels %v, nodeSelector %v, tolerations %v, env %v", node.Labels, node.Spec.NodeSelector, node.Spec.Tolerations, node.Spec.Containers[0].Env)
	want := "labels map[team:x], nodeSelector map[flavor:a zone:z], tolerations [{gpu Exists   <nil>}], env [{A 1 nil}]"
	if got != want {
		t.Errorf("the node pod set's template: %s, want %s", got, want)
	}
	if other := o.PodSets[0].Template.Spec; other.NodeSelector != nil || other.Tolerations != nil {
		t.Errorf("dataset-initializer, patched by no entry: nodeSelector %v, tolerations %v", other.NodeSelector, other.Tolerations)
	}
	if diff := cmp.Diff([][]string{{"spec", "runtimePatches"}, {"spec", "trainer", "numNodes"}}, [][]string{o.PodSets[1].PatchPath, o.PodSets[1].CountPath}); diff != "" {
		t.Errorf("the node pod set's PatchPath and CountPath (-want +got):\n%s", diff)
	}
}
