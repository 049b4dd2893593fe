package queues

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// Topology-aware placement: once a pod set's quota fits, where in a
// flavor's topology its pods go. A Topology (Kueue's) names node labels,
// coarsest first (block, rack, hostname); the nodes of a flavor form a
// tree of domains by their values of those labels, and each leaf has
// the capacity its nodes have free. Place finds, for count pods of equal
// requests, the domains and pod counts Kueue's TAS would choose by
// default (its BestFit profile):
//
//   - each domain holds as many pods as fit in its leaves, and, at the
//     slice level, as many slices (SliceSize pods in one domain of that
//     level) as its pods make;
//   - at the requested level, a domain that holds the whole pod set is
//     taken, the one that holds it with the least room left over (the
//     tightest fit); a required level with no such domain does not fit,
//     a preferred one climbs to the next level up and, at the top,
//     spreads over the fewest top-level domains, the largest first and
//     the tightest last; an unconstrained one spreads at the lowest level,
//     or, when it asks for slices, over the fewest top-level domains;
//   - below the chosen domains, down to the slice level, the slices go
//     level by level to the fewest of all the chosen domains' children,
//     the largest first and the tightest last (as in Kueue, a domain
//     chosen above may end up with fewer pods than it was given, or
//     none); below the slice level, each domain's pods go to its own
//     children, those with the least room first and the tightest last.
//
// PlaceAll places a workload's pod sets in turn, each on what those
// before it left. A group (podset-group-name: a leader such as a
// PyTorchJob's master, and its workers) is placed by a simpler rule than
// Kueue's leader-aware counts: the tightest domain at the level where the
// leader, put where it costs the workers the least room, and then the
// workers both fit. Several slice layers, balanced placement and node
// affinity are not weighed.
//
// Place is a pure function of the tree, which it does not change.

// Topology is a Kueue Topology: its name and the node labels of its
// levels, coarsest first.
type Topology struct {
	Name   string
	Levels []string
}

// TopologyMode is how a pod set asks to be placed.
type TopologyMode uint8

const (
	// TopologyRequired: all pods in one domain of the level.
	TopologyRequired TopologyMode = iota
	// TopologyPreferred: in one domain of the level if one holds them,
	// else of the next level up, else spread as little as may be.
	TopologyPreferred
	// TopologyUnconstrained: anywhere the flavor's nodes have room,
	// fewest domains first.
	TopologyUnconstrained
)

// TopologyRequest is what a pod set asks of its placement (Kueue's
// podset-*-topology annotations).
type TopologyRequest struct {
	Mode TopologyMode
	// Level is the node label of the level required or preferred; the
	// lowest level when unconstrained.
	Level string
	// SliceSize is how many pods go together in one domain of SliceLevel
	// (podset-slice-size); 0 or 1 for none.
	SliceSize  int32
	SliceLevel string
}

// TopologyLeaf is one leaf domain of a flavor's topology: its values of
// the topology's levels, and what its nodes have free (the pods resource
// included: a pod takes one).
type TopologyLeaf struct {
	Values []string
	Free   flavors.Resources
}

// Domains is the tree of a flavor's domains in one topology, kept node
// by node: SetNode, Use and RemoveNode each cost O(levels), never a
// rebuild. A leaf holds the nodes of its values (one, when the lowest
// level is the hostname) and has free what they have: their allocatable
// less what the pods on them use. A domain with no node left is gone.
type Domains struct {
	topology *Topology
	roots    []*domain
	perLevel []map[*domain]struct{}
	index    map[string]*domain
	nodes    map[string]*topologyNode
	// reserved is, by leaf key, what admitted workloads' assignments
	// give the leaf (Reserve), whether or not it has nodes now.
	reserved map[string]flavors.Resources
}

type domain struct {
	values   []string
	parent   *domain
	children []*domain
	free     flavors.Resources // leaves only: the sum of their nodes'
	nodes    int               // leaves only
	// pool: the leaf is the room a NodePool can still make (PoolLeaf),
	// not nodes that are.
	pool bool
}

// topologyNode is one node of a Domains: its leaf, its allocatable and
// what pods use of it.
type topologyNode struct {
	leaf              *domain
	allocatable, used flavors.Resources
}

// free is what the node has free.
func (n *topologyNode) free() flavors.Resources {
	out := make(flavors.Resources, len(n.allocatable))
	for r, a := range n.allocatable {
		out[r] = a.Sub(n.used[r])
	}
	return out
}

