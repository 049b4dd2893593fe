package queues

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// FlavorDomains keeps, for each flavor of a config that has a topology,
// the tree of its domains that admission places pod sets in
// (Snapshot.Domains). What a leaf has free is its nodes' allocatable
// and their devices of mapped DeviceClasses that no claim holds
// (topologydevices.go), less what the pods bound to them request
// (every pod, queued or not: DaemonSets, static pods, other
// schedulers' pods), less what the
// placements of the workloads holding quota give it and their pods do
// not take yet: a placement of n pods in a leaf where m of its
// workload's pods are bound reserves n-m pods more. So a placement is
// counted once, whether its pods are bound or not, and the pods, which
// are the truth, are never undercounted. Its invariants:
//
//   - Trees has a tree for exactly the flavors of the config with a
//     topology;
//   - each tree holds exactly the nodes told of that are Ready and
//     schedulable and whose labels match the flavor's node labels, each
//     with its allocatable and free devices less its pods' requests;
//   - each held placement's reserved is, per leaf, what it reserves
//     there now, and the trees have exactly that reserved;
//   - each tree of a flavor placed at the node level has a pool leaf for
//     exactly the NodePools known that make its nodes, with what they
//     can still make, and waiting is what the placements reserve there
//     (topologypools.go).
//
// A node's change costs a check per topology flavor and its levels; a
// pod's, its node's levels in each tree; a placement's, its domains; a
// ResourceSlice's, DeviceClass's or ResourceClaim's, what nodeDevices
// says, and its nodes' levels in each tree.
type FlavorDomains struct {
	// Trees maps each flavor with a topology to its tree.
	Trees map[string]*Domains
	cfg   *Config
	// queuesOf maps each flavor with a topology to the ClusterQueues
	// that list it: those a change of its tree may let admit.
	queuesOf map[string][]string
	nodes    map[string]*domainNode
	pods     map[string]boundPod
	// owned is, by workload, the keys of its pods in pods: what a
	// placement's pods bound per leaf are counted from.
	owned map[Owner]map[string]struct{}
	held  map[Owner]*held
	// devices is the nodes' devices of Dynamic Resource Allocation, per
	// mapped resource (topologydevices.go).
	devices *nodeDevices
	// pools are Karpenter's NodePools, by name, poolNodes the nodes
	// known of each, and waiting, by flavor and NodePool, what the
	// placements held reserve in its pool leaf for pods not bound yet
	// (topologypools.go).
	pools     map[string]*NodePool
	poolNodes map[string]map[string]struct{}
	waiting   map[string]map[string]flavors.Resources
}

// Owner names a workload whose pods and placement FlavorDomains matches:
// its namespace and UID (the pods' queues.LabelWorkload).
type Owner struct {
	Namespace, UID string
}

// domainNode is what the trees read of a node.
type domainNode struct {
	labels      labels.Set
	allocatable flavors.Resources
	used        flavors.Resources // what the pods bound to it request
	usable      bool              // Ready and schedulable
	// owned counts the pods of workloads (LabelWorkload) bound to it.
	owned int32
}

// boundPod is a pod bound to a node: its requests, and the workload its
// LabelWorkload names.
type boundPod struct {
	node     string
	requests flavors.Resources
	owner    Owner
}

// Placement is what a workload holding quota holds of a topology: its
// pod sets' assignments in flavor's, and each pod set's requests per pod.
type Placement struct {
	Flavor string
	Sets   []TopologyAssignment
	PerPod []flavors.Resources
}

// held is a placement held, what it reserves per leaf (by key) now, and
// its pods bound per leaf.
type held struct {
	owner    Owner
	p        Placement
	reserved map[string]flavors.Resources
	bound    map[string]int32
	// pooled maps the leaves (by key) of h's bound pods on nodes of a
	// NodePool that its placement has a pool leaf of to that NodePool.
	pooled map[string]string
}

