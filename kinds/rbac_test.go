package kinds

import (
	"slices"
	"testing"
)

// TestRules checks that Rules lets tally read, watch and patch every
// built-in workload kind, and read and watch the objects a kind reads its
// pod sets from (hack/manifests writes these rules into the install).
func TestRules(t *testing.T) {
	rules := Rules(nil)
	can := func(group, res string) map[string]bool {
		verbs := map[string]bool{}
		for _, rule := range rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, res) {
				for _, v := range rule.Verbs {
					verbs[v] = true
				}
			}
		}
		return verbs
	}
	for _, k := range builtins.All() {
		for _, ref := range References(k) {
			verbs := can(ref.GVK.Group, ref.Resource)
			for _, v := range []string{"get", "list", "watch"} {
				if !verbs[v] {
					t.Errorf("the rules do not let tally %s %s.%s, which %s reads", v, ref.Resource, ref.GVK.Group, k.GVK().Kind)
				}
			}
		}
		group, res := k.GVK().Group, k.Resource()
		verbs := can(group, res)
		for _, v := range []string{"get", "list", "watch", "patch"} {
			if got := verbs[v]; got == IsPodKind(k) {
				t.Errorf("the rules let tally %s %s.%s: %v", v, res, group, got)
			}
		}
	}
	if verbs := can("ray.io", "rayclusters"); !verbs["get"] || len(verbs) != 1 {
		t.Errorf("rayclusters.ray.io (a RayJob's pods' parent): verbs %v, want get only", verbs)
	}
}