// NewTopologyDomains is the empty tree of topology t.
func NewTopologyDomains(t *Topology) *Domains {
	d := &Domains{topology: t, perLevel: make([]map[*domain]struct{}, len(t.Levels)),
		index: map[string]*domain{}, nodes: map[string]*topologyNode{}, reserved: map[string]flavors.Resources{}}
	for i := range d.perLevel {
		d.perLevel[i] = map[*domain]struct{}{}
	}
	return d
}

// NewDomains builds the tree of leaves in topology t, each a node of its
// own. Leaves with the same values are one domain, with what they have
// free summed (the nodes of a rack, when the lowest level is the rack); a
// leaf whose values are not one per level is left out.
func NewDomains(t *Topology, leaves []TopologyLeaf) *Domains {
	d := NewTopologyDomains(t)
	for i, leaf := range leaves {
		d.SetNode(fmt.Sprint(i), leaf.Values, leaf.Free)
	}
	return d
}

// SetNode puts node name in the leaf of values (its labels' values at the
// topology's levels, coarsest first) with allocatable, keeping what its
// pods use. Values that are not one per level, or empty, take it out.
func (d *Domains) SetNode(name string, values []string, allocatable flavors.Resources) {
	n := d.nodes[name]
	if len(values) != len(d.topology.Levels) || len(values) == 0 || slices.Contains(values, "") {
		d.RemoveNode(name)
		return
	}
	if n != nil && slices.Equal(n.leaf.values, values) {
		d.move(n.leaf, n.free(), -1)
		n.allocatable = maps.Clone(allocatable)
		d.move(n.leaf, n.free(), +1)
		return
	}
	var used flavors.Resources
	if n != nil {
		used = n.used
		d.RemoveNode(name)
	}
	n = &topologyNode{leaf: d.leafOf(values), allocatable: maps.Clone(allocatable), used: used}
	d.nodes[name] = n
	n.leaf.nodes++
	d.move(n.leaf, n.free(), +1)
}

// Use adds (sign +1) or takes back (-1) requests that a pod on node name
// uses. A node the tree does not hold is left alone.
func (d *Domains) Use(name string, requests flavors.Resources, sign int) {
	n := d.nodes[name]
	if n == nil {
		return
	}
	d.move(n.leaf, n.free(), -1)
	if n.used == nil {
		n.used = flavors.Resources{}
	}
	for r, a := range requests {
		if sign > 0 {
			n.used[r] = n.used[r].Add(a)
		} else if n.used[r] = n.used[r].Sub(a); n.used[r] == 0 {
			delete(n.used, r)
		}
	}
	d.move(n.leaf, n.free(), +1)
}

// Reserve adds (sign +1) or takes back (-1) total, what an admitted
// workload's assignment gives the leaf of values (its pods' requests,
// the pods resource included), whatever nodes it has, now or later.
func (d *Domains) Reserve(values []string, total flavors.Resources, sign int) {
	key := strings.Join(values, "\x00")
	u := d.reserved[key]
	if u == nil {
		u = flavors.Resources{}
		d.reserved[key] = u
	}
	for r, a := range total {
		if sign > 0 {
			u[r] = u[r].Add(a)
		} else if u[r] = u[r].Sub(a); u[r] == 0 {
			delete(u, r)
		}
	}
	if len(u) == 0 {
		delete(d.reserved, key)
	}
	if leaf := d.index[key]; leaf != nil && len(leaf.values) == len(d.topology.Levels) {
		d.move(leaf, total, -sign)
	}
}

// PodsOf is n pods of perPod's requests, each also one of the pods
// resource: what they take of a leaf.
func PodsOf(perPod flavors.Resources, n int32) flavors.Resources {
	total := withPod(perPod)
	for r, a := range total {
		total[r] = a.Mul(int64(n))
	}
	return total
}

// Topology is the topology of the tree.
func (d *Domains) Topology() *Topology { return d.topology }

// RemoveNode takes node name out, and with it every domain it leaves
// without a node.
func (d *Domains) RemoveNode(name string) {
	n := d.nodes[name]
	if n == nil {
		return
	}
	delete(d.nodes, name)
	d.move(n.leaf, n.free(), -1)
	if n.leaf.nodes--; n.leaf.nodes > 0 {
		return
	}
	for dom := n.leaf; dom != nil && len(dom.children) == 0 && dom.nodes == 0; dom = dom.parent {
		delete(d.index, strings.Join(dom.values, "\x00"))
		delete(d.perLevel[len(dom.values)-1], dom)
		if dom.parent == nil {
			d.roots = slices.DeleteFunc(d.roots, func(x *domain) bool { return x == dom })
		} else {
			dom.parent.children = slices.DeleteFunc(dom.parent.children, func(x *domain) bool { return x == dom })
		}
	}
}

