package ledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

// TestStripPodKeepsPlacementWhileGated: a pod held by tally's gate keeps
// where it may run, which the ledger checks before it releases the pod;
// a running one does not need it.
func TestStripPodKeepsPlacementWhileGated(t *testing.T) {
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}}}}
	pod := func(gated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{queues.LabelWorkload: "uid"}},
			Spec: corev1.PodSpec{NodeName: "n", NodeSelector: map[string]string{"zone": "a"},
				Affinity: &corev1.Affinity{
					NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required},
					PodAffinity:  &corev1.PodAffinity{},
				}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: queues.SchedulingGate}}
		}
		return p
	}
	got, err := StripPod(pod(true))
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod).Spec
	if s.NodeName != "n" || s.NodeSelector["zone"] != "a" || s.Affinity == nil || s.Affinity.NodeAffinity == nil ||
		s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != required || s.Affinity.PodAffinity != nil {
		t.Errorf("a gated pod stripped: node %q, nodeSelector %v, affinity %+v; want its node, nodeSelector and required node affinity alone", s.NodeName, s.NodeSelector, s.Affinity)
	}
	got, err = StripPod(pod(false))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*corev1.Pod).Spec; s.NodeName != "" || s.NodeSelector != nil || s.Affinity != nil {
		t.Errorf("a running pod stripped keeps its placement: %q, %v, %v", s.NodeName, s.NodeSelector, s.Affinity)
	}
}
