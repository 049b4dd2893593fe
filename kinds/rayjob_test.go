package kinds

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const rayJob = `{
  "apiVersion": "ray.io/v1", "kind": "RayJob",
  "metadata": {"name": "r", "namespace": "n", "uid": "u1"},
  "spec": {
    "suspend": true,
    "entrypoint": "python train.py",
    "rayClusterSpec": {
      "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": "ray",
        "resources": {"requests": {"cpu": "2"}}}]}}},
      "workerGroupSpecs": [
        {"groupName": "cpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 5, "rayStartParams": {},
         "template": {"spec": {"containers": [{"name": "w", "image": "ray", "resources": {"requests": {"cpu": "1"}}}]}}},
        {"groupName": "gpu", "replicas": 1, "numOfHosts": 2, "rayStartParams": {},
         "template": {"metadata": {"labels": {"team": "a"}}, "spec": {"containers": [{"name": "w", "image": "ray",
           "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}}
      ]
    }
  },
  "status": {"jobDeploymentStatus": "Running"}
}`

func TestRayJobRead(t *testing.T) {
	u := decode(t, rayJob)
	o, ok := builtins.Of(u)
	if !ok {
		t.Fatal("not read")
	}
	if got, want := o.PodSetNames(), []string{"head", "cpu", "gpu", "submitter"}; !slices.Equal(got, want) {
		t.Fatalf("pod sets %v, want %v", got, want)
	}
	counts := []int64{1, 3, 2, 1}
	paths := []string{"spec.rayClusterSpec.headGroupSpec.template", "spec.rayClusterSpec.workerGroupSpecs.0.template",
		"spec.rayClusterSpec.workerGroupSpecs.1.template", ""}
	for i, ps := range o.PodSets {
		if ps.Count != counts[i] || FieldPath(ps.Path) != paths[i] {
			t.Errorf("pod set %s: %d pods at %q, want %d at %q", ps.Name, ps.Count, FieldPath(ps.Path), counts[i], paths[i])
		}
	}
	// The default submitter counts 500m CPU.
	w := o.Workload("q", 0)
	if got := w.Total()[corev1.ResourceCPU].Format(corev1.ResourceCPU); got != "7500m" {
		t.Errorf("cpu %s, want 7500m (head 2 + 3×1 + 2×1 + submitter 0.5)", got)
	}
	if !o.Suspended || o.Finished || o.Active != 0 || o.Started {
		t.Errorf("suspended %v finished %v active %d started %v", o.Suspended, o.Finished, o.Active, o.Started)
	}
	if p, v := o.SuspendOp(false); p != "/spec/suspend" || v != false {
		t.Errorf("suspend op %s %v", p, v)
	}
	for _, status := range []string{"Complete", "Failed", "ValidationFailed"} {
		u.Object["status"] = map[string]any{"jobDeploymentStatus": status}
		if o, _ := builtins.Of(u); !o.Finished {
			t.Errorf("%s: not finished", status)
		}
	}
}

func TestPodParents(t *testing.T) {
	if got := PodParents(RayJob{}); !slices.Equal(got, []string{"RayCluster"}) {
		t.Errorf("a RayJob's pods come through %v, want [RayCluster]", got)
	}
	for _, k := range []Kind{Job{}, PyTorchJob, JobSet{}, MPIJob} {
		if got := PodParents(k); got != nil {
			t.Errorf("%s's pods come through %v, want none", k.GVK().Kind, got)
		}
	}
}