// leafOf is the leaf of values, made with its missing ancestors.
func (d *Domains) leafOf(values []string) *domain {
	var parent *domain
	for level := range values {
		key := strings.Join(values[:level+1], "\x00")
		dom := d.index[key]
		if dom == nil {
			dom = &domain{values: slices.Clone(values[:level+1]), parent: parent, pool: level == len(values)-1 && IsPoolLeaf(values[level])}
			d.index[key] = dom
			if level == len(values)-1 {
				d.move(dom, d.reserved[key], -1)
			}
			d.perLevel[level][dom] = struct{}{}
			if parent == nil {
				d.roots = append(d.roots, dom)
			} else {
				parent.children = append(parent.children, dom)
			}
		}
		parent = dom
	}
	return parent
}

// move adds (sign +1) or takes away (-1) free from leaf's.
func (d *Domains) move(leaf *domain, free flavors.Resources, sign int) {
	if leaf.free == nil {
		leaf.free = flavors.Resources{}
	}
	for r, a := range free {
		if sign > 0 {
			leaf.free[r] = leaf.free[r].Add(a)
		} else {
			leaf.free[r] = leaf.free[r].Sub(a)
		}
	}
}

// level is the domains of level i, in no order.
func (d *Domains) level(i int) []*domain {
	return slices.Collect(maps.Keys(d.perLevel[i]))
}

// DomainCount is a domain of a placement, by its values of the
// topology's levels from the top, and how many pods go there.
type DomainCount struct {
	Values []string
	Count  int32
}

// TopologyAssignment is where a pod set's pods go: leaf domains (every
// level's value) and their counts, sorted by their values.
type TopologyAssignment struct {
	Levels  []string
	Domains []DomainCount
}

// NoFit says why a pod set cannot be placed: the level it could not be
// placed at and the domain there that holds the most of it.
type NoFit struct {
	Topology string
	Level    string
	// Largest is the values of the level's domain that holds the most
	// (nil when the level has none); Fits is how many of Wanted pods (or
	// slices of Slice pods) it holds, or, Spread, all the level's domains
	// together (a preferred pod set at the top, an unconstrained one).
	Largest      []string
	Fits, Wanted int32
	Slice        int32
	Spread       bool
}

func (n *NoFit) Error() string {
	unit := "pods"
	if n.Slice > 1 {
		unit = fmt.Sprintf("slices of %d pods", n.Slice)
	}
	if n.Largest == nil && !n.Spread {
		return fmt.Sprintf("topology %q: no %s domain holds %d %s; it has no %s domains", n.Topology, n.Level, n.Wanted, unit, n.Level)
	}
	if n.Spread {
		return fmt.Sprintf("topology %q: its %s domains hold %d of %d %s in all", n.Topology, n.Level, n.Fits, n.Wanted, unit)
	}
	return fmt.Sprintf("topology %q: no %s domain holds %d %s; the largest, %s, holds %d", n.Topology, n.Level, n.Wanted, unit, strings.Join(n.Largest, "/"), n.Fits)
}

// counts are a domain's capacity for one pod set while it is placed.
type counts struct {
	pods, slices int32
}

// assigning is the scratch of one placement: each domain's counts, what
// the pod sets placed before it took of each leaf (used), and the domain
// it is confined to (within, its values; nil for none).
type assigning struct {
	d      *Domains
	count  map[*domain]*counts
	used   map[*domain]flavors.Resources
	within []string
	// noPools keeps the pod set being placed out of pool leaves: it asks
	// pods to share a node, which nodes not made yet cannot promise.
	noPools bool
}

func (p *assigning) of(dom *domain) *counts { return p.count[dom] }

// Place places count pods of requests perPod as req asks. perPod is one
// pod's requests; each pod also takes one of the pods resource. An
// invalid request is an error; one that does not fit is a *NoFit.
func (d *Domains) Place(count int32, perPod flavors.Resources, req TopologyRequest) (TopologyAssignment, error) {
	p := &assigning{d: d}
	leaves, err := p.place(count, perPod, req)
	return d.assignment(leaves), err
}

// leafCount is how many pods a placement gives a leaf.
type leafCount struct {
	leaf *domain
	pods int32
}

