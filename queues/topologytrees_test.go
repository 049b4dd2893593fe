package queues

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/flavors"
)

// rackNode is a node of pool pool in rack r1 of block b1 with gpus GPUs.
func rackNode(name, pool string, gpus int64, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool, "block": "b1", "rack": "r1", "kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{nvgpu: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

// rackRoom is how many 1-GPU pods rack r1 of flavor gpu holds.
func rackRoom(f *FlavorDomains) int32 {
	t := f.Trees["gpu"]
	if t == nil {
		return -1
	}
	for _, lr := range t.Room(flavors.Resources{nvgpu: 1}, 1) {
		if lr.Level == "rack" {
			if len(lr.Domains) == 0 {
				return 0
			}
			return lr.Domains[0].Count
		}
	}
	return 0
}

func TestFlavorDomains(t *testing.T) {
	cfg := topologyConfig("gpu", "plain")
	f := NewFlavorDomains()
	// Nodes seen before any config are placed once it comes.
	f.SetNode(rackNode("n1", "a", 4, true))
	f.Configure(cfg)
	if got := rackRoom(f); got != 4 {
		t.Fatalf("rack r1 holds %d pods after the config came, want 4 (n1's)", got)
	}
	if qs := f.SetNode(rackNode("n2", "a", 2, true)); len(qs) != 1 || qs[0] != "tas" {
		t.Fatalf("a node of flavor gpu changed queues %v, want [tas]", qs)
	}
	if got := rackRoom(f); got != 6 {
		t.Fatalf("rack r1 holds %d, want 6", got)
	}
	if qs := f.SetNode(rackNode("n2", "a", 2, true)); qs != nil {
		t.Fatalf("a node seen again unchanged changed queues %v", qs)
	}
	f.SetNode(rackNode("n3", "b", 8, true)) // flavor plain's: no tree
	f.SetNode(rackNode("n4", "a", 8, false))
	if got := rackRoom(f); got != 6 {
		t.Fatalf("rack r1 holds %d with a node of another flavor and an unready one, want 6", got)
	}
	// A placement held takes room; one let go gives it back.
	w := Owner{Namespace: "ns", UID: "w"}
	p := &Placement{Flavor: "gpu", Sets: []TopologyAssignment{{Levels: rackTopology.Levels,
		Domains: []DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 3}}}}, PerPod: []flavors.Resources{{nvgpu: 1}}}
	f.Hold(w, p)
	if got := rackRoom(f); got != 3 {
		t.Fatalf("rack r1 holds %d with 3 GPUs of n1 held, want 3", got)
	}
	// A new config keeps what is held.
	f.Configure(topologyConfig("gpu"))
	if got := rackRoom(f); got != 3 {
		t.Fatalf("rack r1 holds %d after a new config, want 3", got)
	}
	if got, ok := f.Held(w); !ok || got.Flavor != "gpu" {
		t.Fatalf("held %v %v", got, ok)
	}
	f.SetNode(rackNode("n4", "a", 8, true))
	if got := rackRoom(f); got != 11 {
		t.Fatalf("rack r1 holds %d once n4 is Ready, want 11", got)
	}
	f.Hold(w, nil)
	if qs := f.RemoveNode("n1"); len(qs) != 1 {
		t.Fatalf("removing n1 changed queues %v", qs)
	}
	if got := rackRoom(f); got != 10 {
		t.Fatalf("rack r1 holds %d without n1 and with nothing held, want 10", got)
	}
	if f.RemoveNode("n1") != nil {
		t.Fatal("removing an unknown node changed queues")
	}
}

