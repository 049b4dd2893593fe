package ledger

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/queues"
)

// placement is where an entry's pod sets go in its flavor's topology.
type placement struct {
	flavor string
	sets   []queues.TopologyAssignment
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