// assignment is the TopologyAssignment of leaves.
func (d *Domains) assignment(leaves []leafCount) TopologyAssignment {
	out := TopologyAssignment{Levels: d.topology.Levels}
	for _, l := range leaves {
		out.Domains = append(out.Domains, DomainCount{Values: l.leaf.values, Count: l.pods})
	}
	slices.SortFunc(out.Domains, func(a, b DomainCount) int { return slices.Compare(a.Values, b.Values) })
	return out
}

// withPod is perPod and the one pod it is.
func withPod(perPod flavors.Resources) flavors.Resources {
	requests := flavors.Resources{corev1.ResourcePods: 1}
	for r, a := range perPod {
		requests[r] = requests[r].Add(a)
	}
	return requests
}

// levels resolves req's level and slice level.
func (d *Domains) levels(count int32, req TopologyRequest) (level int, slice int32, sliceLevel int, err error) {
	t := d.topology
	level = len(t.Levels) - 1
	switch {
	case req.Mode != TopologyUnconstrained:
		if level = slices.Index(t.Levels, req.Level); level < 0 {
			return 0, 0, 0, fmt.Errorf("topology %q has no level %q", t.Name, req.Level)
		}
	case req.SliceLevel != "":
		// Slices alone (podset-slice-required-topology without a
		// required or preferred level): as in Kueue, unconstrained from
		// the top level down, each slice in one domain of its level.
		level = 0
	}
	slice, sliceLevel = max(req.SliceSize, 1), len(t.Levels)-1
	if req.SliceLevel != "" {
		if sliceLevel = slices.Index(t.Levels, req.SliceLevel); sliceLevel < 0 {
			return 0, 0, 0, fmt.Errorf("topology %q has no level %q", t.Name, req.SliceLevel)
		}
	}
	if sliceLevel < level {
		return 0, 0, 0, fmt.Errorf("the slice level %q is above the level %q", t.Levels[sliceLevel], t.Levels[level])
	}
	if count%slice != 0 {
		return 0, 0, 0, fmt.Errorf("%d pods do not make slices of %d", count, slice)
	}
	return level, slice, sliceLevel, nil
}

// place places count pods on what p.used leaves free, within p.within,
// and returns the leaves given pods.
func (p *assigning) place(count int32, perPod flavors.Resources, req TopologyRequest) ([]leafCount, error) {
	t := p.d.topology
	if count <= 0 {
		return nil, nil
	}
	level, slice, sliceLevel, err := p.d.levels(count, req)
	if err != nil {
		return nil, err
	}
	// A pool leaf stands for any number of nodes not made yet: it takes
	// only pods that ask no node shared with others.
	node := len(t.Levels) - 1
	saved := p.noPools
	p.noPools = saved || slice > 1 && sliceLevel == node || req.Mode == TopologyRequired && level == node && count > 1
	defer func() { p.noPools = saved }()
	p.fillAll(withPod(perPod), slice, sliceLevel)
	unconstrained := req.Mode == TopologyUnconstrained

	chosen, at, err := p.fitAt(level, count/slice, slice, req.Mode == TopologyRequired, unconstrained)
	if err != nil {
		return nil, err
	}
	// Below the chosen domains, level by level: above the slice level the
	// slices go to the fewest domains of each level; at and below it
	// each domain's pods go to the fewest of its own children.
	chosen = p.takeMinimum(chosen, count/slice, slice, true)
	for ; at < min(len(t.Levels)-1, sliceLevel); at++ {
		chosen = p.takeMinimum(p.sorted(children(chosen)), count/slice, slice, true)
	}
	for ; at < len(t.Levels)-1; at++ {
		var next []*domain
		for _, dom := range chosen {
			next = append(next, p.takeMinimum(p.sorted(dom.children), p.of(dom).pods, 1, false)...)
		}
		chosen = next
	}
	var out []leafCount
	for _, dom := range chosen {
		if n := p.of(dom).pods; n > 0 {
			out = append(out, leafCount{dom, n})
		}
	}
	return out, nil
}

// fillAll counts every domain's pods and slices of requests.
func (p *assigning) fillAll(requests flavors.Resources, slice int32, sliceLevel int) {
	p.count = make(map[*domain]*counts, len(p.count))
	for _, root := range p.d.roots {
		p.fill(root, 0, requests, slice, sliceLevel)
	}
}

