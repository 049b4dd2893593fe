package flavors

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Flavor is a ResourceFlavor: a kind of node, named by the labels its nodes
// carry and the taints they bear.
type Flavor struct {
	Name        string
	NodeLabels  map[string]string
	NodeTaints  []corev1.Taint
	Tolerations []corev1.Toleration
}

// Requirements returns the node selector requirements that pin a pod to the
// flavor's nodes, sorted by key.
func (f *Flavor) Requirements() []corev1.NodeSelectorRequirement {
	keys := make([]string, 0, len(f.NodeLabels))
	for k := range f.NodeLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{f.NodeLabels[k]},
		})
	}
	return reqs
}

// Mismatch says why a pod with this nodeSelector and these tolerations can
// never run on the flavor's nodes, or "" if it can.
func (f *Flavor) Mismatch(nodeSelector map[string]string, tolerations []corev1.Toleration) string {
	keys := make([]string, 0, len(nodeSelector))
	for k := range nodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := f.NodeLabels[k]; ok && v != nodeSelector[k] {
			return fmt.Sprintf("flavor %s has node label %s=%s, the Job selects %s=%s", f.Name, k, v, k, nodeSelector[k])
		}
	}
	all := append(append([]corev1.Toleration(nil), tolerations...), f.Tolerations...)
	for i := range f.NodeTaints {
		t := &f.NodeTaints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(all, t) {
			return fmt.Sprintf("flavor %s has taint %s, which the Job does not tolerate", f.Name, t.ToString())
		}
	}
	return ""
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

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, true) {
			return true
		}
	}
	return false
}
