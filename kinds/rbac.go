package kinds

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Rules returns the cluster-wide RBAC rules the kinds of ks (nil: the
// built-in ones) need: every workload kind read, watched and patched (its
// suspend field, tally's labels and annotations); the objects its pod sets
// are read from (References) read and watched; the objects its operator
// makes its pods through (PodParents) read. Pod kinds are left out: tally
// needs more of pods than any kind does, and asks for it beside these.
// Rules of one API group and the same verbs are merged, in registry order.
func Rules(ks *Registry) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	add := func(group, resource string, verbs ...string) {
		for i := range rules {
			if rules[i].APIGroups[0] == group && slices.Equal(rules[i].Verbs, verbs) {
				if !slices.Contains(rules[i].Resources, resource) {
					rules[i].Resources = append(rules[i].Resources, resource)
				}
				return
			}
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs})
	}
	for _, k := range ks.All() {
		if IsPodKind(k) {
			continue
		}
		gvk := k.GVK()
		add(gvk.Group, k.Resource(), "get", "list", "watch", "patch")
		for _, ref := range References(k) {
			add(ref.GVK.Group, ref.Resource, "get", "list", "watch")
		}
		for _, parent := range PodParents(k) {
			add(gvk.Group, strings.ToLower(parent)+"s", "get")
		}
	}
	return rules
}
