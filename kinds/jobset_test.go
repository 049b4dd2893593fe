package kinds

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

const jobSet = `{
  "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
  "metadata": {"name": "js", "namespace": "n", "uid": "u2"},
  "spec": {
    "suspend": true,
    "replicatedJobs": [
      {"name": "driver", "template": {"spec": {"template": {"spec": {"containers": [{"name": "d", "resources": {"requests": {"cpu": "1"}}}]}}}}},
      {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 3,
        "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "2"}}}]}}}}}
    ]
  },
  "status": {
    "replicatedJobsStatus": [{"name": "driver", "active": 1}, {"name": "workers", "active": 2}],
    "conditions": [{"type": "Suspended", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}]
  }
}`

func TestJobSetRead(t *testing.T) {
	u := decode(t, jobSet)
	o, ok := builtins.Of(u)
	if !ok {
		t.Fatal("not read")
	}
	if got := o.PodSetNames(); !slices.Equal(got, []string{"driver", "workers"}) {
		t.Fatalf("pod sets %v", got)
	}
	if o.PodSets[0].Count != 1 || o.PodSets[1].Count != 6 {
		t.Errorf("counts %d %d, want 1 and 6 (2 replicas × min(parallelism 4, completions 3))", o.PodSets[0].Count, o.PodSets[1].Count)
	}
	if got := FieldPath(o.PodSets[1].Path); got != "spec.replicatedJobs.1.template.spec.template" {
		t.Errorf("path %s", got)
	}
	if got := FieldPath(o.PodSets[1].CountPath); got != "spec.replicatedJobs.1.replicas" {
		t.Errorf("count path %s", got)
	}
	if !o.Suspended || o.Finished || o.Active != 3 || o.Started {
		t.Errorf("suspended %v finished %v active %d started %v", o.Suspended, o.Finished, o.Active, o.Started)
	}
	if want := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC); !o.StoppedSince.Equal(want) {
		t.Errorf("stopped since %v", o.StoppedSince)
	}
	if _, ok := writesOf(o.Kind).(selectorWrites); !ok || writesOf(RayJob{}) != (templateWrites{}) || writesOf(Job{}) != (templateWrites{}) {
		t.Error("only JobSet narrows by its nodeSelector")
	}
	for _, c := range []string{"Completed", "Failed"} {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": c, "status": "True"}}}
		if o, _ := builtins.Of(u); !o.Finished {
			t.Errorf("%s: not finished", c)
		}
	}
	bad := strings.Replace(jobSet, `"name": "workers"`, `"name": "driver"`, 1)
	if _, err := (JobSet{}).Read(decode(t, bad)); err == nil || !strings.Contains(err.Error(), `spec.replicatedJobs.1.name: "driver"`) {
		t.Errorf("a repeated name: %v", err)
	}
	bad = strings.Replace(jobSet, `"replicas": 2`, `"replicas": "two"`, 1)
	if _, err := (JobSet{}).Read(decode(t, bad)); err == nil || err.Error() != "spec.replicatedJobs.1.replicas: not a number" {
		t.Errorf("bad replicas: %v", err)
	}
}

// TestMergePatchLiteralInList: inside a list copied into the patch, a
// map's null entries are dropped rather than sent as values.
func TestMergePatchLiteralInList(t *testing.T) {
	o, _ := builtins.Of(decode(t, jobSet))
	p := MergePatch{}
	p.SetIn(o.Source(), Join(o.PodSets[0].Path, "spec", "nodeSelector"), map[string]any{"old": nil, "zone": "a"})
	sel := p["spec"].(map[string]any)["replicatedJobs"].([]any)[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"].(map[string]any)
	if len(sel) != 1 || sel["zone"] != "a" {
		t.Errorf("nodeSelector %v, want {zone: a}", sel)
	}
	q := MergePatch{}
	q.Set([]string{"spec", "nodeSelector"}, map[string]any{"old": nil})
	if v, ok := q["spec"].(map[string]any)["nodeSelector"].(map[string]any)["old"]; !ok || v != nil {
		t.Error("outside a list, a null entry stays: it deletes the key")
	}
}

// TestSelectorNarrowedPatch: a JobSet's admission writes its replicated
// Jobs whole (a merge patch cannot address one element of a list), with
// the chosen flavor's node labels as each template's nodeSelector and
// the affinity left as the webhook made it; the restore after an eviction
// clears the nodeSelector. A Job's admission narrows the affinity.
func TestSelectorNarrowedPatch(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(`{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
	  "metadata": {"name": "js", "namespace": "n", "uid": "u1", "resourceVersion": "7"},
	  "spec": {"suspend": true, "replicatedJobs": [
	    {"name": "workers", "replicas": 2, "template": {"spec": {"template": {"spec": {
	      "nodeSelector": {"gpu": "h100"},
	      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}]}}},
	      "containers": [{"name": "w", "image": "x"}]}}}}}]}}`)); err != nil {
		t.Fatal(err)
	}
	o, _ := builtins.Of(u)
	w := Target{Kind: o.Kind, W: o.Workload("q", 0), RV: "7", Paths: o.TemplatePaths(), Suspend: o.Kind.SuspendPath(), Src: o.Source()}
	a100 := [][]*flavors.Flavor{{{Name: "a100", NodeLabels: map[string]string{"gpu": "a100", "zone": "z1"}}}}
	admit, err := w.Admit(a100[:1], map[string]any{queues.AnnotationFlavors: "workers=a100"})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(patch []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(patch, &m); err != nil {
			t.Fatal(err)
		}
		rj := m["spec"].(map[string]any)["replicatedJobs"].([]any)
		if len(rj) != 1 || rj[0].(map[string]any)["replicas"] != float64(2) {
			t.Fatalf("replicatedJobs not written whole: %v", rj)
		}
		return rj[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	}
	s := spec(admit)
	if got := fmt.Sprint(s["nodeSelector"]); got != "map[gpu:a100 zone:z1]" {
		t.Errorf("admission nodeSelector %s, want the flavor's labels (the old gpu=h100 replaced)", got)
	}
	if got := fmt.Sprint(s["affinity"]); !strings.Contains(got, "a100") || len(s["containers"].([]any)) != 1 {
		t.Errorf("affinity or containers changed: %v", s)
	}
	restore, err := w.Restore(a100)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(spec(restore)["nodeSelector"]); got != "map[]" {
		t.Errorf("restored nodeSelector %s, want empty", got)
	}
}