// free is what leaf has free for the pod set being placed: nothing
// outside p.within, else its free capacity less what p.used took.
func (p *assigning) free(leaf *domain) flavors.Resources {
	if p.within != nil && !slices.Equal(leaf.values[:len(p.within)], p.within) || leaf.pool && p.noPools {
		return nil
	}
	used := p.used[leaf]
	if len(used) == 0 {
		return leaf.free
	}
	free := make(flavors.Resources, len(leaf.free))
	for r, a := range leaf.free {
		free[r] = a.Sub(used[r])
	}
	return free
}

// take records that n pods of requests go to leaf.
func (p *assigning) take(leaf *domain, requests flavors.Resources, n int32) {
	if p.used == nil {
		p.used = map[*domain]flavors.Resources{}
	}
	u := p.used[leaf]
	if u == nil {
		u = flavors.Resources{}
		p.used[leaf] = u
	}
	for r, a := range requests {
		u[r] = u[r].Add(a.Mul(int64(n)))
	}
}

// fill counts the pods and slices each domain under dom, at level, holds.
func (p *assigning) fill(dom *domain, level int, requests flavors.Resources, slice int32, sliceLevel int) {
	c := &counts{}
	p.count[dom] = c
	if len(dom.children) == 0 {
		c.pods = countIn(requests, p.free(dom))
	}
	for _, child := range dom.children {
		p.fill(child, level+1, requests, slice, sliceLevel)
		c.pods += p.of(child).pods
		c.slices += p.of(child).slices
	}
	if level == sliceLevel {
		c.slices = c.pods / slice
	}
}

// countIn is how many pods of requests fit in free.
func countIn(requests, free flavors.Resources) int32 {
	n := int64(math.MaxInt32)
	for r, a := range requests {
		if a <= 0 {
			continue
		}
		f := free[r]
		if f.IsUnlimited() {
			continue
		}
		n = min(n, max(int64(f), 0)/int64(a))
	}
	return int32(n)
}

// fitAt finds the domains at level (or, preferred, above) that hold
// wanted slices: one that holds them all, else, unless required, the
// fewest that do together.
func (p *assigning) fitAt(level int, wanted, slice int32, required, unconstrained bool) ([]*domain, int, error) {
	domains := p.sorted(p.d.level(level))
	noFit := func(largest *domain, fits int32) *NoFit {
		n := &NoFit{Topology: p.d.topology.Name, Level: p.d.topology.Levels[level], Fits: fits, Wanted: wanted, Slice: slice}
		if largest != nil {
			n.Largest = largest.values
		}
		return n
	}
	if len(domains) == 0 {
		return nil, 0, noFit(nil, 0)
	}
	// One domain that holds them all, of nodes that are; a pool leaf's
	// nodes are one domain only for a pod that must have its own.
	if best := p.bestFit(domains, wanted); p.of(best).slices >= wanted && (!best.pool || required) {
		return []*domain{best}, level, nil
	}
	if required {
		return nil, 0, noFit(domains[0], p.of(domains[0]).slices)
	}
	if level > 0 && !unconstrained {
		return p.fitAt(level-1, wanted, slice, required, unconstrained)
	}
	var out []*domain
	left := wanted
	for i := 0; left > 0 && i < len(domains); i++ {
		dom := domains[i]
		if p.of(dom).slices >= left {
			dom = p.bestFit(domains[i:], left)
		}
		out = append(out, dom)
		left -= p.of(dom).slices
	}
	if left > 0 {
		n := noFit(domains[0], wanted-left)
		n.Spread = true
		return nil, 0, n
	}
	return out, level, nil
}

// takeMinimum gives wanted slices (of slice pods; bySlices false: wanted
// pods, one by one) to the fewest of domains, sorted largest first: each
// takes all it holds, and the last the tightest that holds what is left.
// It sets the chosen domains' pods to what they are given.
func (p *assigning) takeMinimum(domains []*domain, wanted, slice int32, bySlices bool) []*domain {
	holds := func(d *domain) int32 { return p.of(d).pods }
	if bySlices {
		holds = func(d *domain) int32 { return p.of(d).slices }
	}
	var out []*domain
	left := wanted
	for i := 0; left > 0 && i < len(domains); i++ {
		dom := domains[i]
		if holds(dom) >= left {
			dom = bestBy(domains[i:], left, holds)
		}
		c := p.of(dom)
		take := min(holds(dom), left)
		if bySlices {
			c.slices, c.pods = take, take*slice
		} else {
			c.pods = take
		}
		left -= take
		out = append(out, dom)
	}
	return out
}

// bestFit is the first of domains that holds wanted slices with the
// fewest to spare; the first domain if none holds them.
func (p *assigning) bestFit(domains []*domain, wanted int32) *domain {
	return bestBy(domains, wanted, func(d *domain) int32 { return p.of(d).slices })
}