// NewFlavorDomains is an empty FlavorDomains, for no config yet.
func NewFlavorDomains() *FlavorDomains {
	return &FlavorDomains{nodes: map[string]*domainNode{}, pods: map[string]boundPod{}, owned: map[Owner]map[string]struct{}{}, held: map[Owner]*held{},
		devices: newNodeDevices(), pools: map[string]*NodePool{}, poolNodes: map[string]map[string]struct{}{}}
}

// Configure makes the trees for cfg from the nodes and pods known, with
// the placements held reserved again.
func (f *FlavorDomains) Configure(cfg *Config) {
	f.cfg, f.Trees, f.queuesOf, f.waiting = cfg, nil, nil, nil
	f.devices.setMapped(cfg.DeviceClasses, changes{})
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
	for name, p := range f.pools {
		f.placePool(name, p)
	}
	for _, h := range f.held {
		h.reserved = nil
		f.rebind(h)
		f.reserveAll(h)
	}
}

// SetNode notes node n as it is now, and returns the ClusterQueues whose
// flavors' trees it changed.
func (f *FlavorDomains) SetNode(n *corev1.Node) []string {
	dn := &domainNode{labels: n.Labels, allocatable: flavors.FromList(n.Status.Allocatable), usable: !n.Spec.Unschedulable && NodeReady(n)}
	old := f.nodes[n.Name]
	if old != nil {
		if old.usable == dn.usable && maps.Equal(old.labels, dn.labels) && maps.Equal(old.allocatable, dn.allocatable) {
			return nil
		}
		dn.used, dn.owned = old.used, old.owned
	}
	f.nodes[n.Name] = dn
	out := append(f.place(n.Name, dn), f.indexPool(n.Name, old, dn)...)
	if old != nil && old.owned > 0 && (old.usable != dn.usable || !maps.Equal(old.labels, dn.labels)) {
		// Its workloads' pods are in another leaf now, or in none.
		f.rebindAll()
	}
	return out
}

// RemoveNode forgets node name, and returns the ClusterQueues whose
// flavors' trees it changed.
func (f *FlavorDomains) RemoveNode(name string) []string {
	n := f.nodes[name]
	if n == nil {
		return nil
	}
	delete(f.nodes, name)
	out := f.indexPool(name, n, nil)
	if len(n.used) > 0 || n.owned > 0 {
		// Pods bound to it stay known until they are gone, and what
		// they use with them: a node of the same name may come back.
		f.nodes[name] = &domainNode{used: n.used, owned: n.owned}
	}
	for fl, t := range f.Trees {
		t.RemoveNode(name)
		out = append(out, f.queuesOf[fl]...)
	}
	if n.owned > 0 {
		// Its workloads' pods are in no leaf now.
		f.rebindAll()
	}
	return out
}

// place puts node name in the tree of each flavor it belongs to, with
// what its pods leave of it, and takes it out of the others.
func (f *FlavorDomains) place(name string, n *domainNode) []string {
	var out []string
	for fl, t := range f.Trees {
		if values := f.leafOf(fl, n); values != nil {
			free := maps.Clone(n.allocatable)
			if free == nil {
				free = flavors.Resources{}
			}
			for r, a := range f.devices.free[name] {
				free[r] = free[r].Add(a)
			}
			for r, a := range n.used {
				free[r] = free[r].Sub(a)
			}
			f.holdForPool(fl, n, free)
			t.SetNode(name, values, free)
		} else {
			t.RemoveNode(name)
		}
		out = append(out, f.queuesOf[fl]...)
	}
	return out
}

// leafOf is the values of node n's leaf in flavor fl's tree; nil when it
// is not in the tree.
func (f *FlavorDomains) leafOf(fl string, n *domainNode) []string {
	t := f.Trees[fl]
	if t == nil || n == nil || !n.usable || !labels.SelectorFromSet(f.cfg.Flavors[fl].NodeLabels).Matches(n.labels) {
		return nil
	}
	values := make([]string, len(t.topology.Levels))
	for i, label := range t.topology.Levels {
		if values[i] = n.labels[label]; values[i] == "" {
			return nil
		}
	}
	return values
}

