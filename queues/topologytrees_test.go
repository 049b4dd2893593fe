package queues

import (
	"fmt"
	"slices"
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
	// The pod gate would send them to n1, which is gone; r1's n3 holds
	// both (n2 has 1 GPU left).
	if f.Replaceable(losses[0]) {
		t.Fatal("w's 2 pods can be made again on n1, which is gone")
	}
	if p, ok := f.Swap(losses[0]); !ok || placed(p.Sets[0]) != "b1/r1/n2:1 b1/r1/n3:2" {
		t.Fatalf("w's 2 pods of n1 swapped to %+v %v, want n3", p, ok)
	}
	f.SetPod("other/x", "n3", flavors.Resources{nvgpu: 1}, Owner{})
	if p, ok := f.Swap(losses[0]); ok {
		t.Fatalf("w's 2 pods of n1 swapped to %+v, but no node of r1 has 2 GPUs free", p)
	}
}

// TestReplaceable: a node lost from a leaf that still holds its pods
// (a rack, when racks are the leaves) costs the workload nothing.
func TestReplaceable(t *testing.T) {
	cfg := topologyConfig()
	cfg.Topologies = map[string]*Topology{"dc": {Name: "dc", Levels: []string{"block", "rack"}}}
	f := NewFlavorDomains()
	f.Configure(cfg)
	f.SetNode(rackNode("n1", "a", 2, true))
	f.SetNode(rackNode("n2", "a", 2, true))
	one := flavors.Resources{nvgpu: 1}
	w := Owner{Namespace: "ns", UID: "w"}
	f.Hold(w, &Placement{Flavor: "gpu", PerPod: []flavors.Resources{one}, Sets: []TopologyAssignment{{Levels: []string{"block", "rack"},
		Domains: []DomainCount{{Values: []string{"b1", "r1"}, Count: 2}}}}})
	f.SetPod("ns/w-0", "n1", one, w)
	f.SetPod("ns/w-1", "n2", one, w)
	losses := f.Losses("n1")
	f.RemoveNode("n1")
	if len(losses) != 1 || losses[0].Pods != 1 || !f.Replaceable(losses[0]) {
		t.Fatalf("losses of n1: %+v; want w's 1 pod there, which r1 (n2, 1 GPU free) makes again", losses)
	}
	f.SetPod("other/x", "n2", one, Owner{})
	if f.Replaceable(losses[0]) {
		t.Fatal("w's pod can be made again in r1, which has no GPU free")
	}
}