// bestBy is the first of domains that holds wanted (as holds counts)
// with the fewest to spare, one of nodes that are before a pool leaf;
// the first domain if none holds them.
func bestBy(domains []*domain, wanted int32, holds func(*domain) int32) *domain {
	best, bestHolds, found := domains[0], int32(math.MaxInt32), false
	for _, d := range domains {
		h := holds(d)
		if h < wanted || found && best.pool != d.pool && d.pool {
			continue
		}
		if !found || h < bestHolds || best.pool && !d.pool {
			best, bestHolds, found = d, h, true
		}
	}
	return best
}

// sorted is domains by slices held, most first, then by pods held,
// fewest first (the least room to spare), then by their values; pool
// leaves last, so that the nodes there are are filled before nodes are
// made.
func (p *assigning) sorted(domains []*domain) []*domain {
	out := slices.Clone(domains)
	slices.SortFunc(out, func(a, b *domain) int {
		if a.pool != b.pool {
			if a.pool {
				return 1
			}
			return -1
		}
		ca, cb := p.of(a), p.of(b)
		if ca.slices != cb.slices {
			return cmp.Compare(cb.slices, ca.slices)
		}
		if ca.pods != cb.pods {
			return cmp.Compare(ca.pods, cb.pods)
		}
		return slices.Compare(a.values, b.values)
	})
	return out
}

// children is the children of domains, in order.
func children(domains []*domain) []*domain {
	var out []*domain
	for _, d := range domains {
		out = append(out, d.children...)
	}
	return out
}

// TopologyPodSet is one pod set of a workload to place: Count pods of
// PerPod's requests, placed as Request asks. Pod sets of one Group
// (podset-group-name) are placed together: a group is two pod sets with
// the same request, one of them of a single pod (the leader, such as a
// PyTorchJob's master) and the other its workers.
type TopologyPodSet struct {
	Name    string
	Count   int32
	PerPod  flavors.Resources
	Request TopologyRequest
	Group   string
}

// PlaceAll places a workload's pod sets, in order, each on what those
// before it left, and returns their assignments in the same order. The
// first that does not fit is a *NoFit.
//
// A group's leader goes where its workers lose the least room, and the
// workers where they would go on what it leaves: at the level asked, the
// tightest domain where both fit; a preferred group climbs, and at the
// top the leader takes its best leaf and the workers spread.
func (d *Domains) PlaceAll(sets []TopologyPodSet) ([]TopologyAssignment, error) {
	out, _, err := d.PlaceAllOn(nil, sets)
	return out, err
}

// Taken is what the placements of an admission pass took of a tree's
// leaves: the tree itself learns of them only once the admissions are
// recorded.
type Taken map[*domain]flavors.Resources

// PlaceAllOn is PlaceAll on what taken leaves free, and returns taken
// with this placement added, as a new Taken: taken is not changed.
func (d *Domains) PlaceAllOn(taken Taken, sets []TopologyPodSet) ([]TopologyAssignment, Taken, error) {
	out := make([]TopologyAssignment, len(sets))
	p := &assigning{d: d, used: cloneUsed(taken)}
	done := make([]bool, len(sets))
	for i := range sets {
		if done[i] {
			continue
		}
		group := []int{i}
		if sets[i].Group != "" {
			for j := i + 1; j < len(sets); j++ {
				if sets[j].Group == sets[i].Group {
					group = append(group, j)
				}
			}
		}
		for _, j := range group {
			done[j] = true
		}
		switch len(group) {
		case 1:
			leaves, err := p.place(sets[i].Count, sets[i].PerPod, sets[i].Request)
			if err != nil {
				return nil, nil, fmt.Errorf("pod set %s: %w", sets[i].Name, err)
			}
			p.record(leaves, withPod(sets[i].PerPod))
			out[i] = d.assignment(leaves)
		case 2:
			leader, workers := group[0], group[1]
			if sets[leader].Count != 1 {
				leader, workers = workers, leader
			}
			if sets[leader].Count != 1 || sets[leader].Request != sets[workers].Request {
				return nil, nil, fmt.Errorf("group %s: a group is a pod set of one pod and another, with the same topology request", sets[i].Group)
			}
			lead, rest, err := p.placeGroup(sets[leader], sets[workers])
			if err != nil {
				return nil, nil, fmt.Errorf("group %s: %w", sets[i].Group, err)
			}
			out[leader], out[workers] = d.assignment(lead), d.assignment(rest)
		default:
			return nil, nil, fmt.Errorf("group %s: %d pod sets; a group is a pod set of one pod and another", sets[i].Group, len(group))
		}
	}
	return out, p.used, nil
}