// BoundPod is what FlavorDomains.SetPod is told of pod p: its key
// (namespace/name), its node ("" once it has ended), what it requests
// and the workload its LabelWorkload names (zero for none).
func BoundPod(p *corev1.Pod) (key, node string, requests flavors.Resources, owner Owner) {
	key, node = p.Namespace+"/"+p.Name, p.Spec.NodeName
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return key, "", nil, Owner{}
	}
	if w := p.Labels[LabelWorkload]; w != "" {
		owner = Owner{Namespace: p.Namespace, UID: w}
	}
	return key, node, PodRequests(&p.Spec), owner
}

// SetPod notes pod key (namespace/name) bound to node with requests, of
// the workload owner names (zero for none), or, with node "", that it
// is unbound, ended or gone; and returns the ClusterQueues whose flavors'
// trees it changed.
func (f *FlavorDomains) SetPod(key, node string, requests flavors.Resources, owner Owner) []string {
	old, had := f.pods[key]
	if had && old.node == node && old.owner == owner && maps.Equal(old.requests, requests) {
		return nil
	}
	var out []string
	if had {
		delete(f.pods, key)
		if set := f.owned[old.owner]; set != nil {
			if delete(set, key); len(set) == 0 {
				delete(f.owned, old.owner)
			}
		}
		out = append(out, f.use(old, -1)...)
	}
	if node != "" {
		p := boundPod{node: node, requests: requests, owner: owner}
		f.pods[key] = p
		if owner != (Owner{}) {
			if f.owned[owner] == nil {
				f.owned[owner] = map[string]struct{}{}
			}
			f.owned[owner][key] = struct{}{}
		}
		out = append(out, f.use(p, +1)...)
	}
	return out
}

// use adds (sign +1) or takes back (-1) what pod p uses of its node, and
// counts it bound (or not) for its workload's placement.
func (f *FlavorDomains) use(p boundPod, sign int) []string {
	n := f.nodes[p.node]
	if n == nil {
		n = &domainNode{}
		f.nodes[p.node] = n
	}
	if n.used == nil {
		n.used = flavors.Resources{}
	}
	if p.owner != (Owner{}) {
		n.owned += int32(sign)
	}
	for r, a := range p.requests {
		if sign > 0 {
			n.used[r] = n.used[r].Add(a)
		} else if n.used[r] = n.used[r].Sub(a); n.used[r] == 0 {
			delete(n.used, r)
		}
	}
	if len(n.used) == 0 && n.owned == 0 && n.labels == nil {
		delete(f.nodes, p.node) // a node not seen, and no pod left on it
	}
	if h := f.held[p.owner]; h != nil && p.owner != (Owner{}) {
		if values := f.leafOf(h.p.Flavor, n); values != nil {
			key := strings.Join(values, "\x00")
			h.bound[key] += int32(sign)
			f.reserveLeaf(h, key, values)
			was, pool := h.pooled[key], poolOfLeaf(h, n)
			if pool != "" {
				h.pooled[key] = pool
			} else {
				delete(h.pooled, key)
			}
			for _, p := range []string{was, pool} {
				if values := poolLeafOf(h, p); values != nil {
					f.reserveLeaf(h, strings.Join(values, "\x00"), values)
				}
			}
		}
	}
	if n.labels == nil {
		return nil
	}
	return f.place(p.node, n)
}

// Hold reserves p for workload owner (nil takes back what it held).
func (f *FlavorDomains) Hold(owner Owner, p *Placement) {
	if h := f.held[owner]; h != nil {
		f.unreserveAll(h)
		delete(f.held, owner)
	}
	if p == nil {
		return
	}
	h := &held{owner: owner, p: *p}
	f.held[owner] = h
	f.rebind(h)
	f.reserveAll(h)
}

// Holding says whether any workload holds a placement.
func (f *FlavorDomains) Holding() bool { return len(f.held) > 0 }

// Held is what workload owner holds; false for nothing.
func (f *FlavorDomains) Held(owner Owner) (Placement, bool) {
	h := f.held[owner]
	if h == nil {
		return Placement{}, false
	}
	return h.p, true
}

