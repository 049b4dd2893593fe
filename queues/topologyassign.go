package queues

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// Topology-aware admission: a flavor with a topology (spec.topologyName)
// admits a Workload only where its pod sets can also be placed in the
// flavor's domains (Snapshot.Domains), on what the pass's admissions
// before it left (Snapshot.taken). A pod set that asks nothing is placed
// unconstrained, at the lowest level, as Kueue places it: with
// kubernetes.io/hostname the lowest level, that is node-level fit. A
// Workload that asks for a placement is not admitted on a flavor without
// a topology.

// asksTopology says whether any pod set of w asks where in a topology
// its pods go.
func (w *Workload) asksTopology() bool {
	for _, ps := range w.PodSets {
		if ps.Topology != nil {
			return true
		}
	}
	return false
}

// topologySets is w's pod sets as the placement takes them.
func (w *Workload) topologySets() []TopologyPodSet {
	sets := make([]TopologyPodSet, 0, len(w.PodSets))
	for _, ps := range w.PodSets {
		req := TopologyRequest{Mode: TopologyUnconstrained}
		if ps.Topology != nil {
			req = *ps.Topology
		}
		sets = append(sets, TopologyPodSet{Name: ps.Name, Count: int32(min(ps.Count, 1<<30)), PerPod: ps.Requests, Request: req, Group: ps.Group})
	}
	return sets
}

// place places w's pod sets in flavor fl's domains, on what this pass
// took of them. The error is a *NoFit (wrapped) when they do not fit now,
// or says why they never can on fl.
func (s *Snapshot) place(fl *flavors.Flavor, w *Workload) ([]TopologyAssignment, Taken, error) {
	d := s.Domains[fl.Name]
	if d == nil {
		t := s.Config.Topologies[fl.TopologyName]
		if t == nil {
			return nil, nil, fmt.Errorf("flavor %s names topology %q, which the config does not define", fl.Name, fl.TopologyName)
		}
		d = NewTopologyDomains(t)
	}
	return d.PlaceAllOn(s.taken[fl.Name], w.topologySets())
}

// topologyVerdict is the verdict of w, which fits the quota of flavor fl
// but not its domains (err from place): it waits while err is a *NoFit,
// and never fits on fl otherwise.
func topologyVerdict(cq *ClusterQueue, fl *flavors.Flavor, w *Workload, err error) Verdict {
	var nf *NoFit
	if errors.As(err, &nf) {
		return waitf("topology/"+fl.Name, "fits ClusterQueue %s's quota in flavor %s, but not its topology: %v", cq.Name, fl.Name, err)
	}
	return neverf("topology-invalid", "flavor %s cannot place the %s: %v", fl.Name, w.KindName(), err)
}

// topology says whether v waits for room in a topology: a Workload that
// requests more does not wait for the same reason, as its pods may be
// shaped otherwise.
func (v Verdict) topology() bool { return strings.HasPrefix(v.Code, "topology/") }

// takeTopology records that an admission took what a placed.
func (s *Snapshot) takeTopology(a Assignment) {
	if a.topologyFlavor == "" {
		return
	}
	if s.taken == nil {
		s.taken = map[string]Taken{}
	}
	s.taken[a.topologyFlavor] = a.taken
}

// TopologyAnnotation renders where each pod set of w goes, for the
// AnnotationTopology annotation: the flavor placed in, then each pod
// set's leaf domains (by their values from the top, "/"-joined) and
// their counts, "gpu;main=block-1/rack-2:3,block-1/rack-3:1;worker=...".
// Empty when nothing was placed.
func (a Assignment) TopologyAnnotation(w *Workload) string {
	return FormatTopology(a.topologyFlavor, a.Topology, w)
}

// FormatTopology renders the placement of w's pod sets in flavor's
// topology as AnnotationTopology holds it (Assignment.TopologyAnnotation).
func FormatTopology(flavor string, sets []TopologyAssignment, w *Workload) string {
	if len(sets) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(flavor)
	for i, ta := range sets {
		b.WriteByte(';')
		b.WriteString(w.PodSets[i].Name)
		b.WriteByte('=')
		for j, dc := range ta.Domains {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s:%d", strings.Join(dc.Values, "/"), dc.Count)
		}
	}
	return b.String()
}

