package queues

import (
	"cmp"
	"fmt"
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
//     the tightest last; an unconstrained one spreads at the lowest level;
//   - below the chosen domains, down to the slice level, the slices go
//     level by level to the fewest of all the chosen domains' children,
//     the largest first and the tightest last (as in Kueue, a domain
//     chosen above may end up with fewer pods than it was given, or
//     none); below the slice level, each domain's pods go to its own
//     children, those with the least room first and the tightest last.
//
// Leaders (a pod set grouped with another, podset-group-name), several
// slice layers, balanced placement and node affinity are not weighed yet.
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

// Domains is the tree of a flavor's domains in one topology.
type Domains struct {
	topology *Topology
	roots    []*domain
	perLevel [][]*domain
}

type domain struct {
	values   []string
	children []*domain
	free     flavors.Resources // leaves only
}

// NewDomains builds the tree of leaves in topology t. Leaves with the
// same values are one domain, with what they have free summed (the nodes
// of a rack, when the lowest level is the rack); a leaf whose values are
// not one per level is left out.
func NewDomains(t *Topology, leaves []TopologyLeaf) *Domains {
	d := &Domains{topology: t, perLevel: make([][]*domain, len(t.Levels))}
	index := map[string]*domain{}
	for _, leaf := range leaves {
		if len(leaf.Values) != len(t.Levels) || len(t.Levels) == 0 {
			continue
		}
		var parent *domain
		for level := range t.Levels {
			key := strings.Join(leaf.Values[:level+1], "\x00")
			dom := index[key]
			if dom == nil {
				dom = &domain{values: leaf.Values[: level+1 : level+1]}
				index[key] = dom
				d.perLevel[level] = append(d.perLevel[level], dom)
				if parent == nil {
					d.roots = append(d.roots, dom)
				} else {
					parent.children = append(parent.children, dom)
				}
			}
			parent = dom
		}
		if parent.free == nil {
			parent.free = flavors.Resources{}
		}
		for r, a := range leaf.Free {
			parent.free[r] = parent.free[r].Add(a)
		}
	}
	return d
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
	if n.Largest == nil {
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

// assigning is the scratch of one Place.
type assigning struct {
	d     *Domains
	count map[*domain]*counts
}

func (p *assigning) of(dom *domain) *counts { return p.count[dom] }

// Place places count pods of requests perPod as req asks. perPod is one
// pod's requests; each pod also takes one of the pods resource. An
// invalid request is an error; one that does not fit is a *NoFit.
func (d *Domains) Place(count int32, perPod flavors.Resources, req TopologyRequest) (TopologyAssignment, error) {
	t := d.topology
	if count <= 0 {
		return TopologyAssignment{Levels: t.Levels}, nil
	}
	level := len(t.Levels) - 1
	if req.Mode != TopologyUnconstrained {
		if level = slices.Index(t.Levels, req.Level); level < 0 {
			return TopologyAssignment{}, fmt.Errorf("topology %q has no level %q", t.Name, req.Level)
		}
	}
	slice, sliceLevel := max(req.SliceSize, 1), len(t.Levels)-1
	if req.SliceLevel != "" {
		if sliceLevel = slices.Index(t.Levels, req.SliceLevel); sliceLevel < 0 {
			return TopologyAssignment{}, fmt.Errorf("topology %q has no level %q", t.Name, req.SliceLevel)
		}
	}
	if sliceLevel < level {
		return TopologyAssignment{}, fmt.Errorf("the slice level %q is above the level %q", t.Levels[sliceLevel], t.Levels[level])
	}
	if count%slice != 0 {
		return TopologyAssignment{}, fmt.Errorf("%d pods do not make slices of %d", count, slice)
	}
	requests := flavors.Resources{corev1.ResourcePods: 1}
	for r, a := range perPod {
		requests[r] = requests[r].Add(a)
	}
	p := &assigning{d: d, count: map[*domain]*counts{}}
	for _, root := range d.roots {
		p.fill(root, 0, requests, slice, sliceLevel)
	}
	unconstrained := req.Mode == TopologyUnconstrained

	chosen, at, err := p.fitAt(level, count/slice, slice, req.Mode == TopologyRequired, unconstrained)
	if err != nil {
		return TopologyAssignment{}, err
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
	out := TopologyAssignment{Levels: t.Levels}
	for _, dom := range chosen {
		if n := p.of(dom).pods; n > 0 {
			out.Domains = append(out.Domains, DomainCount{Values: dom.values, Count: n})
		}
	}
	slices.SortFunc(out.Domains, func(a, b DomainCount) int { return slices.Compare(a.Values, b.Values) })
	return out, nil
}

// fill counts the pods and slices each domain under dom, at level, holds.
func (p *assigning) fill(dom *domain, level int, requests flavors.Resources, slice int32, sliceLevel int) {
	c := &counts{}
	p.count[dom] = c
	if len(dom.children) == 0 {
		c.pods = countIn(requests, dom.free)
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
	domains := p.sorted(p.d.perLevel[level])
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
	if p.of(domains[0]).slices >= wanted {
		return []*domain{p.bestFit(domains, wanted)}, level, nil
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
	var out []*domain
	left := wanted
	for i := 0; left > 0 && i < len(domains); i++ {
		dom := domains[i]
		holds := func(d *domain) int32 {
			if bySlices {
				return p.of(d).slices
			}
			return p.of(d).pods
		}
		if holds(dom) >= left {
			if bySlices {
				dom = p.bestFit(domains[i:], left)
			} else {
				dom = p.bestFitPods(domains[i:], left)
			}
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

// bestFitPods is bestFit by pods.
func (p *assigning) bestFitPods(domains []*domain, wanted int32) *domain {
	return bestBy(domains, wanted, func(d *domain) int32 { return p.of(d).pods })
}

func bestBy(domains []*domain, wanted int32, holds func(*domain) int32) *domain {
	best, bestHolds := domains[0], int32(math.MaxInt32)
	for _, d := range domains {
		if h := holds(d); h >= wanted && h < bestHolds {
			best, bestHolds = d, h
		}
	}
	return best
}

// sorted is domains by slices held, most first, then by pods held,
// fewest first (the least room to spare), then by their values.
func (p *assigning) sorted(domains []*domain) []*domain {
	out := slices.Clone(domains)
	slices.SortFunc(out, func(a, b *domain) int {
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