// rebind counts h's pods bound per leaf again.
func (f *FlavorDomains) rebind(h *held) {
	h.bound, h.pooled = map[string]int32{}, map[string]string{}
	for key := range f.owned[h.owner] {
		p := f.pods[key]
		n := f.nodes[p.node]
		if values := f.leafOf(h.p.Flavor, n); values != nil {
			leaf := strings.Join(values, "\x00")
			h.bound[leaf]++
			if pool := poolOfLeaf(h, n); pool != "" {
				h.pooled[leaf] = pool
			}
		}
	}
}

// rebindAll counts every placement's pods again, after a node changed
// its leaf.
func (f *FlavorDomains) rebindAll() {
	for _, h := range f.held {
		f.unreserveAll(h)
		f.rebind(h)
		f.reserveAll(h)
	}
}

// reserveAll reserves what h's leaves want.
func (f *FlavorDomains) reserveAll(h *held) {
	for _, ta := range h.p.Sets {
		for _, dc := range ta.Domains {
			f.reserveLeaf(h, strings.Join(dc.Values, "\x00"), dc.Values)
		}
	}
}

// unreserveAll takes back all h reserves.
func (f *FlavorDomains) unreserveAll(h *held) {
	t := f.Trees[h.p.Flavor]
	for key, r := range h.reserved {
		if t != nil {
			t.Reserve(strings.Split(key, "\x00"), r, -1)
			f.setWaiting(h.p.Flavor, key, r, nil)
		}
	}
	h.reserved = nil
}

