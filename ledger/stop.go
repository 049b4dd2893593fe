package ledger

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Kueue's stopPolicy HoldAndDrain, on a ClusterQueue or a LocalQueue: the
// pass admits nothing its queue holds (queues.Config.StopOf), and each of
// its admitted workloads is evicted as a pass decides it
// (queues.Config.Drain): one write, the eviction its kind makes (as a
// preemption's victim), then machine.Requeue's way back to pending once
// its pods are gone, held there until the policy is None again. A pass
// looks for them only while some queue of the config drains.

// drainLocked decides the evictions of the admitted workloads that a
// HoldAndDrain policy stops, in a stable order.
func (l *Ledger) drainLocked() []write {
	if !l.cfg.Drains() {
		return nil
	}
	var admitted []*queues.Workload
	for _, set := range l.books.holding {
		for e := range set {
			if e.W != nil && e.Phase() == machine.Admitted {
				admitted = append(admitted, e.W)
			}
		}
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].Key() < admitted[j].Key() })
	drained, why := l.cfg.Drain(admitted)
	now := l.opts.Clock.Now()
	out := make([]write, 0, len(drained))
	for i, w := range drained {
		e := w.Tag.(*entry)
		l.step(e, machine.Requeue(now))
		out = append(out, write{e: e, w: e.W, suspend: e.suspend, stop: why[i], message: why[i].EvictionMessage()})
	}
	return out
}

// drain makes the one write that evicts a workload its stopped queue
// drains.
func (l *Ledger) drain(ctx context.Context, w write) {
	if err := l.writeEviction(ctx, w, nil); err != nil {
		l.mu.Lock()
		l.step(w.e, machine.RequeueFailed)
		l.mu.Unlock()
		l.log.Info("eviction for a stopped queue failed; the next pass tries again", "job", w.w.Key(), "err", err.Error())
		return
	}
	l.drained(w)
}

// drained records an eviction for a stopped queue that landed.
func (l *Ledger) drained(w write) {
	l.observeEviction(w, w.stop.Reason)
	l.event(w.w, corev1.EventTypeWarning, ReasonEvicted, "%s", w.message)
}
