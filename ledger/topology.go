package ledger

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// domains is the ledger's room for topology-aware placement: for each
// flavor of the config in force that has a topology, the tree of its
// domains (queues.Domains) that the passes place pod sets in. It keeps
// them from the nodes the ledger watches and from the placements of the
// workloads that hold quota. Its invariants:
//
//   - trees has a tree for exactly the flavors of cfg with a topology;
//   - each tree holds exactly the known nodes that are Ready and
//     schedulable, whose labels match the flavor's node labels, with
//     their allocatable;
//   - reserved holds exactly the entries that are charged quota and
//     have a placement, each with what it reserved, and each tree has
//     the placements in its flavor reserved.
//
// A node event costs a check per topology flavor and the node's levels;
// a reservation, the placement's domains. Like the other rooms it does
// no I/O and holds no lock: the ledger's lock covers it.
type domains struct {
	cfg   *queues.Config
	trees map[string]*queues.Domains
	// queuesOf maps each flavor with a topology to the ClusterQueues
	// that list it: those a change of its tree may let admit.
	queuesOf map[string][]string
	nodes    map[string]*topologyNode
	reserved map[*entry]placement
}

// topologyNode is what the trees read of a node.
type topologyNode struct {
	labels      labels.Set
	allocatable flavors.Resources
	usable      bool // Ready and schedulable
}

// placement is what an entry reserved: its pod sets' assignments in the
// topology of flavor, and each pod set's requests per pod.
type placement struct {
	flavor string
	sets   []queues.TopologyAssignment
	perPod []flavors.Resources
}

func newDomains() domains {
	return domains{nodes: map[string]*topologyNode{}, reserved: map[*entry]placement{}}
}

// configure makes the trees for cfg, from the nodes known, with the
// placements reserved again.
func (d *domains) configure(cfg *queues.Config) {
	d.cfg, d.trees, d.queuesOf = cfg, nil, nil
	for name, fl := range cfg.Flavors {
		t := cfg.Topologies[fl.TopologyName]
		if fl.TopologyName == "" || t == nil {
			continue
		}
		if d.trees == nil {
			d.trees, d.queuesOf = map[string]*queues.Domains{}, map[string][]string{}
		}
		d.trees[name] = queues.NewTopologyDomains(t)
	}
	for _, q := range cfg.QueueNames {
		for _, g := range cfg.ClusterQueues[q].ResourceGroups {
			for _, fq := range g.Flavors {
				if d.trees[fq.Name] != nil && !slices.Contains(d.queuesOf[fq.Name], q) {
					d.queuesOf[fq.Name] = append(d.queuesOf[fq.Name], q)
				}
			}
		}
	}
	for name, n := range d.nodes {
		d.place(name, n)
	}
	for _, p := range d.reserved {
		d.reserve(p, +1)
	}
}

// setNode notes node n as it is now, and returns the queues whose
// flavors' trees it changed.
func (d *domains) setNode(n *corev1.Node) []string {
	tn := &topologyNode{labels: n.Labels, allocatable: flavors.FromList(n.Status.Allocatable), usable: !n.Spec.Unschedulable && nodeReady(n)}
	if old := d.nodes[n.Name]; old != nil && old.usable == tn.usable && maps.Equal(old.labels, tn.labels) && maps.Equal(old.allocatable, tn.allocatable) {
		return nil
	}
	d.nodes[n.Name] = tn
	return d.place(n.Name, tn)
}

// removeNode forgets node name, and returns the queues whose flavors'
// trees it changed.
func (d *domains) removeNode(name string) []string {
	if d.nodes[name] == nil {
		return nil
	}
	delete(d.nodes, name)
	var out []string
	for fl, t := range d.trees {
		t.RemoveNode(name)
		out = append(out, d.queuesOf[fl]...)
	}
	return out
}