// TestSwap: the pods a pod set lost with its node go to one other node
// of the same parent domain that holds them all, the tightest.
func TestSwap(t *testing.T) {
	nodeFit := []string{"kubernetes.io/hostname"}
	rackLeaves := []string{"block", "rack"}
	for _, tc := range []struct {
		name   string
		levels []string // the topology's; rackTopology's when nil
		nodes  string   // "values=GPUs free" per node, its hostname last
		placed string   // the pod set's placement, "values:count"
		lose   string   // the node lost
		want   string   // the placement after, "" for no swap
	}{
		{name: "to the node that holds them", nodes: "b1/r1/n1=2 b1/r1/n2=2 b1/r1/n3=2", placed: "b1/r1/n1:2 b1/r1/n2:1", lose: "n1",
			want: "b1/r1/n2:1 b1/r1/n3:2"},
		{name: "none holds them all", nodes: "b1/r1/n1=2 b1/r1/n2=2 b1/r1/n3=1", placed: "b1/r1/n1:2 b1/r1/n2:1", lose: "n1"},
		{name: "the tightest", nodes: "b1/r1/n1=2 b1/r1/n2=1 b1/r1/n3=4 b1/r1/n4=3", placed: "b1/r1/n1:2 b1/r1/n2:1", lose: "n1",
			want: "b1/r1/n2:1 b1/r1/n4:2"},
		{name: "ties go to the first by name", nodes: "b1/r1/n1=1 b1/r1/n2=1 b1/r1/n4=1 b1/r1/n3=1", placed: "b1/r1/n1:1 b1/r1/n2:1", lose: "n1",
			want: "b1/r1/n2:1 b1/r1/n3:1"},
		{name: "onto one of its other nodes", nodes: "b1/r1/n1=1 b1/r1/n2=2 b1/r1/n3=1", placed: "b1/r1/n1:1 b1/r1/n2:1 b1/r1/n3:1", lose: "n1",
			want: "b1/r1/n2:2 b1/r1/n3:1"},
		{name: "onto its only other node", nodes: "b1/r1/n1=1 b1/r1/n2=4", placed: "b1/r1/n1:1 b1/r1/n2:1", lose: "n1",
			want: "b1/r1/n2:2"},
		{name: "its only other node or another", nodes: "b1/r1/n1=1 b1/r1/n2=4 b1/r1/n3=2", placed: "b1/r1/n1:1 b1/r1/n2:1", lose: "n1",
			want: "b1/r1/n2:1 b1/r1/n3:1"},
		{name: "not out of its rack", nodes: "b1/r1/n1=2 b1/r1/n2=2 b1/r2/n3=8", placed: "b1/r1/n1:2 b1/r1/n2:2", lose: "n1"},
		{name: "within its rack, when spread over racks", nodes: "b1/r1/n1=2 b1/r2/n2=2 b1/r2/n3=8 b1/r1/n4=2", placed: "b1/r1/n1:2 b1/r2/n2:2", lose: "n1",
			want: "b1/r1/n4:2 b1/r2/n2:2"},
		{name: "a pod set on one node", nodes: "b1/r1/n1=2 b1/r1/n2=2", placed: "b1/r1/n1:2", lose: "n1",
			want: "b1/r1/n2:2"},
		{name: "a pod set on one node, none other in its rack", nodes: "b1/r1/n1=2 b1/r2/n2=2", placed: "b1/r1/n1:2", lose: "n1"},
		{name: "a node that held none of it", nodes: "b1/r1/n1=2 b1/r1/n2=2 b1/r1/n3=2", placed: "b1/r1/n1:1 b1/r1/n2:1", lose: "n3"},
		{name: "node-fit: any node", levels: nodeFit, nodes: "n1=8 n2=8 n3=2 n4=1", placed: "n1:1 n2:1", lose: "n2",
			want: "n1:1 n4:1"},
		{name: "node-fit: onto the node a pod of it is on", levels: nodeFit, nodes: "n1=16 n2=8", placed: "n1:1 n2:1", lose: "n2",
			want: "n1:2"},
		{name: "racks as leaves: none", levels: rackLeaves, nodes: "b1/r1=2 b1/r2=2 b1/r3=8", placed: "b1/r1:2 b1/r2:2", lose: "b1/r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := topologyConfig()
			topo := rackTopology
			if tc.levels != nil {
				topo = &Topology{Name: "dc", Levels: tc.levels}
				cfg.Topologies = map[string]*Topology{"dc": topo}
			}
			f := NewFlavorDomains()
			f.Configure(cfg)
			for i, spec := range strings.Fields(tc.nodes) {
				path, gpus, _ := strings.Cut(spec, "=")
				values := strings.Split(path, "/")
				var g int64
				fmt.Sscan(gpus, &g)
				n := rackNode(values[len(values)-1], "a", g, true)
				if tc.levels != nil && tc.levels[len(tc.levels)-1] != "kubernetes.io/hostname" {
					n.Name = fmt.Sprintf("node%d", i)
				}
				for l, label := range topo.Levels {
					n.Labels[label] = values[l]
				}
				f.SetNode(n)
			}
			ta := TopologyAssignment{Levels: topo.Levels}
			for _, d := range strings.Fields(tc.placed) {
				path, count, _ := strings.Cut(d, ":")
				var c int32
				fmt.Sscan(count, &c)
				ta.Domains = append(ta.Domains, DomainCount{Values: strings.Split(path, "/"), Count: c})
			}
			one := flavors.Resources{nvgpu: 1}
			w := Owner{Namespace: "ns", UID: "w"}
			f.Hold(w, &Placement{Flavor: "gpu", PerPod: []flavors.Resources{one}, Sets: []TopologyAssignment{ta}})
			lose := tc.lose
			if tc.levels != nil && tc.levels[len(tc.levels)-1] != "kubernetes.io/hostname" {
				lose = "node0"
			}
			losses := f.Losses(lose)
			f.RemoveNode(lose)
			var got []string
			for _, l := range losses {
				if f.Replaceable(l) {
					t.Errorf("the leaf of lost node %s holds its %d pods again", lose, l.Pods)
				}
				p, ok := f.Swap(l)
				if !ok {
					continue
				}
				got = append(got, placed(p.Sets[l.Set]))
				// Held, the placement swapped to takes the room it
				// gives the new node.
				var to []string
				for _, dc := range p.Sets[l.Set].Domains {
					if !slices.ContainsFunc(ta.Domains, func(old DomainCount) bool { return slices.Equal(old.Values, dc.Values) && old.Count == dc.Count }) {
						to = dc.Values
					}
				}
				before := f.Trees["gpu"].Holds(to, one)
				f.Hold(w, &p)
				if after := f.Trees["gpu"].Holds(to, one); after != before-l.Pods {
					t.Errorf("%v holds %d pods with the swapped placement held, want %d", to, after, before-l.Pods)
				}
			}
			if strings.Join(got, "; ") != tc.want {
				t.Fatalf("losing %s of %q, swapped to %q, want %q", lose, tc.placed, got, tc.want)
			}
		})
	}
}

