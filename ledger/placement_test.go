package ledger

import (
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// TestClaimHoldsItsPlacement: a preemptor waiting for its victims holds
// where it goes once they are gone, as long as its claim stands, and
// gives it back with the claim.
func TestClaimHoldsItsPlacement(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {topologyName: dc}
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	l := New(nil, nil, queues.NewStore(nil), &scenarioRecorder{}, logr.Discard(), Options{})
	l.cfg = cfg
	l.topo.Configure(cfg)
	l.topo.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r1", corev1.LabelHostname: "n1"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	e := &entry{Entry: machine.New(machine.Pending)}
	e.W = reactWorkload(2)
	owner := queues.Owner{Namespace: "ns", UID: "uid-j"}
	placed := &placement{flavor: "tas", sets: []queues.TopologyAssignment{{Levels: []string{"rack", corev1.LabelHostname},
		Domains: []queues.DomainCount{{Values: []string{"r1", "n1"}, Count: 1}}}}}

	e.placed = placed
	e.Claim = &machine.Claim{Victims: map[types.UID]bool{"uid-v": true}, Usage: queues.Usage{{Flavor: "tas", Resource: corev1.ResourceCPU}: flavors.Amount(2000)}}
	l.followPlacement(e)
	if p, ok := l.topo.Held(owner); !ok || p.Flavor != "tas" || !queues.SameAssignments(p.Sets, placed.sets) {
		t.Fatalf("a preemptor with a claim holds %+v (%v), want its placement on r1/n1", p, ok)
	}

	e.Claim = nil
	l.followPlacement(e)
	if p, ok := l.topo.Held(owner); ok || e.placed != nil {
		t.Fatalf("a preemptor whose claim is given back holds %+v, placed %+v; want nothing", p, e.placed)
	}

	e.placed = placed
	l.followPlacement(e)
	if _, ok := l.topo.Held(owner); ok {
		t.Fatal("a pending workload with no claim and no charge holds a placement")
	}
}
