package kinds

import (
	"slices"
	"strings"
	"testing"
	"time"
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
	o, ok := Of(u)
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
	if !NarrowsBySelector(o.Kind) || NarrowsBySelector(RayJob{}) || NarrowsBySelector(Job{}) {
		t.Error("only JobSet narrows by its nodeSelector")
	}
	for _, c := range []string{"Completed", "Failed"} {
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": c, "status": "True"}}}
		if o, _ := Of(u); !o.Finished {
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
	o, _ := Of(decode(t, jobSet))
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