// The pods bound to a node count where the node is, whatever the order
// their events and the node's come in: a node gone and back, a node seen
// only after its pods, a node unusable for a while.
func TestBoundPodsFollowTheirNode(t *testing.T) {
	one := flavors.Resources{nvgpu: 1}
	w := Owner{Namespace: "ns", UID: "w"}
	onN1 := &Placement{Flavor: "gpu", PerPod: []flavors.Resources{one}, Sets: []TopologyAssignment{{Levels: rackTopology.Levels,
		Domains: []DomainCount{{Values: []string{"b1", "r1", "n1"}, Count: 2}}}}}
	holds := func(f *FlavorDomains) int32 { return f.Trees["gpu"].Holds([]string{"b1", "r1", "n1"}, one) }
	for _, tc := range []struct {
		name  string
		steps func(f *FlavorDomains)
		want  int32 // pods of 1 GPU n1 holds after, of its 4
	}{
		{"a node gone and back, its pod ending meanwhile", func(f *FlavorDomains) {
			f.SetNode(rackNode("n1", "a", 4, true))
			f.SetPod("ns/x", "n1", one, Owner{})
			f.RemoveNode("n1")
			f.SetPod("ns/x", "", nil, Owner{})
			f.SetNode(rackNode("n1", "a", 4, true))
		}, 4},
		{"a node gone and back, its pod still there", func(f *FlavorDomains) {
			f.SetNode(rackNode("n1", "a", 4, true))
			f.SetPod("ns/x", "n1", one, Owner{})
			f.RemoveNode("n1")
			f.SetNode(rackNode("n1", "a", 4, true))
		}, 3},
		{"a placement's pods bound before their node is seen", func(f *FlavorDomains) {
			f.Hold(w, onN1)
			f.SetPod("ns/w-0", "n1", one, w)
			f.SetPod("ns/w-1", "n1", one, w)
			f.SetNode(rackNode("n1", "a", 4, true))
		}, 2},
		{"a placement's pod ending while its node is not Ready", func(f *FlavorDomains) {
			f.SetNode(rackNode("n1", "a", 4, true))
			f.Hold(w, onN1)
			f.SetPod("ns/w-0", "n1", one, w)
			f.SetPod("ns/w-1", "n1", one, w)
			f.SetNode(rackNode("n1", "a", 4, false))
			f.SetPod("ns/w-1", "", nil, Owner{})
			f.SetNode(rackNode("n1", "a", 4, true))
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlavorDomains()
			f.Configure(topologyConfig())
			tc.steps(f)
			if got := holds(f); got != tc.want {
				t.Fatalf("n1 holds %d pods of 1 GPU, want %d", got, tc.want)
			}
		})
	}
}
