package queues

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
)

// flavorConfig is a config with flavor gpu (node label pool=gpu, with
// annotations ann) and ClusterQueue tas, with quota GPUs of it.
func flavorConfig(t *testing.T, ann string, quota int) *Config {
	t.Helper()
	cfg, _, errs := Parse([]byte(fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: gpu
  annotations: {%s}
spec:
  nodeLabels: {pool: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: tas}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: %d}]
`, ann, quota)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return cfg
}

// poolConfig is flavorConfig placed at the node level, with 64 GPUs.
func poolConfig(t *testing.T) *Config {
	t.Helper()
	return flavorConfig(t, `tally.dev/node-fit: "true"`, 64)
}

// poolNode is a Ready node of flavor gpu with free GPUs; made by
// NodePool pool unless that is "".
func poolNode(name string, free int64, pool string) *corev1.Node {
	n := rackNode(name, "gpu", free, true)
	n.Labels = map[string]string{"pool": "gpu", corev1.LabelHostname: name}
	if pool != "" {
		n.Labels[LabelNodePool] = pool
	}
	return n
}

// gpuPool is NodePool gpus, whose nodes carry pool=gpu, limited to limit
// GPUs (none when negative) with made made.
func gpuPool(limit, made int64) NodePool {
	p := NodePool{Template: flavors.NodeTemplate{Name: "gpus", Labels: map[string]string{"pool": "gpu"}}, Made: flavors.Resources{nvgpu: flavors.Amount(made)}}
	if limit >= 0 {
		p.Limits = flavors.Resources{nvgpu: flavors.Amount(limit)}
	}
	return p
}

func TestPoolPlacement(t *testing.T) {
	node := &TopologyRequest{Mode: TopologyRequired, Level: corev1.LabelHostname}
	preferNode := &TopologyRequest{Mode: TopologyPreferred, Level: corev1.LabelHostname}
	slices2 := &TopologyRequest{Mode: TopologyUnconstrained, SliceLevel: corev1.LabelHostname, SliceSize: 2}
	may := gpuPool(16, 0)
	may.Template.Labels = nil // says nothing of label pool
	tainted := gpuPool(16, 0)
	tainted.Template.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	cpuOnly := gpuPool(-1, 0)
	cpuOnly.Limits = flavors.Resources{corev1.ResourceCPU: 1000}
	for _, tc := range []struct {
		name  string
		nodes string // "name=GPUs free"
		pool  *NodePool
		pods  int32
		req   *TopologyRequest
		want  string // the placement, or part of the error
	}{
		{name: "no node has room: the NodePool makes them", nodes: "n0=7 n1=7", pool: ptr.To(gpuPool(16, 0)), pods: 2, want: "@gpus:2"},
		{name: "the nodes there are first", nodes: "n0=8 n1=7", pool: ptr.To(gpuPool(16, 0)), pods: 2, want: "@gpus:1 n0:1"},
		{name: "a node that holds them all", nodes: "n0=16 n1=8", pool: ptr.To(gpuPool(16, 0)), pods: 2, want: "n0:2"},
		{name: "the NodePool's limit", nodes: "n0=7", pool: ptr.To(gpuPool(8, 0)), pods: 2, want: "hold 1 of 2 pods"},
		{name: "what it made counts against its limit", nodes: "n0=7 n1=7", pool: ptr.To(gpuPool(24, 16)), pods: 2, want: "hold 1 of 2 pods"},
		{name: "made beyond its limit", nodes: "n0=8", pool: ptr.To(gpuPool(16, 24)), pods: 2, want: "hold 1 of 2 pods"},
		{name: "no limits", pool: ptr.To(gpuPool(-1, 64)), pods: 5, want: "@gpus:5"},
		{name: "limits of other resources", pool: &cpuOnly, pods: 3, want: "@gpus:3"},
		{name: "without a NodePool", nodes: "n0=7 n1=7", pods: 2, want: "hold 0 of 2 pods"},
		{name: "one node for two pods: not the NodePool's", nodes: "n0=8", pool: ptr.To(gpuPool(64, 0)), pods: 2, req: node, want: "no kubernetes.io/hostname domain holds 2 pods; the largest, n0, holds 1"},
		{name: "one node for one pod: the NodePool's", nodes: "n0=7", pool: ptr.To(gpuPool(64, 0)), pods: 1, req: node, want: "@gpus:1"},
		{name: "a node preferred: spread over the nodes and the NodePool", nodes: "n0=8", pool: ptr.To(gpuPool(64, 0)), pods: 2, req: preferNode, want: "@gpus:1 n0:1"},
		{name: "slices of two pods a node: not the NodePool's", nodes: "n0=16", pool: ptr.To(gpuPool(64, 0)), pods: 4, req: slices2, want: "hold 1 of 2 slices"},
		{name: "a NodePool that may make the nodes counts none", nodes: "n0=7", pool: &may, pods: 1, want: "hold 0 of 1 pods"},
		{name: "a NodePool whose taint the flavor does not admit counts none", pool: &tainted, pods: 1, want: "it has no kubernetes.io/hostname domains"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlavorDomains()
			f.Configure(poolConfig(t))
			for _, spec := range strings.Fields(tc.nodes) {
				name, free, _ := strings.Cut(spec, "=")
				var g int64
				fmt.Sscan(free, &g)
				f.SetNode(poolNode(name, g, ""))
			}
			if tc.pool != nil {
				qs := f.SetNodePool(*tc.pool)
				if places := tc.pool != &may && tc.pool != &tainted; places != (len(qs) == 1) {
					t.Fatalf("a NodePool changed queues %v", qs)
				}
			}
			req := TopologyRequest{Mode: TopologyUnconstrained}
			if tc.req != nil {
				req = *tc.req
			}
			got, err := f.Trees["gpu"].Place(tc.pods, flavors.Resources{nvgpu: 8}, req)
			out := placed(got)
			if err != nil {
				out = err.Error()
			}
			if !strings.Contains(out, tc.want) || err == nil && out != tc.want {
				t.Fatalf("%d pods: %q, want %q", tc.pods, out, tc.want)
			}
		})
	}
}

// Above the node, a NodePool's leaf is in the one domain of each level
// that its template gives all its nodes, and in none when it leaves a
// level open: it makes no node into a rack it does not name, and its room
// is one, not one in each zone it may pick.
func TestPoolAboveTheNode(t *testing.T) {
	rack := &TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	node := &TopologyRequest{Mode: TopologyRequired, Level: corev1.LabelHostname}
	rackSlices := &TopologyRequest{Mode: TopologyRequired, Level: "block", SliceLevel: "rack", SliceSize: 2}
	nodeSlices := &TopologyRequest{Mode: TopologyRequired, Level: "rack", SliceLevel: corev1.LabelHostname, SliceSize: 2}
	in := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		reqs   []corev1.NodeSelectorRequirement
		nodes  string // "block/rack/name=GPUs free"
		pods   int32
		req    *TopologyRequest
		want   string // the placement, or part of the error; "" for no leaf
	}{
		{name: "no rack named: no leaf", labels: map[string]string{"pool": "a"}, pods: 1},
		{name: "its block and rack from labels", labels: map[string]string{"pool": "a", "block": "b1", "rack": "r9"},
			pods: 2, req: rack, want: "b1/r9/@gpus:2"},
		{name: "its block and rack from requirements", labels: map[string]string{"pool": "a"}, reqs: []corev1.NodeSelectorRequirement{in("block", "b1"), in("rack", "r9")},
			pods: 2, req: rack, want: "b1/r9/@gpus:2"},
		{name: "two racks it may pick: no leaf", labels: map[string]string{"pool": "a", "block": "b1"}, reqs: []corev1.NodeSelectorRequirement{in("rack", "r1", "r2")}, pods: 1},
		{name: "a rack of nodes there are, filled first", labels: map[string]string{"pool": "a", "block": "b1", "rack": "r1"},
			nodes: "b1/r1/n1=8 b1/r2/n2=8", pods: 3, req: rack, want: "b1/r1/@gpus:2 b1/r1/n1:1"},
		{name: "one node for two pods: not the NodePool's", labels: map[string]string{"pool": "a", "block": "b1", "rack": "r1"},
			nodes: "b1/r1/n1=8", pods: 2, req: node, want: "no kubernetes.io/hostname domain holds 2 pods"},
		{name: "slices of a rack: the NodePool's", labels: map[string]string{"pool": "a", "block": "b1", "rack": "r9"},
			pods: 4, req: rackSlices, want: "b1/r9/@gpus:4"},
		{name: "slices of a node: not the NodePool's", labels: map[string]string{"pool": "a", "block": "b1", "rack": "r1"},
			nodes: "b1/r1/n1=16", pods: 4, req: nodeSlices, want: "no rack domain holds 2 slices of 2 pods; the largest, b1/r1, holds 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := topologyConfig()
			f := NewFlavorDomains()
			f.Configure(cfg)
			for _, spec := range strings.Fields(tc.nodes) {
				path, free, _ := strings.Cut(spec, "=")
				parts := strings.Split(path, "/")
				var g int64
				fmt.Sscan(free, &g)
				n := rackNode(parts[2], "a", g, true)
				n.Labels["block"], n.Labels["rack"] = parts[0], parts[1]
				f.SetNode(n)
			}
			p := gpuPool(64, 0)
			p.Template.Labels, p.Template.Requirements = tc.labels, tc.reqs
			if qs := f.SetNodePool(p); (len(qs) == 1) != (tc.want != "") {
				t.Fatalf("the NodePool changed queues %v", qs)
			}
			if tc.want == "" {
				if _, err := f.Trees["gpu"].Place(tc.pods, flavors.Resources{nvgpu: 8}, TopologyRequest{Mode: TopologyUnconstrained}); err == nil {
					t.Fatal("placed on a NodePool's room with no node, and no leaf")
				}
				return
			}
			got, err := f.Trees["gpu"].Place(tc.pods, flavors.Resources{nvgpu: 8}, *tc.req)
			out := placed(got)
			if err != nil {
				out = err.Error()
			}
			if !strings.Contains(out, tc.want) || err == nil && out != tc.want {
				t.Fatalf("%d pods: %q, want %q", tc.pods, out, tc.want)
			}
		})
	}
}

// A group shares a domain: a NodePool's leaf holds it at a level above
// the node, not on one node.
func TestPoolGroup(t *testing.T) {
	p := gpuPool(64, 0)
	p.Template.Labels = map[string]string{"pool": "a", "block": "b1", "rack": "r9"}
	for _, tc := range []struct {
		level string
		want  string
	}{
		{"rack", "b1/r9/@gpus:1 | b1/r9/@gpus:2"},
		{corev1.LabelHostname, "no kubernetes.io/hostname domain"},
	} {
		f := NewFlavorDomains()
		f.Configure(topologyConfig())
		f.SetNodePool(p)
		req := TopologyRequest{Mode: TopologyRequired, Level: tc.level}
		got, err := f.Trees["gpu"].PlaceAll([]TopologyPodSet{
			{Name: "master", Count: 1, PerPod: flavors.Resources{nvgpu: 8}, Request: req, Group: "g"},
			{Name: "worker", Count: 2, PerPod: flavors.Resources{nvgpu: 8}, Request: req, Group: "g"},
		})
		out := ""
		if err != nil {
			out = err.Error()
		} else {
			out = placed(got[0]) + " | " + placed(got[1])
		}
		if !strings.Contains(out, tc.want) || err == nil && out != tc.want {
			t.Errorf("a group at level %s: %q, want %q", tc.level, out, tc.want)
		}
	}
}

// The room a NodePool can make follows it: a placement held there
// reserves it, a node the NodePool makes is the placement's until its
// pods are bound, and a pod of the placement bound there moves its
// charge from the pool leaf to the node, once.
func TestPoolHeld(t *testing.T) {
	t.Run("node level", func(t *testing.T) { poolHeld(t, poolConfig(t), nil) })
	t.Run("in a rack", func(t *testing.T) { poolHeld(t, topologyConfig(), []string{"b1", "r9"}) })
}

// poolHeld runs TestPoolHeld on cfg's flavor gpu, whose NodePool's nodes
// are in the domain of values above (nil: none).
func poolHeld(t *testing.T, cfg *Config, above []string) {
	f := NewFlavorDomains()
	f.Configure(cfg)
	nodePool := func(limit, made int64) NodePool {
		p := gpuPool(limit, made)
		if above != nil {
			p.Template.Labels = map[string]string{"pool": "a", "block": above[0], "rack": above[1]}
		}
		return p
	}
	node := func(name string) *corev1.Node {
		n := poolNode(name, 8, "gpus")
		if above != nil {
			n.Labels["pool"], n.Labels["block"], n.Labels["rack"] = "a", above[0], above[1]
		}
		return n
	}
	leaf := append(slices.Clone(above), PoolLeaf("gpus"))
	key := strings.Join(leaf, "\x00")
	f.SetNodePool(nodePool(16, 0))
	gpus8 := flavors.Resources{nvgpu: 8}
	holds := func(values ...string) int32 { return f.Trees["gpu"].Holds(values, gpus8) }
	check := func(step string, all, pool int32) {
		t.Helper()
		if got, gotPool := holds(), holds(leaf...); got != all || gotPool != pool {
			t.Fatalf("%s: the nodes and the NodePool hold %d pods of 8 GPUs, the NodePool %d; want %d and %d", step, got, gotPool, all, pool)
		}
	}
	check("nothing held", 2, 2)
	a := Owner{Namespace: "ns", UID: "a"}
	ta := TopologyAssignment{Levels: f.Trees["gpu"].topology.Levels, Domains: []DomainCount{{Values: leaf, Count: 2}}}
	f.Hold(a, &Placement{Flavor: "gpu", Sets: []TopologyAssignment{ta}, PerPod: []flavors.Resources{gpus8}})
	check("a's 2 pods held in the NodePool", 0, 0)

	// Karpenter makes n9 for a pod of a: it counts what it made, and n9
	// is a's until its pods are bound, not free to another workload.
	f.SetNodePool(nodePool(16, 8))
	f.SetNode(node("n9"))
	check("n9 made", 0, 0)
	f.SetPod("ns/a-0", "n9", gpus8, a)
	check("a's first pod bound to n9", 0, 0)
	if r := f.held[a].reserved[key][nvgpu]; r != 8 {
		t.Fatalf("the NodePool's leaf reserves %d GPUs of a with one pod bound, want 8", r)
	}
	f.SetNodePool(nodePool(16, 16))
	f.SetNode(node("n10"))
	check("n10 made", 0, 0)
	f.SetPod("ns/a-1", "n10", gpus8, a)
	check("both bound", 0, 0)
	if r, ok := f.held[a].reserved[key]; ok {
		t.Fatalf("the NodePool's leaf reserves %v of a with both pods bound, want nothing", r)
	}
	// A new config counts the same.
	f.Configure(cfg)
	check("configured again", 0, 0)

	// a ends: its nodes are free, and the NodePool has made its limit.
	f.SetPod("ns/a-0", "", nil, Owner{})
	f.SetPod("ns/a-1", "", nil, Owner{})
	f.Hold(a, nil)
	check("a ended", 2, 0)
	// Karpenter removes n9: the NodePool can make it again.
	f.RemoveNode("n9")
	f.SetNodePool(nodePool(16, 8))
	check("n9 removed", 2, 1)
	if qs := f.RemoveNodePool("gpus"); len(qs) != 1 {
		t.Fatalf("removing the NodePool changed queues %v, want [tas]", qs)
	}
	check("NodePool removed", 1, 0)
}

// A pod bound to a node of the NodePool that the placement also gave
// pods counts for the node first, then for the NodePool's leaf.
func TestPoolBoundBeyondTheNode(t *testing.T) {
	f := NewFlavorDomains()
	f.Configure(poolConfig(t))
	f.SetNodePool(gpuPool(64, 16))
	f.SetNode(poolNode("n9", 16, "gpus"))
	gpus8 := flavors.Resources{nvgpu: 8}
	a := Owner{Namespace: "ns", UID: "a"}
	ta := TopologyAssignment{Levels: NodeFitTopology.Levels, Domains: []DomainCount{{Values: []string{"n9"}, Count: 1}, {Values: []string{PoolLeaf("gpus")}, Count: 1}}}
	f.Hold(a, &Placement{Flavor: "gpu", Sets: []TopologyAssignment{ta}, PerPod: []flavors.Resources{gpus8}})
	pool := func() flavors.Amount { return f.held[a].reserved[PoolLeaf("gpus")][nvgpu] }
	f.SetPod("ns/a-0", "n9", gpus8, a)
	if pool() != 8 {
		t.Fatalf("one pod on n9, which its placement gives one: the NodePool's leaf reserves %d GPUs, want 8", pool())
	}
	f.SetPod("ns/a-1", "n9", gpus8, a)
	if pool() != 0 {
		t.Fatalf("two pods on n9: the NodePool's leaf reserves %d GPUs, want 0", pool())
	}
	f.SetPod("ns/a-1", "", nil, Owner{})
	if pool() != 8 {
		t.Fatalf("the second pod gone: the NodePool's leaf reserves %d GPUs, want 8", pool())
	}
}

// A pool leaf's pods go to the NodePool by its label, in the gate's
// nodeSelector, and back.
func TestPoolLabels(t *testing.T) {
	levels := NodeFitTopology.Levels
	all := TopologyAssignment{Levels: levels, Domains: []DomainCount{{Values: []string{PoolLeaf("gpus")}, Count: 2}}}
	if got := all.Pinned(); len(got) != 0 {
		t.Errorf("a pod set on a NodePool's nodes pinned to %v, want nothing: the gate gives its pods the NodePool", got)
	}
	if got, want := all.NextLeaf(nil), map[string]string{LabelNodePool: "gpus"}; !maps.Equal(got, want) {
		t.Errorf("next leaf %v, want %v", got, want)
	}
	some := TopologyAssignment{Levels: levels, Domains: []DomainCount{{Values: []string{"n0"}, Count: 1}, {Values: []string{PoolLeaf("gpus")}, Count: 1}}}
	if got := some.Pinned(); len(got) != 0 {
		t.Errorf("a pod set on a node and a NodePool pinned to %v, want nothing", got)
	}
	if got, want := some.NextLeaf(map[string]int32{"n0": 1}), map[string]string{LabelNodePool: "gpus"}; !maps.Equal(got, want) {
		t.Errorf("next leaf %v, want %v", got, want)
	}
	if got := some.LeafOf(map[string]string{LabelNodePool: "gpus"}); got != PoolLeaf("gpus") {
		t.Errorf("leaf of the NodePool's selector %q, want %q", got, PoolLeaf("gpus"))
	}
	if got := some.LeafOf(map[string]string{corev1.LabelHostname: "n0", LabelNodePool: "gpus"}); got != "n0" {
		t.Errorf("leaf of a node's selector %q, want n0", got)
	}
	rack := TopologyAssignment{Levels: rackTopology.Levels, Domains: []DomainCount{{Values: []string{"b1", "r9", PoolLeaf("gpus")}, Count: 2}}}
	if got := rack.LeafOf(map[string]string{LabelNodePool: "gpus"}); got != "" {
		t.Errorf("a rack topology's leaf of a NodePool's selector alone %q, want none", got)
	}
	if got, want := rack.Pinned(), map[string]string{"block": "b1", "rack": "r9"}; !maps.Equal(got, want) {
		t.Errorf("a pod set on a NodePool's nodes in rack r9 pinned to %v, want %v", got, want)
	}
	sel := rack.NextLeaf(nil)
	if want := map[string]string{"block": "b1", "rack": "r9", LabelNodePool: "gpus"}; !maps.Equal(sel, want) {
		t.Errorf("next leaf in rack r9 %v, want %v", sel, want)
	}
	if got := rack.LeafOf(sel); got != "b1/r9/"+PoolLeaf("gpus") {
		t.Errorf("leaf of %v: %q, want the NodePool's in rack r9", sel, got)
	}
	cfg := poolConfig(t)
	w := makeWL("train", "tas", 1).Req(nvgpu, "8").Count(2).Obj()
	ann := FormatTopology("gpu", []TopologyAssignment{some}, w)
	_, sets, err := ParseTopologyAnnotation(cfg, w, ann)
	if err != nil || len(sets) != 1 || placed(sets[0]) != "n0:1 @gpus:1" {
		t.Fatalf("%q read back as %v, %v", ann, sets, err)
	}
}

// Admission through the snapshot: quota fits, no node holds the pods,
// the NodePool does; a second workload waits for what the first holds.
func TestPoolAdmission(t *testing.T) {
	cfg := poolConfig(t)
	f := NewFlavorDomains()
	f.Configure(cfg)
	f.SetNode(poolNode("n0", 7, ""))
	f.SetNodePool(gpuPool(16, 0))
	snap := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}})
	snap.Domains = f.Trees
	first := makeWL("first", "tas", 1).Req(nvgpu, "8").Count(2).Obj()
	a, v := snap.Assign(first)
	if v.Kind != Fits || len(a.Topology) != 1 || placed(a.Topology[0]) != "@gpus:2" {
		t.Fatalf("first: %s, placed %v; want both pods on the NodePool's nodes", v.Message(), a.Topology)
	}
	f.Hold(Owner{Namespace: "ns", UID: "first"}, &Placement{Flavor: "gpu", Sets: a.Topology, PerPod: []flavors.Resources{{nvgpu: 8}}})
	second := makeWL("second", "tas", 2).Req(nvgpu, "8").Count(1).Obj()
	if _, v := snap.Assign(second); v.Kind == Fits || !strings.Contains(v.Message(), "hold 0 of 1 pods") {
		t.Fatalf("second, with the NodePool's room held: %q, want it to wait", v.Message())
	}
	var nf *NoFit
	_, err := f.Trees["gpu"].Place(1, flavors.Resources{nvgpu: 8}, TopologyRequest{Mode: TopologyUnconstrained})
	if !errors.As(err, &nf) {
		t.Fatalf("placing a third pod: %v, want a NoFit", err)
	}
}

// Pools, their nodes, the pods bound there and the placements held, told
// one change at a time in any order, leave the tree as they do told at
// once.
func TestPoolsIncremental(t *testing.T) {
	t.Run("node level", func(t *testing.T) { poolsIncremental(t, poolConfig(t), nil) })
	t.Run("racks", func(t *testing.T) { poolsIncremental(t, topologyConfig(), []string{"r1", "r2"}) })
}

// poolsIncremental runs TestPoolsIncremental on cfg's flavor gpu: on the
// node level alone without racks, else in block b1 with its nodes and
// NodePools in racks.
func poolsIncremental(t *testing.T, cfg *Config, racks []string) {
	rng := rand.New(rand.NewPCG(3, 4))
	gpus8 := flavors.Resources{nvgpu: 8}
	owners := []Owner{{Namespace: "ns", UID: "a"}, {Namespace: "ns", UID: "b"}}
	labels := map[string]string{"pool": "gpu"}
	if racks != nil {
		labels["pool"] = "a"
	}
	// rack picks a rack, or none of the NodePool's: open there.
	rack := func(open bool) string {
		if racks == nil || open && rng.IntN(4) == 0 {
			return ""
		}
		return racks[rng.IntN(len(racks))]
	}
	leaf := func(r, v string) []string {
		if racks == nil {
			return []string{v}
		}
		return []string{"b1", r, v}
	}
	leafValues := []string{"n0", "n1", "n2", PoolLeaf("gpus"), PoolLeaf("other")}
	for run := range 500 {
		f := NewFlavorDomains()
		f.Configure(cfg)
		nodes := map[string]*corev1.Node{}
		pools := map[string]NodePool{}
		type pod struct {
			node  string
			owner Owner
		}
		pods := map[string]pod{}
		held := map[Owner]*Placement{}
		var ops []string
		for range 40 {
			switch rng.IntN(5) {
			case 0:
				name := fmt.Sprintf("n%d", rng.IntN(3))
				if rng.IntN(5) == 0 {
					delete(nodes, name)
					f.RemoveNode(name)
					ops = append(ops, "remove node "+name)
					continue
				}
				pool := []string{"", "gpus", "other"}[rng.IntN(3)]
				n := poolNode(name, int64(8*(1+rng.IntN(2))), pool)
				n.Labels["pool"] = labels["pool"]
				if r := rack(false); r != "" {
					n.Labels["block"], n.Labels["rack"] = "b1", r
				}
				nodes[name] = n
				f.SetNode(n)
				ops = append(ops, fmt.Sprintf("node %s pool %q labels %v", name, pool, n.Labels))
			case 1:
				name := []string{"gpus", "other"}[rng.IntN(2)]
				if rng.IntN(4) == 0 {
					delete(pools, name)
					f.RemoveNodePool(name)
					ops = append(ops, "remove pool "+name)
					continue
				}
				p := gpuPool(int64(8*rng.IntN(4)), int64(8*rng.IntN(3)))
				p.Template.Name, p.Template.Labels = name, maps.Clone(labels)
				if r := rack(true); r != "" {
					p.Template.Labels["block"], p.Template.Labels["rack"] = "b1", r
				}
				pools[name] = p
				f.SetNodePool(p)
				ops = append(ops, fmt.Sprintf("pool %s %v", name, p))
			case 2, 3:
				key := fmt.Sprintf("ns/p%d", rng.IntN(4))
				if rng.IntN(3) == 0 {
					delete(pods, key)
					f.SetPod(key, "", nil, Owner{})
					ops = append(ops, "unbind "+key)
					continue
				}
				p := pod{node: fmt.Sprintf("n%d", rng.IntN(3))}
				if i := rng.IntN(3); i < len(owners) {
					p.owner = owners[i]
				}
				pods[key] = p
				f.SetPod(key, p.node, gpus8, p.owner)
				ops = append(ops, fmt.Sprintf("bind %s to %s of %v", key, p.node, p.owner))
			case 4:
				o := owners[rng.IntN(len(owners))]
				if rng.IntN(4) == 0 {
					delete(held, o)
					f.Hold(o, nil)
					ops = append(ops, fmt.Sprintf("release %v", o))
					continue
				}
				ta := TopologyAssignment{Levels: f.Trees["gpu"].topology.Levels}
				for _, v := range leafValues {
					if rng.IntN(3) == 0 {
						ta.Domains = append(ta.Domains, DomainCount{Values: leaf(rack(false), v), Count: int32(1 + rng.IntN(2))})
					}
				}
				slices.SortFunc(ta.Domains, func(a, b DomainCount) int { return slices.Compare(a.Values, b.Values) })
				p := &Placement{Flavor: "gpu", Sets: []TopologyAssignment{ta}, PerPod: []flavors.Resources{gpus8}}
				held[o] = p
				f.Hold(o, p)
				ops = append(ops, fmt.Sprintf("hold %v %s", o, placed(ta)))
			}
		}
		fresh := NewFlavorDomains()
		fresh.Configure(cfg)
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			fresh.SetNode(nodes[name])
		}
		for _, name := range slices.Sorted(maps.Keys(pools)) {
			fresh.SetNodePool(pools[name])
		}
		for _, o := range owners {
			if p := held[o]; p != nil {
				fresh.Hold(o, p)
			}
		}
		for _, key := range slices.Sorted(maps.Keys(pods)) {
			fresh.SetPod(key, pods[key].node, gpus8, pods[key].owner)
		}
		if diff := cmp.Diff(leafFree(fresh.Trees["gpu"]), leafFree(f.Trees["gpu"])); diff != "" {
			t.Fatalf("run %d: the leaves' free told at once (-) and one change at a time (+):\n%s\nafter:\n%s", run, diff, strings.Join(ops, "\n"))
		}
	}
}

// leafFree is what each leaf of d has free, zeros left out.
func leafFree(d *Domains) map[string]flavors.Resources {
	out := map[string]flavors.Resources{}
	for key, dom := range d.index {
		if len(dom.values) != len(d.topology.Levels) {
			continue
		}
		free := flavors.Resources{}
		for r, a := range dom.free {
			if a != 0 {
				free[r] = a
			}
		}
		out[key] = free
	}
	return out
}

// Karpenter counts a node it made in status.resources some time after
// the node is there: the nodes of the NodePool count against its limit
// meanwhile.
func TestPoolMadeByItsNodes(t *testing.T) {
	f := NewFlavorDomains()
	f.Configure(poolConfig(t))
	f.SetNodePool(gpuPool(16, 0))
	gpus8 := flavors.Resources{nvgpu: 8}
	pool := func() int32 { return f.Trees["gpu"].Holds([]string{PoolLeaf("gpus")}, gpus8) }
	if qs := f.SetNode(poolNode("n9", 8, "gpus")); len(qs) == 0 || pool() != 1 {
		t.Fatalf("with n9 made and status.resources not counting it: the NodePool holds %d pods of 8 GPUs (queues %v), want 1", pool(), qs)
	}
	f.SetNodePool(gpuPool(16, 8))
	if pool() != 1 {
		t.Fatalf("status.resources counting n9: the NodePool holds %d, want 1", pool())
	}
	f.RemoveNode("n9")
	f.SetNodePool(gpuPool(16, 0))
	if pool() != 2 {
		t.Fatalf("n9 gone: the NodePool holds %d, want 2", pool())
	}
}