// reserveLeaf makes what h reserves in leaf key (of values) what it
// wants now: the pods its pod sets are given there, in order, that its
// bound pods do not take yet.
func (f *FlavorDomains) reserveLeaf(h *held, key string, values []string) {
	t := f.Trees[h.p.Flavor]
	if t == nil {
		return
	}
	want := flavors.Resources{}
	bound := h.bound[key]
	if pool := poolOfKey(key); pool != "" {
		bound = poolBound(h, pool)
	}
	for i, ta := range h.p.Sets {
		if i >= len(h.p.PerPod) {
			break
		}
		for _, dc := range ta.Domains {
			if strings.Join(dc.Values, "\x00") != key {
				continue
			}
			n := dc.Count
			took := min(n, max(bound, 0))
			bound -= took
			for r, a := range PodsOf(h.p.PerPod[i], n-took) {
				want[r] = want[r].Add(a)
			}
		}
	}
	for r, a := range want {
		if a == 0 {
			delete(want, r)
		}
	}
	old := h.reserved[key]
	if maps.Equal(old, want) {
		return
	}
	if old != nil {
		t.Reserve(values, old, -1)
	}
	if h.reserved == nil {
		h.reserved = map[string]flavors.Resources{}
	}
	delete(h.reserved, key)
	if len(want) > 0 {
		h.reserved[key] = want
		t.Reserve(values, want, +1)
	}
	f.setWaiting(h.p.Flavor, key, old, want)
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

// Usable says whether node name is known, Ready and schedulable.
func (f *FlavorDomains) Usable(name string) bool {
	n := f.nodes[name]
	return n != nil && n.usable
}

// Loss is what a node's loss takes from a workload holding a placement:
// how many pods of perPod it had there (bound to it, or given its leaf
// when the leaf is the node alone), and the labels of the domain its pod
// set is pinned to (TopologyAssignment.Pinned), where their controller
// makes them again.
type Loss struct {
	Owner  Owner
	Flavor string
	// Set is the pod set's index, and Leaf the values of the leaf it lost
	// the pods in.
	Set    int
	Leaf   []string
	Pods   int32
	PerPod flavors.Resources
	Pinned []string // the pinned domain's values, from the top
}

// Losses is what losing node name takes from the placements held: call it
// before RemoveNode, or before a SetNode that makes it unusable.
func (f *FlavorDomains) Losses(name string) []Loss {
	n := f.nodes[name]
	if n == nil {
		return nil
	}
	bound := map[Owner]int32{}
	for _, p := range f.pods {
		if p.node == name && p.owner != (Owner{}) {
			bound[p.owner]++
		}
	}
	var out []Loss
	for owner, h := range f.held {
		values := f.leafOf(h.p.Flavor, n)
		if values == nil {
			continue
		}
		t := f.Trees[h.p.Flavor]
		nodeLeaf := t.topology.Levels[len(t.topology.Levels)-1] == corev1.LabelHostname
		for i, ta := range h.p.Sets {
			if i >= len(h.p.PerPod) {
				break
			}
			var lost int32
			for _, dc := range ta.Domains {
				if slices.Equal(dc.Values, values) {
					if nodeLeaf {
						lost = dc.Count
					} else {
						lost = min(dc.Count, bound[owner])
					}
				}
			}
			if lost == 0 {
				continue
			}
			pinned := ta.Pinned()
			var prefix []string
			for _, label := range t.topology.Levels {
				v, ok := pinned[label]
				if !ok {
					break
				}
				prefix = append(prefix, v)
			}
			out = append(out, Loss{Owner: owner, Flavor: h.p.Flavor, Set: i, Leaf: values, Pods: lost, PerPod: h.p.PerPod[i], Pinned: prefix})
		}
	}
	return out
}

// Replaceable says whether l's pods can be made again in the leaf they
// were placed in, on what its nodes have free now: their controller
// makes them again, the template's pin or the pod gate sends them
// there, and the workload need not move. A leaf that is the lost node
// alone cannot.
func (f *FlavorDomains) Replaceable(l Loss) bool {
	t := f.Trees[l.Flavor]
	if t == nil {
		return false
	}
	// What the workload reserves there for the lost pods is theirs.
	var back Taken
	key := strings.Join(l.Leaf, "\x00")
	if h, leaf := f.held[l.Owner], t.index[key]; h != nil && leaf != nil && h.reserved[key] != nil {
		back = Taken{leaf: flavors.Resources{}}
		for r, a := range h.reserved[key] {
			back[leaf][r] = -a
		}
	}
	return t.holdsOn(back, l.Leaf, l.PerPod) >= l.Pods
}

// Swap is l's workload's placement with the pods of l's pod set that
// were placed on the lost node given to one other node of the same
// parent domain (its rack, say) that holds them all, the tightest: the
// node's hot swap. The pod gate gives each pod of a pod set placed on
// nodes its node as it releases it (TopologyAssignment.Gated), so the
// pods their controller makes again go there. False when no node holds
// them, or the topology's leaves are not nodes.
func (f *FlavorDomains) Swap(l Loss) (Placement, bool) {
	h, t := f.held[l.Owner], f.Trees[l.Flavor]
	if h == nil || t == nil || h.p.Flavor != l.Flavor || l.Set >= len(h.p.Sets) || l.Set >= len(h.p.PerPod) {
		return Placement{}, false
	}
	levels := t.topology.Levels
	ta := h.p.Sets[l.Set]
	lost := slices.IndexFunc(ta.Domains, func(dc DomainCount) bool { return slices.Equal(dc.Values, l.Leaf) })
	if levels[len(levels)-1] != corev1.LabelHostname || lost < 0 || ta.Domains[lost].Count != l.Pods {
		return Placement{}, false
	}
	to, ok := t.replacement(l.Leaf, h.p.PerPod[l.Set], l.Pods)
	if !ok {
		return Placement{}, false
	}
	moved := TopologyAssignment{Levels: ta.Levels}
	count := l.Pods
	for _, dc := range ta.Domains {
		switch {
		case slices.Equal(dc.Values, to):
			count += dc.Count
		case !slices.Equal(dc.Values, l.Leaf):
			moved.Domains = append(moved.Domains, dc)
		}
	}
	moved.Domains = append(moved.Domains, DomainCount{Values: to, Count: count})
	slices.SortFunc(moved.Domains, func(a, b DomainCount) int { return slices.Compare(a.Values, b.Values) })
	out := Placement{Flavor: h.p.Flavor, Sets: slices.Clone(h.p.Sets), PerPod: h.p.PerPod}
	out.Sets[l.Set] = moved
	return out, true
}
