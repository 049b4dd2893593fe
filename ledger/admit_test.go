package ledger

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

func TestRestAfter(t *testing.T) {
	for _, tc := range []struct{ took, want time.Duration }{
		{0, 0},
		{time.Millisecond, 0},
		{2 * time.Millisecond, 2 * time.Millisecond},
		{40 * time.Millisecond, 40 * time.Millisecond},
		{5 * time.Second, time.Second},
	} {
		if got := restAfter(tc.took); got != tc.want {
			t.Errorf("restAfter(%s) = %s, want %s", tc.took, got, tc.want)
		}
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
	o, _ := kinds.Of(u)
	w := write{w: o.Workload("q", 0), rv: "7", paths: o.TemplatePaths(), suspend: o.Kind.SuspendPath(), src: o.Source()}
	a100 := [][]*flavors.Flavor{{{Name: "a100", NodeLabels: map[string]string{"gpu": "a100", "zone": "z1"}}}}
	admit, err := affinityPatch(w, a100, false, map[string]any{queues.AnnotationFlavors: "workers=a100"}, queues.StateAdmitted)
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
	restore, err := affinityPatch(w, a100, true, nil, queues.StatePending)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(spec(restore)["nodeSelector"]); got != "map[]" {
		t.Errorf("restored nodeSelector %s, want empty", got)
	}
}