// record takes what leaves were given, of requests each pod.
func (p *assigning) record(leaves []leafCount, requests flavors.Resources) {
	for _, l := range leaves {
		p.take(l.leaf, requests, l.pods)
	}
}

// placeGroup places a leader and its workers together (PlaceAll).
func (p *assigning) placeGroup(leader, workers TopologyPodSet) (lead, rest []leafCount, err error) {
	// A group shares a domain; a pool leaf's nodes are not one node.
	node := len(p.d.topology.Levels) - 1
	defer func() { p.noPools = false }()
	req := workers.Request
	level, slice, sliceLevel, err := p.d.levels(workers.Count, req)
	if err != nil {
		return nil, nil, err
	}
	wantsLeader, wantsWorker := withPod(leader.PerPod), withPod(workers.PerPod)
	// try places the leader within the domain of values, then the
	// workers within it, at its level.
	try := func(values []string, wreq TopologyRequest) ([]leafCount, []leafCount, error) {
		saved, savedUsed := p.within, cloneUsed(p.used)
		p.within = values
		defer func() { p.within = saved }()
		leaf := p.leaderLeaf(wantsLeader, wantsWorker)
		if leaf == nil {
			return nil, nil, &NoFit{Topology: p.d.topology.Name, Level: p.d.topology.Levels[len(values)-1], Largest: values, Wanted: 1}
		}
		p.take(leaf, wantsLeader, 1)
		leaves, err := p.place(workers.Count, workers.PerPod, wreq)
		if err != nil {
			p.used = savedUsed
			return nil, nil, err
		}
		p.record(leaves, wantsWorker)
		return []leafCount{{leaf, 1}}, leaves, nil
	}
	if req.Mode != TopologyUnconstrained {
		var first error
		for at := level; at >= 0; at-- {
			p.noPools = at == node
			p.fillAll(wantsWorker, slice, sliceLevel)
			candidates := p.sorted(p.d.level(at))
			// The tightest first: the fewest workers' pods held.
			slices.Reverse(candidates)
			holds := make([]int32, len(candidates))
			for j, dom := range candidates {
				holds[j] = p.of(dom).pods
			}
			if first == nil {
				first = p.groupNoFit(at, candidates, holds, wantsLeader, wantsWorker, workers.Count)
			}
			for j, dom := range candidates {
				if holds[j] < workers.Count {
					continue
				}
				wreq := req
				wreq.Mode, wreq.Level = TopologyRequired, p.d.topology.Levels[at]
				if lead, rest, err := try(dom.values, wreq); err == nil {
					return lead, rest, nil
				}
			}
			if req.Mode == TopologyRequired {
				return nil, nil, first
			}
		}
	}
	// Anywhere: the leader where it costs the workers least, the workers
	// as they ask on what it leaves.
	p.noPools = false
	leaf := p.leaderLeaf(wantsLeader, wantsWorker)
	if leaf == nil {
		return nil, nil, &NoFit{Topology: p.d.topology.Name, Level: p.d.topology.Levels[len(p.d.topology.Levels)-1], Wanted: workers.Count + 1, Spread: true}
	}
	p.take(leaf, wantsLeader, 1)
	leaves, err := p.place(workers.Count, workers.PerPod, req)
	var n *NoFit
	if errors.As(err, &n) && n.Slice <= 1 {
		// Count the leader, which has its place.
		n.Fits, n.Wanted = n.Fits+1, n.Wanted+1
	}
	if err != nil {
		return nil, nil, err
	}
	p.record(leaves, wantsWorker)
	return []leafCount{{leaf, 1}}, leaves, nil
}

// leaderLeaf is the leaf within p.within where a leader of requests
// costs the workers (of worker each) the fewest pods, the tightest of
// those; nil if the leader fits in none.
func (p *assigning) leaderLeaf(leader, worker flavors.Resources) *domain {
	var best *domain
	bestCost, bestLeft := int32(math.MaxInt32), int32(math.MaxInt32)
	leaves := p.d.level(len(p.d.perLevel) - 1)
	slices.SortFunc(leaves, func(a, b *domain) int { return slices.Compare(a.values, b.values) })
	for _, leaf := range leaves {
		free := p.free(leaf)
		if countIn(leader, free) < 1 {
			continue
		}
		after := make(flavors.Resources, len(free))
		for r, a := range free {
			after[r] = a.Sub(leader[r])
		}
		before, left := countIn(worker, free), countIn(worker, after)
		if cost := before - left; cost < bestCost || cost == bestCost && left < bestLeft {
			best, bestCost, bestLeft = leaf, cost, left
		}
	}
	return best
}

