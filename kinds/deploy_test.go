package kinds

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestDeployedRBAC checks that deploy/base lets tally read, watch and
// patch every registered kind, and read and watch the objects a kind
// reads its pod sets from (the webhook rules are checked against
// webhook.Configurations in the webhook package).
func TestDeployedRBAC(t *testing.T) {
	data, err := os.ReadFile("../deploy/base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err == nil && r.Kind == "ClusterRole" && r.Name == "tally" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("deploy/base/rbac.yaml has no ClusterRole tally")
	}
	can := func(group, res string) map[string]bool {
		verbs := map[string]bool{}
		for _, rule := range role.Rules {
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
					t.Errorf("ClusterRole tally cannot %s %s.%s, which %s reads", v, ref.Resource, ref.GVK.Group, k.GVK().Kind)
				}
			}
		}
		group, res := k.GVK().Group, k.Resource()
		verbs := can(group, res)
		for _, v := range []string{"get", "list", "watch", "patch"} {
			if !verbs[v] {
				t.Errorf("ClusterRole tally cannot %s %s.%s", v, res, group)
			}
		}
	}
}