// TopologyFlavor is the flavor a's Topology places in; "" for none.
func (a Assignment) TopologyFlavor() string { return a.topologyFlavor }

// ParseTopologyAnnotation reads an AnnotationTopology annotation of w,
// under cfg: the flavor and, in w's pod set order, each pod set's
// assignment. An annotation that names a flavor without a topology, or
// a pod set w does not have, or does not parse, is an error.
func ParseTopologyAnnotation(cfg *Config, w *Workload, ann string) (string, []TopologyAssignment, error) {
	fl, names, sets, err := parseTopologyAnnotation(cfg, ann)
	if err != nil {
		return "", nil, err
	}
	out := make([]TopologyAssignment, len(w.PodSets))
	for j, name := range names {
		i := slices.IndexFunc(w.PodSets, func(ps PodSet) bool { return ps.Name == name })
		if i < 0 {
			return "", nil, fmt.Errorf("%q: no pod set %q", ann, name)
		}
		out[i] = sets[j]
	}
	return fl, out, nil
}

// TopologyPins reads an AnnotationTopology annotation under cfg: the
// node labels each pod set it places is pinned to (Pinned), in its
// order.
func TopologyPins(cfg *Config, ann string) ([]map[string]string, error) {
	_, _, sets, err := parseTopologyAnnotation(cfg, ann)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]string, len(sets))
	for i, ta := range sets {
		out[i] = ta.Pinned()
	}
	return out, nil
}

// parseTopologyAnnotation reads ann: its flavor, and its pod sets' names
// and assignments, in its order.
func parseTopologyAnnotation(cfg *Config, ann string) (string, []string, []TopologyAssignment, error) {
	parts := strings.Split(ann, ";")
	fl := cfg.Flavors[parts[0]]
	if fl == nil || cfg.Topologies[fl.TopologyName] == nil {
		return "", nil, nil, fmt.Errorf("%q: flavor %q has no topology", ann, parts[0])
	}
	levels := cfg.Topologies[fl.TopologyName].Levels
	var names []string
	var sets []TopologyAssignment
	for _, part := range parts[1:] {
		name, list, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return "", nil, nil, fmt.Errorf("%q: %q is not podset=domains", ann, part)
		}
		ta := TopologyAssignment{Levels: levels}
		for _, d := range strings.Split(list, ",") {
			values, count, ok := strings.Cut(d, ":")
			n, err := strconv.ParseInt(count, 10, 32)
			vs := strings.Split(values, "/")
			if !ok || err != nil || n < 1 || len(vs) != len(levels) {
				return "", nil, nil, fmt.Errorf("%q: %q is not values/...:count of topology %s", ann, d, fl.TopologyName)
			}
			ta.Domains = append(ta.Domains, DomainCount{Values: vs, Count: int32(n)})
		}
		names, sets = append(names, name), append(sets, ta)
	}
	return fl.Name, names, sets, nil
}

// Pinned is the node labels that every pod of the pod set ta places
// shares: each level's label and value down to the deepest level where
// all its domains are one, above the node. A pod set pinned so runs
// where it was placed at that level; nil when its domains differ at the
// top. The node itself is never pinned: the gate gives each pod its
// node (Gated), so that a node lost can be replaced by another.
func (ta TopologyAssignment) Pinned() map[string]string {
	if len(ta.Domains) == 0 {
		return nil
	}
	out := map[string]string{}
	first := ta.Domains[0].Values
	for level, label := range ta.Levels {
		if label == corev1.LabelHostname {
			return out
		}
		for _, dc := range ta.Domains[1:] {
			if dc.Values[level] != first[level] {
				return out
			}
		}
		out[label] = first[level]
	}
	return out
}

// Gated says whether the pods of ta's pod set wait at the pod gate to be
// given each its leaf (NextLeaf): the pod set is in several leaves, or
// its leaf is a node, which its template does not pin.
func (ta TopologyAssignment) Gated() bool {
	return len(ta.Domains) > 1 || len(ta.Domains) == 1 && len(ta.Levels) > 0 && ta.Levels[len(ta.Levels)-1] == corev1.LabelHostname
}

