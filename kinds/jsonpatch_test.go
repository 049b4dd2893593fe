package kinds

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
)

// TestJSONPatch: the JSON patch makes the same change to the object as
// the merge patch it comes from, wherever the objects on the way are
// missing or there, and leaves the resourceVersion alone.
func TestJSONPatch(t *testing.T) {
	for _, tc := range []struct {
		name, src, patch string
		ops              int
	}{
		{"labels there, annotations missing",
			`{"metadata":{"labels":{"a":"1","tally.dev/state":"pending"}},"spec":{"suspend":true}}`,
			`{"metadata":{"resourceVersion":"7","labels":{"tally.dev/state":"admitted"},"annotations":{"x":"y"}},"spec":{"suspend":false}}`, 3},
		{"a template with no metadata gets it whole",
			`{"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}`,
			`{"spec":{"template":{"metadata":{"labels":{"tally.dev/workload":"u"}},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}]}}}}}}}`, 2},
		{"a null removes what is there and adds nothing where nothing is",
			`{"spec":{"template":{"spec":{"nodeSelector":{"old":"x","keep":"y"}}}}}`,
			`{"spec":{"template":{"spec":{"nodeSelector":{"old":null,"gone":null,"zone":"a"}}}}}`, 2},
		{"a new object's nulls are dropped",
			`{"spec":{}}`,
			`{"spec":{"nodeSelector":{"old":null,"zone":"a"}}}`, 1},
		{"a list copied whole replaces the list",
			`{"spec":{"replicatedJobs":[{"name":"a"},{"name":"b"}]}}`,
			`{"spec":{"replicatedJobs":[{"name":"a","x":1},{"name":"b"}]}}`, 1},
		{"keys needing escapes",
			`{"metadata":{"annotations":{"a/b~c":"1"}}}`,
			`{"metadata":{"annotations":{"a/b~c":null,"tally.dev/flavors":"main=f"}}}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src map[string]any
			var p MergePatch
			if err := json.Unmarshal([]byte(tc.src), &src); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.patch), &p); err != nil {
				t.Fatal(err)
			}
			ops := JSONPatch(src, p)
			if len(ops) != tc.ops {
				t.Errorf("%d ops, want %d: %+v", len(ops), tc.ops, ops)
			}
			opsJSON, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := jsonpatch.DecodePatch(opsJSON)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decoded.Apply([]byte(tc.src))
			if err != nil {
				t.Fatalf("applying %s: %v", opsJSON, err)
			}
			// The merge patch without its precondition, applied as a merge.
			if m, ok := p["metadata"].(map[string]any); ok {
				delete(m, "resourceVersion")
			}
			pb, _ := json.Marshal(p)
			want, err := jsonpatch.MergePatch([]byte(tc.src), pb)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal(want, &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("JSON patch %s differs from the merge patch (-merge +json):\n%s", opsJSON, diff)
			}
		})
	}
}
