package queues

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// FlavorDomains keeps, for each flavor of a config that has a topology,
// the tree of its domains that admission places pod sets in
// (Snapshot.Domains): from the nodes it is told of, and the placements
// of the workloads that hold quota. Its invariants:
//
//   - Trees has a tree for exactly the flavors of the config with a
//     topology;
//   - each tree holds exactly the nodes told of that are Ready and
//     schedulable and whose labels match the flavor's node labels, with
//     their allocatable;
//   - each tree has reserved exactly the placements held in its flavor.
//
// A node's change costs a check per topology flavor and its levels; a
// placement, its domains.
type FlavorDomains struct {
	// Trees maps each flavor with a topology to its tree.
	Trees map[string]*Domains
	cfg   *Config
	// queuesOf maps each flavor with a topology to the ClusterQueues
	// that list it: those a change of its tree may let admit.
	queuesOf map[string][]string
	nodes    map[string]*domainNode
	held     map[any]Placement
}

// domainNode is what the trees read of a node.
type domainNode struct {
	labels      labels.Set
	allocatable flavors.Resources
	usable      bool // Ready and schedulable
}

// Placement is what a workload holding quota holds of a topology: its
// pod sets' assignments in flavor's, and each pod set's requests per pod.
type Placement struct {
	Flavor string
	Sets   []TopologyAssignment
	PerPod []flavors.Resources
}

// NewFlavorDomains is an empty FlavorDomains, for no config yet.
func NewFlavorDomains() *FlavorDomains {
	return &FlavorDomains{nodes: map[string]*domainNode{}, held: map[any]Placement{}}
}

// Configure makes the trees for cfg from the nodes known, with the
// placements held reserved again.
func (f *FlavorDomains) Configure(cfg *Config) {
	f.cfg, f.Trees, f.queuesOf = cfg, nil, nil
	for name, fl := range cfg.Flavors {
		t := cfg.Topologies[fl.TopologyName]
		if fl.TopologyName == "" || t == nil {
			continue
		}
		if f.Trees == nil {
			f.Trees, f.queuesOf = map[string]*Domains{}, map[string][]string{}
		}
		f.Trees[name] = NewTopologyDomains(t)
	}
	for _, q := range cfg.QueueNames {
		for _, g := range cfg.ClusterQueues[q].ResourceGroups {
			for _, fq := range g.Flavors {
				if f.Trees[fq.Name] != nil && !slices.Contains(f.queuesOf[fq.Name], q) {
					f.queuesOf[fq.Name] = append(f.queuesOf[fq.Name], q)
				}
			}
		}
	}
	for name, n := range f.nodes {
		f.place(name, n)
	}
	for _, p := range f.held {
		f.reserve(p, +1)
	}
}

// SetNode notes node n as it is now, and returns the ClusterQueues whose
// flavors' trees it changed.
func (f *FlavorDomains) SetNode(n *corev1.Node) []string {
	dn := &domainNode{labels: n.Labels, allocatable: flavors.FromList(n.Status.Allocatable), usable: !n.Spec.Unschedulable && NodeReady(n)}
	if old := f.nodes[n.Name]; old != nil && old.usable == dn.usable && maps.Equal(old.labels, dn.labels) && maps.Equal(old.allocatable, dn.allocatable) {
		return nil
	}
	f.nodes[n.Name] = dn
	return f.place(n.Name, dn)
}

// RemoveNode forgets node name, and returns the ClusterQueues whose
// flavors' trees it changed.
func (f *FlavorDomains) RemoveNode(name string) []string {
	if f.nodes[name] == nil {
		return nil
	}
	delete(f.nodes, name)
	var out []string
	for fl, t := range f.Trees {
		t.RemoveNode(name)
		out = append(out, f.queuesOf[fl]...)
	}
	return out
}

// place puts node name in the tree of each flavor it belongs to, and
// takes it out of the others.
func (f *FlavorDomains) place(name string, n *domainNode) []string {
	var out []string
	for fl, t := range f.Trees {
		if n.usable && labels.SelectorFromSet(f.cfg.Flavors[fl].NodeLabels).Matches(n.labels) {
			values := make([]string, len(t.topology.Levels))
			for i, label := range t.topology.Levels {
				values[i] = n.labels[label]
			}
			t.SetNode(name, values, n.allocatable)
		} else {
			t.RemoveNode(name)
		}
		out = append(out, f.queuesOf[fl]...)
	}
	return out
}

// Hold reserves p for the workload of key (nil takes back what it held).
func (f *FlavorDomains) Hold(key any, p *Placement) {
	if old, ok := f.held[key]; ok {
		f.reserve(old, -1)
		delete(f.held, key)
	}
	if p != nil {
		f.held[key] = *p
		f.reserve(*p, +1)
	}
}

// Held is what the workload of key holds; false for nothing.
func (f *FlavorDomains) Held(key any) (Placement, bool) {
	p, ok := f.held[key]
	return p, ok
}

// reserve reserves (sign +1) or takes back (-1) p in its flavor's tree.
func (f *FlavorDomains) reserve(p Placement, sign int) {
	t := f.Trees[p.Flavor]
	if t == nil {
		return
	}
	for i, ta := range p.Sets {
		if i >= len(p.PerPod) {
			break
		}
		for _, dc := range ta.Domains {
			t.Reserve(dc.Values, p.PerPod[i], dc.Count, sign)
		}
	}
}

// NodeReady says whether n's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SameAssignments says whether a and b place the same pods in the same
// domains.
func SameAssignments(a, b []TopologyAssignment) bool {
	return slices.EqualFunc(a, b, func(x, y TopologyAssignment) bool {
		return slices.EqualFunc(x.Domains, y.Domains, func(p, q DomainCount) bool {
			return p.Count == q.Count && slices.Equal(p.Values, q.Values)
		})
	})
}
