package kinds

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/queues"
)

// A stopped victim is written back its candidate flavors' affinity when
// its template names fewer of them, not for a topology domain's pins
// alone: those narrow it within its flavor, and its next admission
// replaces them.
func TestRestoreDue(t *testing.T) {
	a := &flavors.Flavor{Name: "a", NodeLabels: map[string]string{"pool": "a"}, TopologyName: "dc"}
	b := &flavors.Flavor{Name: "b", NodeLabels: map[string]string{"pool": "b"}}
	one, two := [][]*flavors.Flavor{{a}}, [][]*flavors.Flavor{{a}, {b}}
	in := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	// with is the candidate affinity of combos, the first term with rs
	// beside its own.
	with := func(combos [][]*flavors.Flavor, rs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
		sel := queues.NodeSelector(nil, combos).DeepCopy()
		sel.NodeSelectorTerms[0].MatchExpressions = append(sel.NodeSelectorTerms[0].MatchExpressions, rs...)
		return sel
	}
	for _, tc := range []struct {
		name   string
		combos [][]*flavors.Flavor
		have   *corev1.NodeSelector
		due    bool
	}{
		{"the candidate affinity", one, with(one), false},
		{"a rack pinned", one, with(one, in("rack", "r1")), false},
		{"a block and a rack pinned", one, with(one, in("rack", "r1"), in("block", "b1")), false},
		{"one of two flavors, pinned", two, queues.NodeSelector(nil, [][]*flavors.Flavor{{a}}), true},
		{"two racks: not a pin", one, with(one, in("rack", "r1", "r2")), true},
		{"another pool beside its own", one, with(one, in("pool", "b")), true},
		{"no affinity", one, nil, true},
		{"a requirement other than In", one, with(one, corev1.NodeSelectorRequirement{Key: "rack", Operator: corev1.NodeSelectorOpExists}), true},
	} {
		job := kindstest.Job("n", "j").Suspend(true).Obj()
		if tc.have != nil {
			job.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: tc.have}}
		}
		o, ok := builtins.Of(job)
		if !ok {
			t.Fatal("not read")
		}
		if got := o.RestoreDue(tc.combos); got != tc.due {
			t.Errorf("%s: RestoreDue = %v, want %v", tc.name, got, tc.due)
		}
	}
}