func TestRayJobVariants(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		want           []int64
		err            string
	}{
		{"autoscaling counts maxReplicas, KubeRay's default where unset", `"rayClusterSpec": {`, `"rayClusterSpec": {"enableInTreeAutoscaling": true, `,
			[]int64{1, 5, 2 * math.MaxInt32, 1}, ""},
		{"replicas above maxReplicas start maxReplicas", `"replicas": 3,`, `"replicas": 9,`, []int64{1, 5, 2, 1}, ""},
		{"replicas below minReplicas start minReplicas", `"replicas": 3,`, `"replicas": 0,`, []int64{1, 1, 2, 1}, ""},
		{"no replicas start minReplicas", `"replicas": 3,`, ``, []int64{1, 1, 2, 1}, ""},
		{"crossed bounds start maxReplicas", `"minReplicas": 1,`, `"minReplicas": 7,`, []int64{1, 5, 2, 1}, ""},
		{"a suspended group starts none", `"groupName": "cpu",`, `"groupName": "cpu", "suspend": true,`, []int64{1, 0, 2, 1}, ""},
		{"a bad maxReplicas", `"maxReplicas": 5`, `"maxReplicas": "five"`, nil, "spec.rayClusterSpec.workerGroupSpecs.0.maxReplicas: not a number"},
		{"own submitter template", `"entrypoint"`, `"submitterPodTemplate": {"spec": {"containers": [{"name": "s"}]}}, "entrypoint"`, []int64{1, 3, 2, 1}, ""},
		{"HTTPMode has no submitter", `"entrypoint"`, `"submissionMode": "HTTPMode", "entrypoint"`, []int64{1, 3, 2}, ""},
		{"a worker group named head", `"groupName": "cpu"`, `"groupName": "head"`, nil,
			`spec.rayClusterSpec.workerGroupSpecs.0.groupName: "head" is empty or names another pod set`},
		{"an existing cluster", `"rayClusterSpec": {`, `"clusterSelector": {"ray.io/cluster": "c"}, "unused": {`, nil,
			"spec.rayClusterSpec: a queued RayJob needs a cluster of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.Replace(rayJob, tc.from, tc.to, 1)
			if s == rayJob {
				t.Fatal("the variant changes nothing")
			}
			o, err := RayJob{}.Read(decode(t, s))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, ps := range o.PodSets {
				got = append(got, ps.Count)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
			}
			if tc.name == "own submitter template" && FieldPath(o.PodSets[3].Path) != "spec.submitterPodTemplate" {
				t.Errorf("submitter at %q", FieldPath(o.PodSets[3].Path))
			}
		})
	}
}

// TestRayJobStarted: with in-tree autoscaling a worker group is charged
// its maxReplicas, but KubeRay starts the cluster with replicas clamped to
// [minReplicas, maxReplicas]: the others are Autoscaled, and the
// Workload's StartCount, which waitForPodsReady waits for, leaves them
// out. Without autoscaling it starts all it is charged for.
func TestRayJobStarted(t *testing.T) {
	const group = `"replicas": 3, "minReplicas": 1, "maxReplicas": 5`
	for _, tc := range []struct {
		name, group    string
		autoscaling    bool
		count, started int64 // the cpu group's
	}{
		{"autoscaling starts replicas", `"replicas": 1, "minReplicas": 0, "maxReplicas": 4`, true, 4, 1},
		{"autoscaling starts minReplicas above replicas", `"replicas": 0, "minReplicas": 2, "maxReplicas": 4`, true, 4, 2},
		{"autoscaling starts minReplicas without replicas", `"minReplicas": 1, "maxReplicas": 4`, true, 4, 1},
		{"autoscaling starts maxReplicas below replicas", `"replicas": 9, "maxReplicas": 4`, true, 4, 4},
		{"autoscaling starts no workers of a suspended group", `"replicas": 1, "maxReplicas": 4, "suspend": true`, true, 4, 0},
		{"autoscaling starts replicas × numOfHosts", `"replicas": 1, "maxReplicas": 4, "numOfHosts": 2`, true, 8, 2},
		{"a fixed cluster starts what it is charged for", `"replicas": 1, "minReplicas": 0, "maxReplicas": 4`, false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := strings.Replace(rayJob, group, tc.group, 1)
			if tc.autoscaling {
				s = strings.Replace(s, `"rayClusterSpec": {`, `"rayClusterSpec": {"enableInTreeAutoscaling": true, `, 1)
			}
			o, err := RayJob{}.Read(decode(t, s))
			if err != nil {
				t.Fatal(err)
			}
			cpu := o.PodSets[1]
			if cpu.Name != "cpu" || cpu.Count != tc.count || cpu.Count-cpu.Autoscaled != tc.started {
				t.Errorf("group %s: %d pods, %d autoscaled: starts %d; want %d pods, starting %d",
					cpu.Name, cpu.Count, cpu.Autoscaled, cpu.Count-cpu.Autoscaled, tc.count, tc.started)
			}
			// The gpu group (replicas 1 × 2 hosts, no bounds) is charged
			// KubeRay's default maxReplicas with autoscaling.
			gpu := int64(2)
			if tc.autoscaling {
				gpu = 2 * math.MaxInt32
			}
			w := o.Workload("q", 0)
			if got, want := w.PodCount(), 1+tc.count+gpu+1; got != want {
				t.Errorf("workload of %d pods, want %d", got, want)
			}
			if got, want := w.StartCount(), 1+tc.started+2+1; got != want {
				t.Errorf("workload starting %d pods, want %d (head, %d cpu workers, 2 gpu workers, submitter)", got, want, tc.started)
			}
		})
	}
}

