package ledger

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// followPlacement holds e's placement in the topologies' trees while it is
// charged quota, and takes it back once it is not; a placement read from
// the workload's annotation (e.topologyAnn) stands for one not made by
// this ledger, after a restart. The trees (queues.FlavorDomains) keep
// the rest: nodes, and the reservations' sums.
func (l *Ledger) followPlacement(e *entry) {
	old, had := l.topo.Held(e)
	if e.Charged == nil || e.W == nil {
		if had {
			l.topo.Hold(e, nil)
		}
		e.placed = nil
		return
	}
	if e.placed == nil && e.topologyAnn != "" && l.cfg != nil {
		if fl, sets, err := queues.ParseTopologyAnnotation(l.cfg, e.W, e.topologyAnn); err == nil {
			e.placed = &placement{flavor: fl, sets: sets}
		}
	}
	if e.placed == nil {
		if had {
			l.topo.Hold(e, nil)
		}
		return
	}
	if had && old.Flavor == e.placed.flavor && queues.SameAssignments(old.Sets, e.placed.sets) {
		return
	}
	p := queues.Placement{Flavor: e.placed.flavor, Sets: e.placed.sets, PerPod: make([]flavors.Resources, len(e.W.PodSets))}
	for i, ps := range e.W.PodSets {
		p.PerPod[i] = ps.Requests
	}
	l.topo.Hold(e, &p)
}

// placement is where an entry's pod sets go in its flavor's topology.
type placement struct {
	flavor string
	sets   []queues.TopologyAssignment
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
	l.domainsChangedLocked(l.topo.SetNode(n))
}

// onNodeDelete takes a node out of the topologies' trees.
func (l *Ledger) onNodeDelete(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.domainsChangedLocked(l.topo.RemoveNode(n.Name))
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
