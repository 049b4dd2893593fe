package ledger

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// The writes that evict a workload: a preemption's victim (evict), and a
// workload a step has requeued (requeueWrite: its pods are larger than
// it was admitted with, not ready in time, or lost their node, or its
// stopped queue drains it). Each is
// one write, as the workload's kind evicts (writeEviction); once it lands
// the eviction is counted and told in an Event, and when it fails the
// step is rolled back.

// evict makes the one write that preempts a workload: it suspends it and
// sets its state back to pending. It is not guarded by a resourceVersion:
// a running workload's status changes all the time, and suspending it is
// right whatever changed. Its controller then deletes the pods; the quota
// is released when they are gone. Its node affinity can change only once
// it has stopped: the label worker restores it then (restorePatchLocked).
//
// A workload of a kind that cannot be suspended again (a Pod) is deleted
// instead; a controller that makes it again makes a new one, queued anew.
func (l *Ledger) evict(ctx context.Context, w write) {
	if err := l.writeEviction(ctx, w, nil); err != nil {
		l.mu.Lock()
		// It runs on: its quota counts in full again.
		l.step(w.e, machine.EvictionFailed(w.moved))
		l.mu.Unlock()
		l.log.Info("preemption write failed; the preemptor queues again", "job", w.w.Key(), "preemptor", w.preemptor.W.Key(), "err", err.Error())
		return
	}
	l.evicted(w)
}

// writeEviction makes the one write that evicts w's workload, as its kind
// evicts (kinds.Target.Evict), with annotations in the same write.
func (l *Ledger) writeEviction(ctx context.Context, w write, annotations map[string]any) error {
	ev, err := l.target(w).Evict(annotations)
	if err != nil {
		return err
	}
	if ev.Delete {
		return l.client.Delete(ctx, kinds.Ref(w.w), client.Preconditions{UID: &w.w.UID})
	}
	return l.client.Patch(ctx, kinds.Ref(w.w), client.RawPatch(types.MergePatchType, ev.Patch), client.FieldOwner(queues.FieldManagerPreemption))
}

// evicted records a preemption write that landed.
func (l *Ledger) evicted(w write) {
	l.observeEviction(w, metrics.EvictedPreempted)
	l.event(w.w, corev1.EventTypeWarning, ReasonPreempted, "%s", w.message)
}

// observeEviction counts w's eviction, for reason, once its write
// landed, and, for a preemption, the preemption.
func (l *Ledger) observeEviction(w write, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.metrics.ObserveEviction(l.cfg, &w.e.metrics, &w.e.Entry, w.w.Queue, reason, l.priorityClassOf(w.e.prio))
	if w.preemptor != nil && w.preemptor.W != nil {
		l.metrics.ObservePreemption(w.preemptor.W.Queue, w.cause)
	}
}

// requeueableLocked says whether admitted e may be requeued: its kind
// suspends it again. One that cannot be suspended again is not: its
// eviction would delete it.
func (l *Ledger) requeueableLocked(e *entry) bool {
	k := l.opts.Kinds.For(kinds.GVKOf(e.W))
	return k != nil && !kinds.EvictsByDeletion(k)
}

// requeueLocked requeues admitted e (requeueableLocked) at now: the
// Requeue step, then, in the background, the one write that evicts it
// (requeueWrite, with annotations, counted as evicted for reason, failed
// logged if it fails), and an Event that says message. It returns that
// write.
func (l *Ledger) requeueLocked(e *entry, now time.Time, message string, annotations map[string]any, reason, failed string) write {
	l.step(e, machine.Requeue(now))
	w := write{e: e, w: e.W, suspend: e.suspend, message: message}
	l.writer.goTracked(func(ctx context.Context) {
		l.requeueWrite(ctx, w, annotations, reason, failed)
	})
	return w
}

// requeueWrite makes the one write that evicts a workload a step has
// requeued, with annotations, and records it as evicted for reason, with
// an Event that says w.message. When the write fails, the requeue is
// rolled back (RequeueFailed) and failed is logged.
func (l *Ledger) requeueWrite(ctx context.Context, w write, annotations map[string]any, reason, failed string) {
	if err := l.writeEviction(ctx, w, annotations); err != nil {
		l.mu.Lock()
		l.step(w.e, machine.RequeueFailed)
		l.mu.Unlock()
		l.log.Info(failed, "job", w.w.Key(), "err", err.Error())
		return
	}
	l.requeued(w, reason)
}

// requeued records a requeue's eviction that landed.
func (l *Ledger) requeued(w write, reason string) {
	l.observeEviction(w, reason)
	l.event(w.w, corev1.EventTypeWarning, ReasonEvicted, "%s", w.message)
}

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
