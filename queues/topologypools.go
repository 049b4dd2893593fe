package queues

import (
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// A flavor placed at the node level (its topology's lowest level is the
// hostname, as with AnnotationNodeFit) counts as room the nodes a
// Karpenter NodePool can still make for it: one pool leaf per NodePool
// that makes the flavor's nodes (flavors.Makes), with what the
// NodePool's spec.limits leave over what it has made (room; a resource
// it does not limit is Unlimited). Karpenter makes each node its own
// hostname. A level above the node (a zone, a rack) gains the leaf only
// in the one domain the NodePool's template gives all its nodes
// (flavors.NodeTemplate.Value): a zonal NodePool's room is its zone's.
// A NodePool that may put nodes in several domains of a level, or says
// nothing of it (a rack, a block: the data centre labels those), gains
// no leaf: its room would count in each, and it has it once.
//
// A pool leaf stands for any number of nodes not made yet. So placement
// gives it only pods that need no node shared with others (not a
// required node for several pods, not slices of a node, not a group on
// one node), and fills the nodes there are before it (sorted, bestBy).
// The pod gate gives its pods the NodePool's label,
// karpenter.sh/nodepool, in their nodeSelector beside the labels of the
// levels above (TopologyAssignment.NextLeaf), and Karpenter makes nodes
// for them. Once one binds to a node of the NodePool, that node counts
// what it requests, and the pool leaf no longer reserves it (poolBound).
//
// Karpenter makes a node for such a pod, and the node is Ready a moment
// before the scheduler binds the pod to it: another workload placed on
// it then would find it taken. So while placements wait in a
// NodePool's leaf, each node of the NodePool that no workload's pod is
// bound to yet has free only what they do not take of it
// (holdForPool): a new node is theirs until they are bound.

// LabelNodePool is the label Karpenter gives each node it makes: the
// name of its NodePool.
const LabelNodePool = "karpenter.sh/nodepool"

// poolPrefix starts a pool leaf's value: no label value has it, so no
// node's hostname is one.
const poolPrefix = "@"

// PoolLeaf is the leaf value of the room NodePool name can still make.
func PoolLeaf(name string) string { return poolPrefix + name }

// IsPoolLeaf says whether value is a PoolLeaf.
func IsPoolLeaf(value string) bool { return strings.HasPrefix(value, poolPrefix) }

// poolOfKey is the NodePool whose leaf key ("\x00"-joined values) is;
// "" when it is a node's.
func poolOfKey(key string) string {
	last := key[strings.LastIndexByte(key, 0)+1:]
	if !IsPoolLeaf(last) {
		return ""
	}
	return strings.TrimPrefix(last, poolPrefix)
}

// NodePool is what FlavorDomains reads of a Karpenter NodePool: what it
// puts on its nodes, its spec.limits (nil: none) and its
// status.resources, what the nodes it has made have.
type NodePool struct {
	Template     flavors.NodeTemplate
	Limits, Made flavors.Resources
}

// room is what p can still make: per resource it limits, the limit less
// what it has made, the more of its status.resources and nodes, the
// allocatable of its nodes known; Unlimited for each other resource of
// names.
func (p *NodePool) room(names map[corev1.ResourceName]bool, nodes flavors.Resources) flavors.Resources {
	out := flavors.Resources{}
	for r := range names {
		out[r] = flavors.Unlimited
	}
	for r, a := range p.Limits {
		out[r] = max(a.Sub(max(p.Made[r], nodes[r])), 0)
	}
	return out
}

// poolMade is what the nodes known of NodePool name have allocatable:
// Karpenter updates its status.resources some time after it makes a
// node, and a pod bound there meanwhile no longer holds the pool's room.
func (f *FlavorDomains) poolMade(name string) flavors.Resources {
	out := flavors.Resources{}
	for node := range f.poolNodes[name] {
		if n := f.nodes[node]; n != nil {
			for r, a := range n.allocatable {
				out[r] = out[r].Add(a)
			}
		}
	}
	return out
}

// leafLabel is the node label and value that a leaf's value at level
// label selects: a pool leaf's nodes by their NodePool.
func leafLabel(label, value string) (string, string) {
	if label == corev1.LabelHostname && IsPoolLeaf(value) {
		return LabelNodePool, strings.TrimPrefix(value, poolPrefix)
	}
	return label, value
}

// SetNodePool notes NodePool p as it is now, and returns the
// ClusterQueues whose flavors' trees it changed.
func (f *FlavorDomains) SetNodePool(p NodePool) []string {
	if old := f.pools[p.Template.Name]; old != nil && equalPools(old, &p) {
		return nil
	}
	f.pools[p.Template.Name] = &p
	return f.placePool(p.Template.Name, &p)
}

// RemoveNodePool forgets NodePool name, and returns the ClusterQueues
// whose flavors' trees it changed.
func (f *FlavorDomains) RemoveNodePool(name string) []string {
	if f.pools[name] == nil {
		return nil
	}
	delete(f.pools, name)
	return f.placePool(name, nil)
}

func equalPools(a, b *NodePool) bool {
	return maps.Equal(a.Limits, b.Limits) && maps.Equal(a.Made, b.Made) && maps.Equal(a.Template.Labels, b.Template.Labels) &&
		reflect.DeepEqual(a.Template.Requirements, b.Template.Requirements) && reflect.DeepEqual(a.Template.Taints, b.Template.Taints)
}

// placePool puts NodePool name's leaf (p; nil for none) in the tree of
// each flavor placed at the node level whose nodes it makes, and takes
// it out of the others.
func (f *FlavorDomains) placePool(name string, p *NodePool) []string {
	var out []string
	leaf := PoolLeaf(name)
	for fl, t := range f.Trees {
		had := t.nodes[leaf] != nil
		if values := poolValues(f.cfg.Flavors[fl], t.topology, name, p); values != nil {
			t.SetNode(leaf, values, p.room(f.resourceNames(), f.poolMade(name)))
		} else if had {
			t.RemoveNode(leaf)
		} else {
			continue
		}
		out = append(out, f.queuesOf[fl]...)
	}
	return out
}

// poolValues is the leaf values of NodePool name (p; nil for none) in
// flavor fl's topology t: the value its template gives each level above
// the node, then its pool leaf. Nil when t's lowest level is not the
// hostname, p does not make fl's nodes, or its nodes may differ at a
// level above.
func poolValues(fl *flavors.Flavor, t *Topology, name string, p *NodePool) []string {
	levels := len(t.Levels)
	if p == nil || fl == nil || levels == 0 || t.Levels[levels-1] != corev1.LabelHostname || fl.MadeBy(p.Template) != flavors.Makes {
		return nil
	}
	values := make([]string, levels)
	for i, label := range t.Levels[:levels-1] {
		v, ok := p.Template.Value(label)
		if !ok {
			return nil
		}
		values[i] = v
	}
	values[levels-1] = PoolLeaf(name)
	return values
}

// resourceNames are the resources a pool leaf has room of: those the
// config's ClusterQueues cover, and pods, CPU, memory and ephemeral
// storage.
func (f *FlavorDomains) resourceNames() map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{corev1.ResourcePods: true, corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true}
	for r := range f.cfg.index().covered {
		out[r] = true
	}
	return out
}