// placedAfter says, for a workload w that may preempt on flavor f, whether
// it can be placed in f's domains once chosen are gone: their placements'
// room is free for it. Nil when f places nothing (no topology, or no
// Domains): quota alone decides.
func (s *Snapshot) placedAfter(f string, w *Workload) func(chosen []candidate) bool {
	fl := s.Config.Flavors[f]
	if fl == nil || fl.TopologyName == "" || s.Domains == nil {
		return nil
	}
	return func(chosen []candidate) bool {
		ps := make([]*Placement, len(chosen))
		for i, c := range chosen {
			ps[i] = c.Placement
		}
		_, _, err := s.placeReleased(f, w, ps)
		return err == nil
	}
}

// placementsOf are the placements of victims vs.
func placementsOf(vs []Victim) []*Placement {
	out := make([]*Placement, len(vs))
	for i, v := range vs {
		out[i] = v.Placement
	}
	return out
}

// placeReleased places w in flavor f's domains with the room of ps (the
// placements of workloads it preempts; nil ones hold none) given back;
// an error when f has no Domains.
func (s *Snapshot) placeReleased(f string, w *Workload, ps []*Placement) ([]TopologyAssignment, Taken, error) {
	d := s.Domains[f]
	if d == nil {
		return nil, nil, fmt.Errorf("flavor %s has no domains", f)
	}
	taken := Taken(cloneUsed(s.taken[f]))
	for _, p := range ps {
		if p != nil && p.Flavor == f {
			taken = d.released(taken, *p)
		}
	}
	return d.PlaceAllOn(taken, w.topologySets())
}

// released is taken with the room of placement p given back: what p's
// leaves hold counts as free for the placement under way.
func (d *Domains) released(taken Taken, p Placement) Taken {
	for i, ta := range p.Sets {
		if i >= len(p.PerPod) {
			break
		}
		for _, dc := range ta.Domains {
			leaf := d.index[strings.Join(dc.Values, "\x00")]
			if leaf == nil {
				continue
			}
			u := taken[leaf]
			if u == nil {
				u = flavors.Resources{}
				taken[leaf] = u
			}
			for r, a := range PodsOf(p.PerPod[i], dc.Count) {
				u[r] = u[r].Sub(a)
			}
		}
	}
	return taken
}

// Spread says whether the pods of pod set name of the workload an
// AnnotationTopology annotation describes wait at the pod gate to be
// given each its leaf (TopologyAssignment.Gated). An empty name (a pod
// that names no pod set) asks whether any pod set's do.
func Spread(cfg *Config, ann, name string) bool {
	_, names, sets, err := parseTopologyAnnotation(cfg, ann)
	if err != nil {
		return false
	}
	for i, ta := range sets {
		if (name == "" || names[i] == name) && ta.Gated() {
			return true
		}
	}
	return false
}

// NextLeaf is the node labels of the leaf domain the next pod of ta's
// pod set goes to, given how many of its pods each leaf (by its values,
// "/"-joined) has already: the first leaf with fewer than it was given.
// Nil when its pods are not Gated (its template pins its one leaf), or
// every leaf has its count (its pods then keep to what the template
// pins).
func (ta TopologyAssignment) NextLeaf(has map[string]int32) map[string]string {
	if !ta.Gated() {
		return nil
	}
	for _, dc := range ta.Domains {
		if has[strings.Join(dc.Values, "/")] < dc.Count {
			out := make(map[string]string, len(ta.Levels))
			for l, label := range ta.Levels {
				k, v := leafLabel(label, dc.Values[l])
				out[k] = v
			}
			return out
		}
	}
	return nil
}

// LeafOf is the leaf ("/"-joined values) of ta's topology that a
// nodeSelector names: "" when it does not name every level. A
// NodePool's label alone names its pool leaf.
func (ta TopologyAssignment) LeafOf(nodeSelector map[string]string) string {
	values := make([]string, len(ta.Levels))
	for i, label := range ta.Levels {
		if values[i] = nodeSelector[label]; values[i] != "" {
			continue
		}
		if pool := nodeSelector[LabelNodePool]; pool != "" && i == len(ta.Levels)-1 && label == corev1.LabelHostname {
			values[i] = PoolLeaf(pool)
			continue
		}
		return ""
	}
	return strings.Join(values, "/")
}
