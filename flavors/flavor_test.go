package flavors

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func terms(ts ...corev1.NodeSelectorTerm) Affinity { return Affinity{Terms: ts} }

const (
	in           = corev1.NodeSelectorOpIn
	notIn        = corev1.NodeSelectorOpNotIn
	exists       = corev1.NodeSelectorOpExists
	doesNotExist = corev1.NodeSelectorOpDoesNotExist
	gt           = corev1.NodeSelectorOpGt
	lt           = corev1.NodeSelectorOpLt
)

// TestAllows matches a pod's nodeSelector and required node affinity
// against a flavor taken as a node that carries its labels, on the keys
// the flavor sets only.
func TestAllows(t *testing.T) {
	zoneA := &Flavor{Name: "zone-a", NodeLabels: map[string]string{"zone": "a", "cores": "16"}}
	bare := &Flavor{Name: "bare", NodeLabels: map[string]string{}}
	for _, tc := range []struct {
		name   string
		flavor *Flavor
		aff    Affinity
		want   bool
	}{
		{"nothing asked", zoneA, Affinity{}, true},
		{"In the flavor's value", zoneA, terms(term(req("zone", in, "a"))), true},
		{"In among several values", zoneA, terms(term(req("zone", in, "b", "a"))), true},
		{"In another value", zoneA, terms(term(req("zone", in, "b"))), false},
		{"NotIn the flavor's value", zoneA, terms(term(req("zone", notIn, "a"))), false},
		{"NotIn another value", zoneA, terms(term(req("zone", notIn, "b", "c"))), true},
		{"Exists on a key the flavor sets", zoneA, terms(term(req("zone", exists))), true},
		{"DoesNotExist on a key the flavor sets", zoneA, terms(term(req("zone", doesNotExist))), false},
		{"DoesNotExist on a key the flavor does not set", zoneA, terms(term(req("gpu", doesNotExist))), true},
		{"Exists on a key the flavor does not set is dropped", zoneA, terms(term(req("gpu", exists))), true},
		{"Gt below the label", zoneA, terms(term(req("cores", gt, "8"))), true},
		{"Gt at the label", zoneA, terms(term(req("cores", gt, "16"))), false},
		{"Lt above the label", zoneA, terms(term(req("cores", lt, "32"))), true},
		{"Lt below the label", zoneA, terms(term(req("cores", lt, "8"))), false},
		{"Gt with a value that is no number matches nothing", zoneA, terms(term(req("cores", gt, "many"))), false},
		{"expressions of a term are ANDed", zoneA, terms(term(req("zone", in, "a"), req("cores", gt, "32"))), false},
		{"terms are ORed: the second allows", zoneA, terms(term(req("zone", in, "b")), term(req("zone", in, "a"))), true},
		{"terms are ORed: none allows", zoneA, terms(term(req("zone", in, "b")), term(req("zone", in, "c"))), false},
		{"a key no flavor sets is dropped", zoneA, terms(term(req("kubernetes.io/hostname", in, "node-1"))), true},
		{"a dropped key leaves the rest of its term", zoneA, terms(term(req("kubernetes.io/hostname", in, "node-1"), req("zone", in, "b"))), false},
		{"a term left empty allows any node", zoneA, terms(term(req("zone", in, "b")), term(req("kubernetes.io/hostname", in, "node-1"))), true},
		{"matchFields are ignored", zoneA, terms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", in, "node-1")}}), true},
		{"a flavor without labels allows any affinity", bare, terms(term(req("zone", in, "b"))), true},
		{"nodeSelector on the flavor's value", zoneA, Affinity{NodeSelector: map[string]string{"zone": "a"}}, true},
		{"nodeSelector on another value", zoneA, Affinity{NodeSelector: map[string]string{"zone": "b"}}, false},
		{"nodeSelector on a key the flavor does not set", zoneA, Affinity{NodeSelector: map[string]string{"disk": "ssd"}}, true},
		{"nodeSelector and affinity both allow", zoneA, Affinity{NodeSelector: map[string]string{"zone": "a"}, Terms: []corev1.NodeSelectorTerm{term(req("cores", gt, "8"))}}, true},
		{"nodeSelector allows, affinity does not", zoneA, Affinity{NodeSelector: map[string]string{"zone": "a"}, Terms: []corev1.NodeSelectorTerm{term(req("cores", gt, "32"))}}, false},
		{"affinity allows, nodeSelector does not", zoneA, Affinity{NodeSelector: map[string]string{"zone": "b"}, Terms: []corev1.NodeSelectorTerm{term(req("zone", in, "a", "b"))}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.flavor.Allows(tc.aff); got != tc.want {
				t.Errorf("%s.Allows(%+v) = %v, want %v", tc.flavor.Name, tc.aff, got, tc.want)
			}
			// Mismatch explains exactly when Allows refuses.
			if why := tc.flavor.Mismatch(tc.aff, nil); (why == "") != tc.want {
				t.Errorf("Mismatch = %q, want a reason iff Allows refuses", why)
			}
		})
	}
}

// TestMismatch checks the reasons: the flavor, its label or taint, and the
// part of the Job that rules the flavor out.
func TestMismatch(t *testing.T) {
	zoneA := &Flavor{Name: "zone-a", NodeLabels: map[string]string{"zone": "a", "accel": "t4", "cores": "16"}}
	tainted := &Flavor{Name: "gpu", NodeLabels: map[string]string{"zone": "a"},
		NodeTaints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	for _, tc := range []struct {
		name        string
		flavor      *Flavor
		aff         Affinity
		tolerations []corev1.Toleration
		want        string
	}{
		{"one term", zoneA, terms(term(req("zone", in, "b"))),
			nil, "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone In [b])"},
		{"values are listed", zoneA, terms(term(req("zone", in, "b", "c"))),
			nil, "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone In [b c])"},
		{"NotIn", zoneA, terms(term(req("zone", notIn, "a"))),
			nil, "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone NotIn [a])"},
		{"DoesNotExist", zoneA, terms(term(req("accel", doesNotExist))),
			nil, "flavor zone-a has node label accel=t4, which the Job's required node affinity does not allow (accel DoesNotExist)"},
		{"Lt", zoneA, terms(term(req("cores", lt, "8"))),
			nil, "flavor zone-a has node label cores=16, which the Job's required node affinity does not allow (cores Lt 8)"},
		{"the failing expression of a term is named, not the others", zoneA, terms(term(req("zone", in, "a"), req("accel", in, "a100"), req("kubernetes.io/hostname", in, "n1"))),
			nil, "flavor zone-a has node label accel=t4, which the Job's required node affinity does not allow (accel In [a100])"},
		{"each ORed term is named", zoneA, terms(term(req("zone", in, "b")), term(req("accel", in, "a100"))),
			nil, "flavor zone-a has node labels zone=a, accel=t4, which the Job's required node affinity does not allow (zone In [b] or accel In [a100])"},
		{"a label named by two terms is named once", zoneA, terms(term(req("zone", in, "b")), term(req("zone", in, "c"))),
			nil, "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone In [b] or zone In [c])"},
		{"the nodeSelector is named first", zoneA, Affinity{NodeSelector: map[string]string{"zone": "b", "accel": "t4"}, Terms: []corev1.NodeSelectorTerm{term(req("cores", gt, "32"))}},
			nil, "flavor zone-a has node label zone=a, the Job selects zone=b"},
		{"the affinity is named when the nodeSelector allows", zoneA, Affinity{NodeSelector: map[string]string{"zone": "a"}, Terms: []corev1.NodeSelectorTerm{term(req("cores", gt, "32"))}},
			nil, "flavor zone-a has node label cores=16, which the Job's required node affinity does not allow (cores Gt 32)"},
		{"an untolerated taint", tainted, Affinity{},
			nil, "flavor gpu has taint gpu=true:NoSchedule, which the Job does not tolerate"},
		{"labels are named before taints", tainted, terms(term(req("zone", in, "b"))),
			nil, "flavor gpu has node label zone=a, which the Job's required node affinity does not allow (zone In [b])"},
		{"a tolerated taint and allowed labels", tainted, terms(term(req("zone", in, "a"))),
			[]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.flavor.Mismatch(tc.aff, tc.tolerations); got != tc.want {
				t.Errorf("Mismatch:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestTolerates(t *testing.T) {
	f := &Flavor{Name: "spot", NodeTaints: []corev1.Taint{
		{Key: "spot", Effect: corev1.TaintEffectNoSchedule},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
	}}
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists}
	if f.Tolerates(nil) {
		t.Errorf("Tolerates(nil) = true; the NoSchedule taint is not tolerated")
	}
	if !f.Tolerates([]corev1.Toleration{spot}) {
		t.Errorf("Tolerates(spot) = false; PreferNoSchedule taints do not keep pods off")
	}
	f.Tolerations = []corev1.Toleration{spot}
	if !f.Tolerates(nil) {
		t.Errorf("Tolerates(nil) = false with the toleration on the flavor")
	}
}