// TestMergePatchIntoList: a path that crosses a list copies the list
// whole from the object, once, and changes the element in the copy.
func TestMergePatchIntoList(t *testing.T) {
	u := decode(t, rayJob)
	o, _ := builtins.Of(u)
	p := MergePatch{}
	p.Set(o.Kind.SuspendPath(), false)
	for _, ps := range o.PodSets {
		if ps.Path != nil {
			p.SetIn(o.Source(), Join(ps.Path, "metadata", "labels", "tally.dev/workload"), "u1")
		}
	}
	p.SetIn(o.Source(), Join(o.PodSets[2].Path, "spec", "affinity"), map[string]any{"nodeAffinity": nil})
	p.SetIn(o.Source(), []string{"spec", "rayClusterSpec", "workerGroupSpecs", "7", "template"}, 1)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"rayClusterSpec":{"headGroupSpec":{"template":{"metadata":{"labels":{"tally.dev/workload":"u1"}}}},` +
		`"workerGroupSpecs":[{"groupName":"cpu","maxReplicas":5,"minReplicas":1,"rayStartParams":{},"replicas":3,` +
		`"template":{"metadata":{"labels":{"tally.dev/workload":"u1"}},"spec":{"containers":[{"image":"ray","name":"w","resources":{"requests":{"cpu":"1"}}}]}}},` +
		`{"groupName":"gpu","numOfHosts":2,"rayStartParams":{},"replicas":1,` +
		`"template":{"metadata":{"labels":{"tally.dev/workload":"u1","team":"a"}},"spec":{"affinity":{},"containers":[{"image":"ray","name":"w","resources":{"requests":{"cpu":"1","nvidia.com/gpu":"1"}}}]}}}]},` +
		`"suspend":false}}`
	if string(b) != want {
		t.Errorf("patch\n got %s\nwant %s", b, want)
	}
	// The object itself is untouched.
	if labels := u.Object["spec"].(map[string]any)["rayClusterSpec"].(map[string]any)["workerGroupSpecs"].([]any)[0].(map[string]any)["template"].(map[string]any)["metadata"]; labels != nil {
		t.Errorf("the object changed: %v", labels)
	}
}

func TestMPIJobRead(t *testing.T) {
	u := decode(t, `{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m", "namespace": "n"},
	  "spec": {"runPolicy": {"suspend": true}, "mpiReplicaSpecs": {
	    "Worker": {"template": {"spec": {"containers": [{"name": "w"}]}}},
	    "Launcher": {"template": {"spec": {"containers": [{"name": "l"}]}}}}}}`)
	o, ok := builtins.Of(u)
	if !ok {
		t.Fatal("not read")
	}
	if got := o.PodSetNames(); !slices.Equal(got, []string{"launcher", "worker"}) {
		t.Errorf("pod sets %v", got)
	}
	if o.PodSets[0].Count != 1 || o.PodSets[1].Count != 0 {
		t.Errorf("default replicas: launcher %d worker %d, want 1 and 0", o.PodSets[0].Count, o.PodSets[1].Count)
	}
	if !o.Suspended || o.Kind.GVK().Version != "v2beta1" {
		t.Errorf("suspended %v version %s", o.Suspended, o.Kind.GVK().Version)
	}
}
