package flavors

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Flavor is a ResourceFlavor: a kind of node, named by the labels its nodes
// carry and the taints they bear.
type Flavor struct {
	Name        string
	NodeLabels  map[string]string
	NodeTaints  []corev1.Taint
	Tolerations []corev1.Toleration
	// TopologyName is the Topology (spec.topologyName) whose levels
	// place the flavor's pods; empty for none.
	TopologyName string
}

// Requirements returns the node selector requirements that pin a pod to the
// flavor's nodes, sorted by key.
func (f *Flavor) Requirements() []corev1.NodeSelectorRequirement {
	keys := slices.Sorted(maps.Keys(f.NodeLabels))
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{f.NodeLabels[k]},
		})
	}
	return reqs
}

// Affinity is what a pod asks of the labels of its node: its nodeSelector
// and the terms of its required node affinity. The terms are ORed, the
// expressions within a term ANDed.
type Affinity struct {
	NodeSelector map[string]string
	Terms        []corev1.NodeSelectorTerm
}

// IsZero reports whether a asks nothing.
func (a Affinity) IsZero() bool { return len(a.NodeSelector) == 0 && len(a.Terms) == 0 }

// Allows reports whether a pod with affinity a could run on the flavor's
// nodes: whether the scheduler would let it onto a node that carries the
// flavor's node labels.
//
// Only the keys the flavor sets count. The flavor says nothing about any
// other key (a hostname, a key that only another flavor sets), so entries
// of the nodeSelector and expressions of a term on such keys are dropped
// first, and a term left with no expression lets the pod onto any of the
// flavor's nodes. matchFields name single nodes and are ignored.
func (f *Flavor) Allows(a Affinity) bool {
	if a.IsZero() {
		return true
	}
	sel, terms := f.restrict(a)
	return matches(sel, terms, f.node())
}

// Tolerates reports whether a pod with these tolerations, and the flavor's
// own, tolerates every taint of the flavor that keeps pods off its nodes.
func (f *Flavor) Tolerates(tolerations []corev1.Toleration) bool {
	return f.untolerated(tolerations) == nil
}

// Mismatch says why a pod with affinity a and these tolerations can never
// run on the flavor's nodes, or "" if it can: the first label or taint of
// the flavor that rules it out, and the part of the pod's nodeSelector or
// required node affinity that does.
func (f *Flavor) Mismatch(a Affinity, tolerations []corev1.Toleration) string {
	if why := f.labelMismatch(a); why != "" {
		return why
	}
	if t := f.untolerated(tolerations); t != nil {
		return fmt.Sprintf("flavor %s has taint %s, which the Job does not tolerate", f.Name, t.ToString())
	}
	return ""
}

func (f *Flavor) labelMismatch(a Affinity) string {
	if a.IsZero() {
		return ""
	}
	sel, terms := f.restrict(a)
	node := f.node()
	if matches(sel, terms, node) {
		return ""
	}
	if !matches(sel, nil, node) {
		for _, k := range slices.Sorted(maps.Keys(sel)) {
			if v := f.NodeLabels[k]; v != sel[k] {
				return fmt.Sprintf("flavor %s has node label %s=%s, the Job selects %s=%s", f.Name, k, v, k, sel[k])
			}
		}
	}
	// Each term fails on at least one of its expressions; name the first.
	var keys, failed []string
	for _, t := range terms {
		for _, e := range t.MatchExpressions {
			one := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{e}}}
			if matches(nil, one, node) {
				continue
			}
			if !slices.Contains(keys, e.Key) {
				keys = append(keys, e.Key)
			}
			failed = append(failed, describe(e))
			break
		}
	}
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = k + "=" + f.NodeLabels[k]
	}
	noun := "node label"
	if len(labels) > 1 {
		noun = "node labels"
	}
	return fmt.Sprintf("flavor %s has %s %s, which the Job's required node affinity does not allow (%s)",
		f.Name, noun, strings.Join(labels, ", "), strings.Join(failed, " or "))
}

// restrict returns the nodeSelector entries and the terms of a, reduced to
// the keys the flavor sets. It returns nil terms when some term is left
// empty: the terms are ORed, so that one allows any of the flavor's nodes.
func (f *Flavor) restrict(a Affinity) (map[string]string, []corev1.NodeSelectorTerm) {
	var sel map[string]string
	for k, v := range a.NodeSelector {
		if _, ok := f.NodeLabels[k]; ok {
			if sel == nil {
				sel = make(map[string]string, len(a.NodeSelector))
			}
			sel[k] = v
		}
	}
	if len(a.Terms) == 0 {
		return sel, nil
	}
	terms := make([]corev1.NodeSelectorTerm, 0, len(a.Terms))
	for _, t := range a.Terms {
		var exprs []corev1.NodeSelectorRequirement
		for _, e := range t.MatchExpressions {
			if _, ok := f.NodeLabels[e.Key]; ok {
				exprs = append(exprs, e)
			}
		}
		if len(exprs) == 0 {
			return sel, nil
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	return sel, terms
}

// node is a node as the flavor describes it: one that carries its labels.
func (f *Flavor) node() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: f.NodeLabels}}
}

// matches asks the scheduler's own node affinity check whether a pod with
// this nodeSelector and these required terms (none: no node affinity)
// selects node. An expression that does not parse matches no node.
func matches(sel map[string]string, terms []corev1.NodeSelectorTerm, node *corev1.Node) bool {
	var aff *corev1.Affinity
	if len(terms) > 0 {
		aff = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	ok, err := nodeaffinity.NewRequiredNodeAffinity(sel, aff).Match(node)
	return ok && err == nil
}

// describe renders a node selector requirement as "zone In [a b]",
// "gpu Exists" or "cores Gt 8".
func describe(e corev1.NodeSelectorRequirement) string {
	switch {
	case e.Operator == corev1.NodeSelectorOpExists || e.Operator == corev1.NodeSelectorOpDoesNotExist:
		return fmt.Sprintf("%s %s", e.Key, e.Operator)
	case (e.Operator == corev1.NodeSelectorOpGt || e.Operator == corev1.NodeSelectorOpLt) && len(e.Values) == 1:
		return fmt.Sprintf("%s %s %s", e.Key, e.Operator, e.Values[0])
	}
	return fmt.Sprintf("%s %s [%s]", e.Key, e.Operator, strings.Join(e.Values, " "))
}

// MergeTolerations returns base plus every toleration of add that base does
// not already hold.
func MergeTolerations(base []corev1.Toleration, add ...corev1.Toleration) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), base...)
	for _, t := range add {
		dup := false
		for i := range out {
			if out[i].MatchToleration(&t) && out[i].TolerationSeconds == nil && t.TolerationSeconds == nil {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// untolerated returns the first taint of the flavor that keeps a pod with
// these tolerations (and the flavor's own) off its nodes, or nil.
func (f *Flavor) untolerated(tolerations []corev1.Toleration) *corev1.Taint {
	for i := range f.NodeTaints {
		t := &f.NodeTaints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(tolerations, t) && !tolerates(f.Tolerations, t) {
			return t
		}
	}
	return nil
}

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, true) {
			return true
		}
	}
	return false
}
