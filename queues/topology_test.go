package queues

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

const nvgpu corev1.ResourceName = "nvidia.com/gpu"

var rackTopology = &Topology{Name: "dc", Levels: []string{"block", "rack", "kubernetes.io/hostname"}}

// leaves reads "b1/r1/n1=8 b1/r1/n2=4 ..." as leaves whose nodes have
// that many GPUs free and room for 110 pods.
func leaves(spec string) []TopologyLeaf {
	var out []TopologyLeaf
	for _, f := range strings.Fields(spec) {
		path, n, _ := strings.Cut(f, "=")
		var g int64
		fmt.Sscan(n, &g)
		out = append(out, TopologyLeaf{Values: strings.Split(path, "/"), Free: flavors.Resources{nvgpu: flavors.Amount(g), corev1.ResourcePods: 110}})
	}
	return out
}

// placed writes a placement as "b1/r1/n1:2 b1/r1/n2:2".
func placed(p TopologyAssignment) string {
	var s []string
	for _, d := range p.Domains {
		s = append(s, fmt.Sprintf("%s:%d", strings.Join(d.Values, "/"), d.Count))
	}
	return strings.Join(s, " ")
}

func TestPlace(t *testing.T) {
	onePerGPU := flavors.Resources{nvgpu: 1}
	eight := flavors.Resources{nvgpu: 8}
	// Two blocks; b1 has racks of 8+8 and 4 GPUs, b2 one rack of 6+6.
	dc := "b1/r1/n1=8 b1/r1/n2=8 b1/r2/n3=4 b2/r3/n4=6 b2/r3/n5=6"
	for _, tc := range []struct {
		name   string
		leaves string
		count  int32
		perPod flavors.Resources
		req    TopologyRequest
		want   string // the placement, or the error
	}{
		{"required rack: the tightest rack that holds them", dc, 4, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"},
			"b1/r2/n3:4"},
		{"required rack: the tightest of two that hold them", dc, 10, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"},
			"b2/r3/n4:6 b2/r3/n5:4"},
		{"required rack: one that only the largest holds", dc, 16, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"},
			"b1/r1/n1:8 b1/r1/n2:8"},
		{"required rack: none holds them", dc, 17, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"},
			`topology "dc": no rack domain holds 17 pods; the largest, b1/r1, holds 16`},
		{"required block: racks of one block", dc, 20, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "block"},
			"b1/r1/n1:8 b1/r1/n2:8 b1/r2/n3:4"},
		{"preferred rack: climbs to a block", dc, 18, onePerGPU, TopologyRequest{Mode: TopologyPreferred, Level: "rack"},
			"b1/r1/n1:8 b1/r1/n2:8 b1/r2/n3:2"},
		// Above the level chosen, each level's pods go to the fewest of all
		// the chosen domains' children, as in Kueue: r1 and r3 hold them,
		// and r2, in the block chosen first, gets none.
		{"preferred rack: spreads over blocks, the fewest racks", dc, 26, onePerGPU, TopologyRequest{Mode: TopologyPreferred, Level: "rack"},
			"b1/r1/n1:8 b1/r1/n2:8 b2/r3/n4:6 b2/r3/n5:4"},
		{"preferred rack: does not fit at all", dc, 33, onePerGPU, TopologyRequest{Mode: TopologyPreferred, Level: "rack"},
			`topology "dc": its block domains hold 32 of 33 pods in all`},
		{"preferred host: one host holds them", dc, 5, onePerGPU, TopologyRequest{Mode: TopologyPreferred, Level: "kubernetes.io/hostname"},
			"b2/r3/n4:5"},
		{"unconstrained: the fewest hosts, the tightest last", dc, 12, onePerGPU, TopologyRequest{Mode: TopologyUnconstrained},
			"b1/r1/n1:8 b1/r2/n3:4"},
		{"fragmented: two 8-GPU pods on hosts with 7, 7 and 8 free", "b1/r1/n1=7 b1/r1/n2=7 b1/r1/n3=8", 2, eight,
			TopologyRequest{Mode: TopologyUnconstrained}, `topology "dc": its kubernetes.io/hostname domains hold 1 of 2 pods in all`},
		{"fragmented, required rack: the rack's GPUs are not the pods'", "b1/r1/n1=7 b1/r1/n2=7 b1/r1/n3=8", 2, eight,
			TopologyRequest{Mode: TopologyRequired, Level: "rack"}, `topology "dc": no rack domain holds 2 pods; the largest, b1/r1, holds 1`},
		// b2 holds 3 slices, b1 5: b2 is the tighter fit. Below the slice
		// level a domain's pods go to its children with the least room
		// first, the tightest last.
		{"slices of 4 in racks, within the tightest block", dc, 8, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "block", SliceSize: 4, SliceLevel: "rack"},
			"b2/r3/n4:6 b2/r3/n5:2"},
		{"slices of 4 in racks: more than a block holds", dc, 24, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "block", SliceSize: 4, SliceLevel: "rack"},
			`topology "dc": no block domain holds 6 slices of 4 pods; the largest, b1, holds 5`},
		{"slices of 4 in racks: a slice spans a rack's hosts", "b1/r1/n1=3 b1/r1/n2=3 b1/r2/n3=4", 8, onePerGPU,
			TopologyRequest{Mode: TopologyRequired, Level: "block", SliceSize: 4, SliceLevel: "rack"},
			"b1/r1/n1:3 b1/r1/n2:1 b1/r2/n3:4"},
		{"slices of 4 in racks: a rack of 3+3 holds one", "b1/r1/n1=3 b1/r1/n2=3 b1/r2/n3=3", 8, onePerGPU,
			TopologyRequest{Mode: TopologyRequired, Level: "block", SliceSize: 4, SliceLevel: "rack"},
			`topology "dc": no block domain holds 2 slices of 4 pods; the largest, b1, holds 1`},
		{"slices of 3 in racks across two racks", "b1/r1/n1=2 b1/r1/n2=2 b1/r2/n3=1 b1/r2/n4=2", 6, onePerGPU,
			TopologyRequest{Mode: TopologyRequired, Level: "block", SliceSize: 3, SliceLevel: "rack"},
			"b1/r1/n1:2 b1/r1/n2:1 b1/r2/n3:1 b1/r2/n4:2"},
		{"slices of 2 on hosts", "b1/r1/n1=3 b1/r1/n2=3", 4, onePerGPU,
			TopologyRequest{Mode: TopologyRequired, Level: "rack", SliceSize: 2, SliceLevel: "kubernetes.io/hostname"},
			"b1/r1/n1:2 b1/r1/n2:2"},
		// Slices alone, as Kueue reads podset-slice-required-topology
		// without a required or preferred level: from the top level down,
		// each slice in one rack, here the tightest block that holds them.
		{"slices of 4 in racks, no level asked", dc, 8, onePerGPU, TopologyRequest{Mode: TopologyUnconstrained, SliceSize: 4, SliceLevel: "rack"},
			"b2/r3/n4:6 b2/r3/n5:2"},
		{"slices of 2 in racks, no level asked: over two blocks", dc, 28, onePerGPU, TopologyRequest{Mode: TopologyUnconstrained, SliceSize: 2, SliceLevel: "rack"},
			"b1/r1/n1:8 b1/r1/n2:8 b2/r3/n4:6 b2/r3/n5:6"},
		{"slices of 1 in racks, no level asked", dc, 2, onePerGPU, TopologyRequest{Mode: TopologyUnconstrained, SliceSize: 1, SliceLevel: "rack"},
			"b2/r3/n4:2"},
		{"no pods", dc, 0, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"}, ""},
		{"unknown level", dc, 1, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "zone"}, `topology "dc" has no level "zone"`},
		{"slice level above the level", dc, 4, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack", SliceSize: 2, SliceLevel: "block"},
			`the slice level "block" is above the level "rack"`},
		{"pods that make no whole slices", dc, 5, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack", SliceSize: 2, SliceLevel: "rack"},
			"5 pods do not make slices of 2"},
		{"no nodes", "", 1, onePerGPU, TopologyRequest{Mode: TopologyRequired, Level: "rack"},
			`topology "dc": no rack domain holds 1 pods; it has no rack domains`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewDomains(rackTopology, leaves(tc.leaves)).Place(tc.count, tc.perPod, tc.req)
			got := placed(p)
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestPlacePodsResource: a node holds no more pods than its pods
// resource has room for.
func TestPlacePodsResource(t *testing.T) {
	l := []TopologyLeaf{
		{Values: []string{"b", "r", "n1"}, Free: flavors.Resources{nvgpu: 8, corev1.ResourcePods: 1}},
		{Values: []string{"b", "r", "n2"}, Free: flavors.Resources{nvgpu: 8, corev1.ResourcePods: 2}},
	}
	p, err := NewDomains(rackTopology, l).Place(3, flavors.Resources{nvgpu: 1}, TopologyRequest{Mode: TopologyRequired, Level: "rack"})
	if err != nil {
		t.Fatal(err)
	}
	if got := placed(p); got != "b/r/n1:1 b/r/n2:2" {
		t.Errorf("got %s, want b/r/n1:1 b/r/n2:2", got)
	}
}

// TestNewDomainsSumsLeaves: with a rack as the lowest level, a rack's
// nodes make one leaf with their capacity summed.
func TestNewDomainsSumsLeaves(t *testing.T) {
	racks := &Topology{Name: "racks", Levels: []string{"block", "rack"}}
	d := NewDomains(racks, []TopologyLeaf{
		{Values: []string{"b", "r1"}, Free: flavors.Resources{nvgpu: 4, corev1.ResourcePods: 10}},
		{Values: []string{"b", "r1"}, Free: flavors.Resources{nvgpu: 4, corev1.ResourcePods: 10}},
		{Values: []string{"b", "r2"}, Free: flavors.Resources{nvgpu: 6, corev1.ResourcePods: 10}},
		{Values: []string{"b"}, Free: flavors.Resources{nvgpu: 100, corev1.ResourcePods: 10}}, // not one value per level
	})
	p, err := d.Place(8, flavors.Resources{nvgpu: 1}, TopologyRequest{Mode: TopologyRequired, Level: "rack"})
	if err != nil {
		t.Fatal(err)
	}
	if got := placed(p); got != "b/r1:8" {
		t.Errorf("got %s, want b/r1:8", got)
	}
}

// TestPlaceProperties places random pod sets on random trees and checks
// what every placement must be: its counts sum to the pod set's, no leaf
// gets more pods than fit in it, a required level's pods share one
// domain of that level, every slice-level domain gets whole slices, and
// a pod set that is not placed really does not fit (a required level: no
// domain of it holds it; otherwise: the whole tree does not).
func TestPlaceProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	levels := rackTopology.Levels
	placedN := 0
	for i := range 600 {
		ls := randomLeaves(rng, 3, 8)
		per := int64(1 + rng.IntN(2))
		req := TopologyRequest{Mode: TopologyMode(rng.IntN(3)), Level: levels[rng.IntN(3)]}
		slice := int32(1)
		if rng.IntN(3) == 0 {
			slice = int32(2 + rng.IntN(2))
			req.SliceSize = slice
			req.SliceLevel = levels[rng.IntN(len(levels))]
			if req.Mode != TopologyUnconstrained {
				req.SliceLevel = levels[slices.Index(levels, req.Level)+rng.IntN(len(levels)-slices.Index(levels, req.Level))]
			}
		}
		count := slice * int32(1+rng.IntN(12))
		name := fmt.Sprintf("case %d: %d pods of %d GPUs, %+v", i, count, per, req)
		p, err := NewDomains(rackTopology, ls).Place(count, flavors.Resources{nvgpu: flavors.Amount(per)}, req)
		capacity := map[string]int32{}
		total := int32(0)
		for _, l := range ls {
			c := countIn(flavors.Resources{nvgpu: flavors.Amount(per), corev1.ResourcePods: 1}, l.Free)
			capacity[strings.Join(l.Values, "/")] = c
			total += c
		}
		var nf *NoFit
		if errors.As(err, &nf) {
			if slice == 1 && req.Mode != TopologyRequired && total >= count {
				t.Errorf("%s: not placed (%v), but the tree holds %d pods", name, err, total)
			}
			if req.Mode == TopologyRequired && slice == 1 {
				lvl := slices.Index(levels, req.Level)
				per := map[string]int32{}
				for k, c := range capacity {
					per[strings.Join(strings.Split(k, "/")[:lvl+1], "/")] += c
				}
				for k, c := range per {
					if c >= count {
						t.Errorf("%s: not placed (%v), but %s holds %d", name, err, k, c)
					}
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		placedN++
		sum := int32(0)
		domainsAt := map[string]bool{}
		sliceDomains := map[string]int32{}
		for _, d := range p.Domains {
			key := strings.Join(d.Values, "/")
			if d.Count > capacity[key] {
				t.Errorf("%s: %s gets %d pods, holds %d", name, key, d.Count, capacity[key])
			}
			sum += d.Count
			if req.Mode == TopologyRequired {
				domainsAt[strings.Join(d.Values[:slices.Index(levels, req.Level)+1], "/")] = true
			}
			if slice > 1 {
				sliceDomains[strings.Join(d.Values[:slices.Index(levels, req.SliceLevel)+1], "/")] += d.Count
			}
		}
		if sum != count {
			t.Errorf("%s: %d pods placed: %s", name, sum, placed(p))
		}
		if len(domainsAt) > 1 {
			t.Errorf("%s: required %s, placed in %d of them: %s", name, req.Level, len(domainsAt), placed(p))
		}
		for k, n := range sliceDomains {
			if n%slice != 0 {
				t.Errorf("%s: %s gets %d pods, not whole slices of %d: %s", name, k, n, slice, placed(p))
			}
		}
	}
	if placedN < 150 {
		t.Errorf("only %d of 600 pod sets placed: the cases test too little", placedN)
	}
}

func TestPlaceAll(t *testing.T) {
	g8 := flavors.Resources{nvgpu: 8}
	rack := TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	for _, tc := range []struct {
		name   string
		leaves string
		sets   []TopologyPodSet
		want   string // the assignments, "|" between pod sets, or the error
	}{
		{"a second pod set takes what the first left", "b/r1/n1=8 b/r1/n2=8", []TopologyPodSet{
			{Name: "a", Count: 1, PerPod: g8, Request: TopologyRequest{Mode: TopologyRequired, Level: "kubernetes.io/hostname"}},
			{Name: "b", Count: 1, PerPod: g8, Request: TopologyRequest{Mode: TopologyRequired, Level: "kubernetes.io/hostname"}},
		}, "b/r1/n1:1 | b/r1/n2:1"},
		{"a second pod set that no longer fits", "b/r1/n1=8 b/r1/n2=8", []TopologyPodSet{
			{Name: "a", Count: 1, PerPod: g8, Request: rack},
			{Name: "b", Count: 2, PerPod: g8, Request: rack},
		}, `pod set b: topology "dc": no rack domain holds 2 pods; the largest, b/r1, holds 1`},
		{"master and workers in the rack that holds all three", "b/r1/n1=8 b/r1/n2=8 b/r2/n3=8 b/r2/n4=8 b/r2/n5=8", []TopologyPodSet{
			{Name: "master", Count: 1, PerPod: g8, Request: rack, Group: "job"},
			{Name: "worker", Count: 2, PerPod: g8, Request: rack, Group: "job"},
		}, "b/r2/n3:1 | b/r2/n4:1 b/r2/n5:1"},
		{"a small master goes where it costs the workers nothing", "b/r1/n1=9 b/r1/n2=8", []TopologyPodSet{
			{Name: "master", Count: 1, PerPod: flavors.Resources{nvgpu: 1}, Request: rack, Group: "job"},
			{Name: "worker", Count: 2, PerPod: g8, Request: rack, Group: "job"},
		}, "b/r1/n1:1 | b/r1/n1:1 b/r1/n2:1"},
		{"workers first in the group's order", "b/r1/n1=8 b/r1/n2=8 b/r1/n3=8", []TopologyPodSet{
			{Name: "worker", Count: 2, PerPod: g8, Request: rack, Group: "job"},
			{Name: "master", Count: 1, PerPod: g8, Request: rack, Group: "job"},
		}, "b/r1/n2:1 b/r1/n3:1 | b/r1/n1:1"},
		{"no rack holds master and workers", "b/r1/n1=8 b/r1/n2=8 b/r2/n3=8", []TopologyPodSet{
			{Name: "master", Count: 1, PerPod: g8, Request: rack, Group: "job"},
			{Name: "worker", Count: 2, PerPod: g8, Request: rack, Group: "job"},
		}, `group job: topology "dc": no rack domain holds 3 pods; the largest, b/r1, holds 2`},
		{"preferred rack: the group climbs to the block", "b/r1/n1=8 b/r1/n2=8 b/r2/n3=8", []TopologyPodSet{
			{Name: "master", Count: 1, PerPod: g8, Request: TopologyRequest{Mode: TopologyPreferred, Level: "rack"}, Group: "job"},
			{Name: "worker", Count: 2, PerPod: g8, Request: TopologyRequest{Mode: TopologyPreferred, Level: "rack"}, Group: "job"},
		}, "b/r1/n1:1 | b/r1/n2:1 b/r2/n3:1"},
		{"a group of three", "b/r1/n1=8", []TopologyPodSet{
			{Name: "a", Count: 1, PerPod: g8, Request: rack, Group: "g"},
			{Name: "b", Count: 1, PerPod: g8, Request: rack, Group: "g"},
			{Name: "c", Count: 1, PerPod: g8, Request: rack, Group: "g"},
		}, "group g: 3 pod sets; a group is a pod set of one pod and another"},
		{"a group without a single-pod leader", "b/r1/n1=8", []TopologyPodSet{
			{Name: "a", Count: 2, PerPod: g8, Request: rack, Group: "g"},
			{Name: "b", Count: 2, PerPod: g8, Request: rack, Group: "g"},
		}, "group g: a group is a pod set of one pod and another, with the same topology request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewDomains(rackTopology, leaves(tc.leaves)).PlaceAll(tc.sets)
			var s []string
			for _, a := range got {
				s = append(s, placed(a))
			}
			out := strings.Join(s, " | ")
			if err != nil {
				out = err.Error()
			}
			if out != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
		})
	}
}

// TestPlaceAllProperties places random leader-and-workers groups and
// checks every placement: one leader pod, the workers' count, no leaf
// given more than fits in it of both, and a required level's pods, the
// leader's too, in one domain of it.
func TestPlaceAllProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	levels := rackTopology.Levels
	placedN := 0
	for i := range 400 {
		ls := randomLeaves(rng, 2, 6)
		req := TopologyRequest{Mode: TopologyMode(rng.IntN(3)), Level: levels[rng.IntN(3)]}
		lead, work := flavors.Amount(1+rng.IntN(4)), flavors.Amount(1+rng.IntN(4))
		count := int32(1 + rng.IntN(8))
		sets := []TopologyPodSet{
			{Name: "master", Count: 1, PerPod: flavors.Resources{nvgpu: lead}, Request: req, Group: "g"},
			{Name: "worker", Count: count, PerPod: flavors.Resources{nvgpu: work}, Request: req, Group: "g"},
		}
		name := fmt.Sprintf("case %d: master of %d GPUs, %d workers of %d, %+v", i, lead, count, work, req)
		got, err := NewDomains(rackTopology, ls).PlaceAll(sets)
		var nf *NoFit
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		placedN++
		gpus, pods := map[string]flavors.Amount{}, map[string]flavors.Amount{}
		for _, l := range ls {
			k := strings.Join(l.Values, "/")
			gpus[k], pods[k] = l.Free[nvgpu], l.Free[corev1.ResourcePods]
		}
		domainsAt := map[string]bool{}
		for si, a := range got {
			n := int32(0)
			for _, d := range a.Domains {
				k := strings.Join(d.Values, "/")
				gpus[k] -= sets[si].PerPod[nvgpu] * flavors.Amount(d.Count)
				pods[k] -= flavors.Amount(d.Count)
				n += d.Count
				if req.Mode == TopologyRequired {
					domainsAt[strings.Join(d.Values[:slices.Index(levels, req.Level)+1], "/")] = true
				}
			}
			if n != sets[si].Count {
				t.Errorf("%s: %s got %d pods: %s", name, sets[si].Name, n, placed(a))
			}
		}
		for k := range gpus {
			if gpus[k] < 0 || pods[k] < 0 {
				t.Errorf("%s: %s given more than it holds: %s | %s", name, k, placed(got[0]), placed(got[1]))
			}
		}
		if len(domainsAt) > 1 {
			t.Errorf("%s: required %s, placed in %d of them: %s | %s", name, req.Level, len(domainsAt), placed(got[0]), placed(got[1]))
		}
	}
	if placedN < 100 {
		t.Errorf("only %d of 400 groups placed: the cases test too little", placedN)
	}
}

func TestRoom(t *testing.T) {
	d := NewDomains(rackTopology, leaves("b1/r1/n1=8 b1/r1/n2=8 b1/r2/n3=4 b2/r3/n4=6 b2/r3/n5=6"))
	var got []string
	for _, l := range d.Room(flavors.Resources{nvgpu: 2}, 2) {
		var s []string
		for _, dc := range l.Domains {
			s = append(s, fmt.Sprintf("%s:%d", strings.Join(dc.Values, "/"), dc.Count))
		}
		got = append(got, l.Level+" "+strings.Join(s, " "))
	}
	want := []string{"block b1:10 b2:6", "rack b1/r1:8 b2/r3:6", "kubernetes.io/hostname b1/r1/n1:4 b1/r1/n2:4"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// randomLeaves is up to blocks blocks of 1 to 3 racks of 1 to 4 hosts,
// each with 0 to 8 GPUs and room for 1 to pods pods.
func randomLeaves(rng *rand.Rand, blocks, pods int) []TopologyLeaf {
	var ls []TopologyLeaf
	for b := range 1 + rng.IntN(blocks) {
		for r := range 1 + rng.IntN(3) {
			for n := range 1 + rng.IntN(4) {
				ls = append(ls, TopologyLeaf{
					Values: []string{fmt.Sprint("b", b), fmt.Sprint("r", b, r), fmt.Sprint("n", b, r, n)},
					Free:   flavors.Resources{nvgpu: flavors.Amount(rng.IntN(9)), corev1.ResourcePods: flavors.Amount(1 + rng.IntN(pods))},
				})
			}
		}
	}
	return ls
}

// TestDomainsIncremental changes a tree node by node (nodes set, moved,
// resized, removed; pods' usage added and taken back) and checks, after
// every change, that it places and reports room as a tree built from
// scratch from the same nodes does, and that it keeps no domain without
// a node.
func TestDomainsIncremental(t *testing.T) {
	t.Run("hostname leaves", func(t *testing.T) { testDomainsIncremental(t, rackTopology) })
	// Leaves of several nodes: a rack's.
	t.Run("rack leaves", func(t *testing.T) {
		testDomainsIncremental(t, &Topology{Name: "racks", Levels: []string{"block", "rack"}})
	})
}

func testDomainsIncremental(t *testing.T, topo *Topology) {
	rng := rand.New(rand.NewPCG(1, 2))
	type node struct {
		values      []string
		allocatable flavors.Resources
		used        flavors.Resources
	}
	nodes := map[string]*node{}
	d := NewTopologyDomains(topo)
	randomValues := func(name string) []string {
		b, r := rng.IntN(2), rng.IntN(3)
		return []string{fmt.Sprint("b", b), fmt.Sprint("r", b, r), name}[:len(topo.Levels)]
	}
	for step := range 500 {
		name := fmt.Sprint("n", rng.IntN(12))
		n := nodes[name]
		switch op := rng.IntN(5); {
		case op == 0 || n == nil: // set (make, move or resize)
			values := randomValues(name)
			if n != nil && rng.IntN(2) == 0 {
				values = n.values
			}
			alloc := flavors.Resources{nvgpu: flavors.Amount(rng.IntN(9)), corev1.ResourcePods: flavors.Amount(1 + rng.IntN(8))}
			d.SetNode(name, values, alloc)
			if n == nil {
				n = &node{used: flavors.Resources{}}
				nodes[name] = n
			}
			n.values, n.allocatable = values, alloc
		case op == 1: // remove
			d.RemoveNode(name)
			delete(nodes, name)
		case op == 2 || op == 3: // a pod starts
			u := flavors.Resources{nvgpu: flavors.Amount(rng.IntN(3)), corev1.ResourcePods: 1}
			d.Use(name, u, +1)
			for r, a := range u {
				n.used[r] += a
			}
		default: // a pod ends
			if n.used[corev1.ResourcePods] == 0 {
				continue
			}
			u := flavors.Resources{nvgpu: min(n.used[nvgpu], 1), corev1.ResourcePods: 1}
			d.Use(name, u, -1)
			for r, a := range u {
				n.used[r] -= a
			}
		}
		var ls []TopologyLeaf
		for _, n := range nodes {
			free := flavors.Resources{}
			for r, a := range n.allocatable {
				free[r] = a - n.used[r]
			}
			ls = append(ls, TopologyLeaf{Values: n.values, Free: free})
		}
		fresh := NewDomains(topo, ls)
		perPod := flavors.Resources{nvgpu: 1}
		if got, want := fmt.Sprint(d.Room(perPod, 100)), fmt.Sprint(fresh.Room(perPod, 100)); got != want {
			t.Fatalf("step %d: room\n got %s\nwant %s", step, got, want)
		}
		req := TopologyRequest{Mode: TopologyMode(rng.IntN(3)), Level: topo.Levels[rng.IntN(len(topo.Levels))]}
		count := int32(1 + rng.IntN(10))
		a1, e1 := d.Place(count, perPod, req)
		a2, e2 := fresh.Place(count, perPod, req)
		if fmt.Sprint(a1, e1) != fmt.Sprint(a2, e2) {
			t.Fatalf("step %d: %d pods %+v:\n got %v %v\nwant %v %v", step, count, req, a1, e1, a2, e2)
		}
		for level := range topo.Levels {
			if got, want := len(d.perLevel[level]), len(fresh.perLevel[level]); got != want {
				t.Fatalf("step %d: level %d has %d domains, a fresh tree %d", step, level, got, want)
			}
		}
	}
}

// BenchmarkPlace places a 16-pod gang, required in one rack, on the tree
// of Kueue's TAS performance scenario: 1 block of 10 racks of 64 nodes,
// about half full.
func BenchmarkPlace(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	d := NewTopologyDomains(rackTopology)
	for r := range 10 {
		for n := range 64 {
			name := fmt.Sprint("n", r, "-", n)
			d.SetNode(name, []string{"b", fmt.Sprint("r", r), name}, flavors.Resources{corev1.ResourceCPU: 96000, corev1.ResourcePods: 110})
			d.Use(name, flavors.Resources{corev1.ResourceCPU: flavors.Amount(rng.IntN(96000))}, +1)
		}
	}
	perPod := flavors.Resources{corev1.ResourceCPU: 8000}
	req := TopologyRequest{Mode: TopologyRequired, Level: "rack"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Place(16, perPod, req); err != nil {
			b.Fatal(err)
		}
	}
}