// groupNoFit says why no domain at level holds a group: its domain that
// holds the most workers (candidates, the tightest first, hold holds),
// and how many of the group's pods fit there, its leader first.
func (p *assigning) groupNoFit(level int, candidates []*domain, holds []int32, leader, worker flavors.Resources, workers int32) *NoFit {
	n := &NoFit{Topology: p.d.topology.Name, Level: p.d.topology.Levels[level], Wanted: workers + 1}
	if len(candidates) == 0 {
		return n
	}
	largest := candidates[len(candidates)-1]
	n.Largest = largest.values
	savedWithin, savedUsed, savedCount := p.within, cloneUsed(p.used), p.count
	p.within = largest.values
	if leaf := p.leaderLeaf(leader, worker); leaf != nil {
		p.take(leaf, leader, 1)
		n.Fits = 1
	}
	p.fillAll(worker, 1, len(p.d.topology.Levels)-1)
	n.Fits += min(p.of(largest).pods, workers)
	p.within, p.used, p.count = savedWithin, savedUsed, savedCount
	return n
}

// cloneUsed copies used, each leaf's resources too.
func cloneUsed[M ~map[*domain]flavors.Resources](used M) map[*domain]flavors.Resources {
	out := make(map[*domain]flavors.Resources, len(used))
	for d, r := range used {
		out[d] = maps.Clone(r)
	}
	return out
}

// LevelRoom is, for one level of a topology, its domains that hold the
// most of a pod set, the most first, and how many pods each holds.
type LevelRoom struct {
	Level   string
	Domains []DomainCount
}

// Room says, level by level from the top, which top domains hold the
// most pods of perPod, and how many each holds: why a pod set waits at
// a level (tally explain).
func (d *Domains) Room(perPod flavors.Resources, top int) []LevelRoom {
	p := &assigning{d: d}
	last := len(d.topology.Levels) - 1
	p.fillAll(withPod(perPod), 1, last)
	out := make([]LevelRoom, len(d.topology.Levels))
	for level, name := range d.topology.Levels {
		out[level].Level = name
		for _, dom := range p.sorted(d.level(level))[:min(top, len(d.perLevel[level]))] {
			out[level].Domains = append(out[level].Domains, DomainCount{Values: dom.values, Count: p.of(dom).pods})
		}
	}
	return out
}

// Holds is how many pods of perPod the domain of values (a level's
// values from the top; none for the whole tree) holds on what its
// leaves have free.
func (d *Domains) Holds(values []string, perPod flavors.Resources) int32 {
	return d.holdsOn(nil, values, perPod)
}

// holdsOn is Holds on what taken leaves free.
func (d *Domains) holdsOn(taken Taken, values []string, perPod flavors.Resources) int32 {
	p := &assigning{d: d, used: taken}
	p.fillAll(withPod(perPod), 1, len(d.topology.Levels)-1)
	if len(values) == 0 {
		var n int32
		for _, root := range d.roots {
			n += p.of(root).pods
		}
		return n
	}
	dom := d.index[strings.Join(values, "\x00")]
	if dom == nil {
		return 0
	}
	return p.of(dom).pods
}

// replacement is the leaf other than lost, under lost's parent domain,
// that holds n more pods of perPod with the fewest left over (the first
// by values of those).
func (d *Domains) replacement(lost []string, perPod flavors.Resources, n int32) ([]string, bool) {
	p := &assigning{d: d}
	p.fillAll(withPod(perPod), 1, len(d.topology.Levels)-1)
	siblings := d.roots
	if len(lost) > 1 {
		parent := d.index[strings.Join(lost[:len(lost)-1], "\x00")]
		if parent == nil {
			return nil, false
		}
		siblings = parent.children
	}
	var best *domain
	for _, leaf := range siblings {
		holds := p.of(leaf).pods
		if holds < n || slices.Equal(leaf.values, lost) {
			continue
		}
		if best == nil || holds < p.of(best).pods || holds == p.of(best).pods && slices.Compare(leaf.values, best.values) < 0 {
			best = leaf
		}
	}
	if best == nil {
		return nil, false
	}
	return best.values, true
}