// TestFlavorDomainsPods: every pod bound to a node takes what it
// requests; a workload's placement reserves only what its pods bound
// there do not take yet, so it is counted once.
func TestFlavorDomainsPods(t *testing.T) {
	f := NewFlavorDomains()
	f.Configure(topologyConfig())
	f.SetNode(rackNode("n1", "a", 4, true))
	f.SetNode(rackNode("n2", "a", 4, true))
	one := flavors.Resources{nvgpu: 1}
	if qs := f.SetPod("kube-system/ds", "n1", one, Owner{}); len(qs) != 1 {
		t.Fatalf("a pod bound to n1 changed queues %v, want [tas]", qs)
	}
	if got := rackRoom(f); got != 7 {
		t.Fatalf("rack r1 holds %d with a DaemonSet pod of 1 GPU, want 7", got)
	}
	// A placement of 3 pods on n2, none bound yet, reserves 3.
	w := Owner{Namespace: "ns", UID: "w"}
	f.Hold(w, &Placement{Flavor: "gpu", Sets: []TopologyAssignment{{Levels: rackTopology.Levels,
		Domains: []DomainCount{{Values: []string{"b1", "r1", "n2"}, Count: 3}}}}, PerPod: []flavors.Resources{one}})
	if got := rackRoom(f); got != 4 {
		t.Fatalf("rack r1 holds %d with 3 pods placed on n2, want 4", got)
	}
	// Its pods bind: the room stays, counted from the pods now.
	for i := range 3 {
		f.SetPod(fmt.Sprintf("ns/w-%d", i), "n2", one, w)
		if got := rackRoom(f); got != 4 {
			t.Fatalf("rack r1 holds %d with %d of the 3 placed pods bound, want 4", got, i+1)
		}
	}
	// A pod of another namespace that names w is counted as a pod, and
	// takes nothing off w's reservation.
	f.SetPod("other/forged", "n2", one, Owner{Namespace: "other", UID: "w"})
	if got := rackRoom(f); got != 3 {
		t.Fatalf("rack r1 holds %d with a forged pod bound, want 3", got)
	}
	// A pod ends: its room comes back; the placement, let go, gives none
	// back that its pods still use.
	f.SetPod("other/forged", "", nil, Owner{})
	f.SetPod("ns/w-0", "", nil, Owner{})
	if got := rackRoom(f); got != 4 {
		t.Fatalf("rack r1 holds %d once a pod of w ended (w still holds its room), want 4", got)
	}
	f.Hold(w, nil)
	if got := rackRoom(f); got != 5 {
		t.Fatalf("rack r1 holds %d once w is let go with two pods still bound, want 5", got)
	}
	f.SetPod("ns/w-1", "", nil, Owner{})
	f.SetPod("ns/w-2", "", nil, Owner{})
	f.SetPod("kube-system/ds", "", nil, Owner{})
	if got := rackRoom(f); got != 8 {
		t.Fatalf("rack r1 holds %d with nothing on it, want 8", got)
	}
	// Pods seen before their node: counted once it comes.
	f.SetPod("ns/early", "n3", one, Owner{})
	f.SetNode(rackNode("n3", "a", 2, true))
	if got := rackRoom(f); got != 9 {
		t.Fatalf("rack r1 holds %d with n3 (2 GPUs, one used by a pod seen first), want 9", got)
	}
}

// TestLosses: a node that goes takes from a placement the pods it had
// there (its room, at the node level); the workload need not move while
// the domain its pod set is pinned to has room to make them again.
func TestLosses(t *testing.T) {
	f := NewFlavorDomains()
	f.Configure(topologyConfig())
	for _, n := range []string{"n1", "n2", "n3"} {
		f.SetNode(rackNode(n, "a", 2, true)) // all in b1/r1
	}
	one := flavors.Resources{nvgpu: 1}
	w := Owner{Namespace: "ns", UID: "w"}
	f.Hold(w, &Placement{Flavor: "gpu", PerPod: []flavors.Resources{one}, Sets: []TopologyAssignment{{Levels: rackTopology.Levels,
		Domains: []DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}, {Values: []string{"b1", "r1", "n2"}, Count: 1}}}}})
	losses := f.Losses("n1")
	if len(losses) != 1 || losses[0].Owner != w || losses[0].Pods != 2 || strings.Join(losses[0].Pinned, "/") != "b1/r1" {
		t.Fatalf("losses of n1: %+v, want w's 2 pods, pinned to b1/r1", losses)
	}
	if f.Losses("n3") != nil {
		t.Fatalf("n3 holds nothing of w, but losing it loses %+v", f.Losses("n3"))
	}
	f.RemoveNode("n1")
	// r1 has n2 (1 GPU left) and n3 (2): room for w's 2 pods.
	if !f.Replaceable(losses[0]) {
		t.Fatal("w's 2 pods cannot be made again in r1, which has 3 GPUs free")
	}
	f.SetPod("other/x", "n3", flavors.Resources{nvgpu: 2}, Owner{})
	if f.Replaceable(losses[0]) {
		t.Fatal("w's 2 pods can be made again in r1, which has 1 GPU free")
	}
}
