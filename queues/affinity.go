package queues

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// maxCombos bounds the candidate node affinity: beyond it, the Job keeps
// only the first combinations (flavor order is preference order anyway).
const maxCombos = 32

// Candidates returns the flavor combinations a Workload could be admitted
// to: for each resource group it uses, the flavors that its nodeSelector and
// tolerations do not rule out, combined across groups, in preference order.
func (c *Config) Candidates(cq *ClusterQueue, w *Workload) [][]*flavors.Flavor {
	combos := [][]*flavors.Flavor{nil}
	used := map[int]bool{}
	for r := range w.Total() {
		if gi := cq.GroupFor(r); gi >= 0 {
			used[gi] = true
		}
	}
	for gi := range cq.ResourceGroups {
		if !used[gi] {
			continue
		}
		var fls []*flavors.Flavor
		for _, fq := range cq.ResourceGroups[gi].Flavors {
			if f := c.Flavors[fq.Name]; f != nil && f.Mismatch(w.NodeSelector, w.Tolerations) == "" {
				fls = append(fls, f)
			}
		}
		var next [][]*flavors.Flavor
		for _, combo := range combos {
			for _, f := range fls {
				if len(next) < maxCombos {
					next = append(next, append(append([]*flavors.Flavor(nil), combo...), f))
				}
			}
		}
		combos = next
	}
	if len(combos) == 1 && len(combos[0]) == 0 {
		return nil
	}
	return combos
}

// FlavorsByName looks flavors up, in order, skipping unknown names.
func (c *Config) FlavorsByName(names []string) []*flavors.Flavor {
	out := make([]*flavors.Flavor, 0, len(names))
	for _, n := range names {
		if f := c.Flavors[n]; f != nil {
			out = append(out, f)
		}
	}
	return out
}

// NodeSelector builds a required node affinity: each of the user's own
// terms (or one empty term) ANDed with each flavor combination's node
// labels. Terms are ORed, so a pod may land on any combination's nodes.
// It returns nil when some term would require nothing.
func NodeSelector(user []corev1.NodeSelectorTerm, combos [][]*flavors.Flavor) *corev1.NodeSelector {
	base := user
	if len(base) == 0 {
		base = []corev1.NodeSelectorTerm{{}}
	}
	var terms []corev1.NodeSelectorTerm
	for _, u := range base {
		for _, combo := range combos {
			t := *u.DeepCopy()
			for _, f := range combo {
				t.MatchExpressions = append(t.MatchExpressions, f.Requirements()...)
			}
			terms = append(terms, t)
		}
		if len(combos) == 0 {
			terms = append(terms, *u.DeepCopy())
		}
	}
	for _, t := range terms {
		// An empty term matches no node, but here it stands for "any
		// node", so one of them lifts the whole requirement.
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			return nil
		}
	}
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// Tolerations returns the union of the combinations' flavor tolerations.
func Tolerations(combos [][]*flavors.Flavor) []corev1.Toleration {
	var out []corev1.Toleration
	for _, combo := range combos {
		for _, f := range combo {
			out = flavors.MergeTolerations(out, f.Tolerations...)
		}
	}
	return out
}

// EncodeUserTerms renders the user's own required terms for the
// AnnotationUserAffinity annotation ("" when there are none).
func EncodeUserTerms(terms []corev1.NodeSelectorTerm) string {
	if len(terms) == 0 {
		return ""
	}
	b, _ := json.Marshal(terms)
	return string(b)
}

// DecodeUserTerms parses the AnnotationUserAffinity annotation.
func DecodeUserTerms(s string) ([]corev1.NodeSelectorTerm, error) {
	if s == "" {
		return nil, nil
	}
	var terms []corev1.NodeSelectorTerm
	if err := json.Unmarshal([]byte(s), &terms); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationUserAffinity, err)
	}
	return terms, nil
}

// RequiredTerms returns a pod spec's required node affinity terms.
func RequiredTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}