// place puts node name in the tree of each flavor it belongs to, and
// takes it out of the others.
func (d *domains) place(name string, n *topologyNode) []string {
	var out []string
	for fl, t := range d.trees {
		if n.usable && labels.SelectorFromSet(d.cfg.Flavors[fl].NodeLabels).Matches(n.labels) {
			values := make([]string, len(t.Topology().Levels))
			for i, label := range t.Topology().Levels {
				values[i] = n.labels[label]
			}
			t.SetNode(name, values, n.allocatable)
		} else {
			t.RemoveNode(name)
		}
		out = append(out, d.queuesOf[fl]...)
	}
	return out
}

// follow reserves e's placement while it is charged quota, and takes it
// back once it is not; a placement read from the workload's annotation
// (e.topologyAnn) stands for one not made by this ledger, after a
// restart.
func (d *domains) follow(e *entry) {
	old, had := d.reserved[e]
	if e.Charged == nil || e.W == nil {
		if had {
			d.reserve(old, -1)
			delete(d.reserved, e)
		}
		e.placed = nil
		return
	}
	if e.placed == nil && e.topologyAnn != "" && d.cfg != nil {
		if fl, sets, err := queues.ParseTopologyAnnotation(d.cfg, e.W, e.topologyAnn); err == nil {
			e.placed = &placement{flavor: fl, sets: sets}
		}
	}
	if e.placed == nil {
		if had {
			d.reserve(old, -1)
			delete(d.reserved, e)
		}
		return
	}
	if had && old.flavor == e.placed.flavor && slices.EqualFunc(old.sets, e.placed.sets, sameAssignment) {
		return
	}
	if had {
		d.reserve(old, -1)
	}
	p := *e.placed
	p.perPod = make([]flavors.Resources, len(e.W.PodSets))
	for i, ps := range e.W.PodSets {
		p.perPod[i] = ps.Requests
	}
	d.reserved[e] = p
	d.reserve(p, +1)
}

// reserve reserves (sign +1) or takes back (-1) p in its flavor's tree.
func (d *domains) reserve(p placement, sign int) {
	t := d.trees[p.flavor]
	if t == nil {
		return
	}
	for i, ta := range p.sets {
		if i >= len(p.perPod) {
			break
		}
		for _, dc := range ta.Domains {
			t.Reserve(dc.Values, p.perPod[i], dc.Count, sign)
		}
	}
}

func sameAssignment(a, b queues.TopologyAssignment) bool {
	return slices.EqualFunc(a.Domains, b.Domains, func(x, y queues.DomainCount) bool {
		return x.Count == y.Count && slices.Equal(x.Values, y.Values)
	})
}

// nodeReady says whether n's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onNode puts a node's change into the topologies' trees, and has the
// queues of the flavors whose trees changed decided again.
func (l *Ledger) onNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.domainsChangedLocked(l.topo.setNode(n))
}

// onNodeDelete takes a node out of the topologies' trees.
func (l *Ledger) onNodeDelete(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.domainsChangedLocked(l.topo.removeNode(n.Name))
}

// domainsChangedLocked has queues decided again: their topologies have
// room they may fit in now.
func (l *Ledger) domainsChangedLocked(queues []string) {
	for _, q := range queues {
		l.passCache.touch(q)
	}
	if len(queues) > 0 && l.synced {
		l.writer.wakePass()
	}
}

// pins are the node labels each pod set of a placement is pinned to
// (queues.TopologyAssignment.Pinned); nil for none.
type pins []map[string]string

func (p *placement) pins() pins {
	if p == nil {
		return nil
	}
	out := make(pins, 0, len(p.sets))
	for _, ta := range p.sets {
		out = append(out, ta.Pinned())
	}
	return out
}

// confine says whether a pod of spec may only run where some pod set of
// the placement is pinned: its own node selection implies that pod
// set's labels. Without a placement, any pod may.
func (p pins) confine(spec *corev1.PodSpec) bool {
	if len(p) == 0 {
		return true
	}
	return slices.ContainsFunc(p, func(pin map[string]string) bool { return queues.PodConfined(spec, pin) })
}