// poolOfLeaf is the NodePool whose leaf a placement of h counts the pods
// bound to node n toward: n's NodePool, if h's placement has a leaf of
// it; "" for none.
func poolOfLeaf(h *held, n *domainNode) string {
	pool := n.labels[LabelNodePool]
	if poolLeafOf(h, pool) == nil {
		return ""
	}
	return pool
}

// poolLeafOf is the values of NodePool pool's leaf in h's placement; nil
// for none.
func poolLeafOf(h *held, pool string) []string {
	if pool == "" {
		return nil
	}
	leaf := PoolLeaf(pool)
	for _, ta := range h.p.Sets {
		for _, dc := range ta.Domains {
			if dc.Values[len(dc.Values)-1] == leaf {
				return dc.Values
			}
		}
	}
	return nil
}

// poolBound is how many of h's pods bound to nodes of NodePool pool its
// pool leaf counts: those beyond what the placement gives the node's
// own leaf.
func poolBound(h *held, pool string) int32 {
	var n int32
	for key, in := range h.pooled {
		if in != pool {
			continue
		}
		var given int32
		for _, ta := range h.p.Sets {
			for _, dc := range ta.Domains {
				if strings.Join(dc.Values, "\x00") == key {
					given += dc.Count
				}
			}
		}
		n += max(h.bound[key]-given, 0)
	}
	return n
}

// indexPool notes node name's NodePool, as its old and new labels say
// (nil: none), and returns the ClusterQueues whose trees the room of
// either NodePool changed in.
func (f *FlavorDomains) indexPool(name string, old, n *domainNode) []string {
	var was, is string
	if old != nil {
		was = old.labels[LabelNodePool]
	}
	if n != nil {
		is = n.labels[LabelNodePool]
	}
	if was == is {
		if is != "" && f.pools[is] != nil && (old == nil || !maps.Equal(old.allocatable, n.allocatable)) {
			return f.placePool(is, f.pools[is])
		}
		return nil
	}
	if set := f.poolNodes[was]; was != "" && set != nil {
		if delete(set, name); len(set) == 0 {
			delete(f.poolNodes, was)
		}
	}
	if is != "" {
		if f.poolNodes[is] == nil {
			f.poolNodes[is] = map[string]struct{}{}
		}
		f.poolNodes[is][name] = struct{}{}
	}
	var out []string
	for _, p := range []string{was, is} {
		if p != "" && f.pools[p] != nil {
			out = append(out, f.placePool(p, f.pools[p])...)
		}
	}
	return out
}

// holdForPool takes from free, node n's room in flavor fl's tree, what
// the placements waiting in its NodePool's leaf reserve, if no workload's
// pod is bound to it yet.
func (f *FlavorDomains) holdForPool(fl string, n *domainNode, free flavors.Resources) {
	pool := n.labels[LabelNodePool]
	if pool == "" || n.owned > 0 {
		return
	}
	for r, a := range f.waiting[fl][pool] {
		if have := free[r]; have > 0 && !have.IsUnlimited() {
			free[r] = have.Sub(min(have, a))
		}
	}
}

// setWaiting changes what flavor fl's placements reserve in leaf key,
// from old to want, where key is a pool leaf, and places again the
// NodePool's nodes that no workload's pod is bound to.
func (f *FlavorDomains) setWaiting(fl, key string, old, want flavors.Resources) {
	pool := poolOfKey(key)
	if pool == "" || maps.Equal(old, want) {
		return
	}
	if f.waiting == nil {
		f.waiting = map[string]map[string]flavors.Resources{}
	}
	if f.waiting[fl] == nil {
		f.waiting[fl] = map[string]flavors.Resources{}
	}
	w := f.waiting[fl][pool]
	if w == nil {
		w = flavors.Resources{}
	}
	for r, a := range old {
		if w[r] = w[r].Sub(a); w[r] == 0 {
			delete(w, r)
		}
	}
	for r, a := range want {
		w[r] = w[r].Add(a)
	}
	if len(w) == 0 {
		delete(f.waiting[fl], pool)
	} else {
		f.waiting[fl][pool] = w
	}
	for name := range f.poolNodes[pool] {
		if n := f.nodes[name]; n != nil && n.owned == 0 {
			f.place(name, n)
		}
	}
}
