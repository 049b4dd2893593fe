package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/ledger/machine"
)

// step carries out one of the machine's steps on e (see machine's
// steps.go) and puts its result in force.
func (l *Ledger) step(e *entry, s machine.Step) {
	next := *e
	var effects []machine.Effect
	next.Entry, effects = s(e.Entry, l.takeEffects())
	l.apply(e, next, effects)
}

// takeEffects hands out the ledger's buffer for a step's effects; apply
// hands it back. An effect may step another entry (Freed steps the
// preemptor) while apply still reads the buffer: that step gets a new one.
func (l *Ledger) takeEffects() []machine.Effect {
	b := l.effects
	l.effects = nil
	return b[:0]
}

// apply puts a folded entry in force: e becomes next, and the effects are
// carried out in order (LeaveTree first). effects is l.effects, handed back empty
// for the next fold. It is the one place where the ledger acts on the
// state machine's decisions.
func (l *Ledger) apply(e *entry, next entry, effects []machine.Effect) {
	defer func() { clear(effects); l.effects = effects[:0] }()
	for _, f := range effects {
		if _, ok := f.(machine.LeaveTree); ok {
			l.removePendingLocked(e)
		}
	}
	was, now := e.Phase(), next.Phase()
	if now == machine.Pending && (was == machine.Admitted || was == machine.Evicting || was == machine.Unrecorded || was == machine.Capturing) {
		// Back in its queue after it ran: Kueue's requeue, from which
		// its next admission's wait counts.
		next.requeuedAt = l.opts.Clock.Now().UnixNano()
	}
	if changesPass(e, &next) {
		touchEntry(&l.passCache, e)
		touchEntry(&l.passCache, &next)
	}
	// Started and Shrunk are carried out once the books follow the entry.
	var judge machine.Effect
	*e = next
	for _, f := range effects {
		switch f := f.(type) {
		case machine.JoinTree:
			l.insertPendingLocked(e)
		case machine.Arrive:
			l.writer.wakeOnArrival()
		case machine.Pass:
			l.writer.wakePass()
		case machine.Reserve:
			l.addUsageLocked(f.Queue, f.Usage)
		case machine.Unreserve:
			l.subUsageLocked(f.Queue, f.Usage)
		case machine.Grew:
			l.addUsageLocked(f.Queue, f.Usage)
		case machine.Shrank:
			l.subUsageLocked(f.Queue, f.Usage)
		case machine.TryFirst:
			l.preempt.reserved[e] = true
		case machine.Charge:
			l.addUsageLocked(f.Queue, f.Usage)
		case machine.Release:
			l.subUsageLocked(f.Queue, f.Usage)
			if f.Finished {
				l.event(e.W, corev1.EventTypeNormal, ReasonQuotaReleased, "Finished; released %s", f.Usage.Describe())
			}
		case machine.Started, machine.Shrunk:
			judge = f
		case machine.Yield:
			l.subUsageLocked(f.Queue, f.Usage)
		case machine.Unyield:
			l.addUsageLocked(f.Queue, f.Usage)
		case machine.Relabel:
			l.relabelJobLocked(e)
		case machine.Freed:
			l.victimFreedLocked(e.W.UID)
		case machine.FoldAgain:
			uid, rv := e.W.UID, e.rv
			l.opts.Clock.AfterFunc(f.After, func() { l.foldAgain(uid, rv) })
		case machine.RecheckLater:
			uid, rv := e.W.UID, e.rv
			l.opts.Clock.AfterFunc(f.After, func() { l.recheckVictim(uid, rv) })
		}
	}
	l.holdLocked(e)
	l.notePendingLocked(e)
	l.noteLocalLocked(e)
	switch judge.(type) {
	case machine.Started:
		// The pods the gate held while it waited may run now.
		l.judgePodsLocked(e.W.UID)
		l.admittedNowLocked(e)
	case machine.Shrunk:
		l.judgePodsLocked(e.W.UID)
	}
}

// foldAgain folds workload uid's last view again, if nothing has changed
// since its version rv: the end of a backoff (machine.FoldAgain).
func (l *Ledger) foldAgain(uid types.UID, rv string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.jobs[uid]; e != nil && e.rv == rv {
		l.foldLocked(e, *e, e.seen)
	}
}

// changesPass says whether an entry going from e to next changes what a
// pass reads: its place in a tree, its phase (an admitted workload is a
// preemption candidate, an assumed one is not), its quota, its claim, or
// its queue and priority.
func changesPass(e, next *entry) bool {
	if e.Phase() != next.Phase() || e.InTree != next.InTree || e.ChargedQueue != next.ChargedQueue || (e.Claim == nil) != (next.Claim == nil) {
		return true
	}
	if e.W == next.W {
		return false
	}
	if e.W == nil || next.W == nil || next.InTree {
		return true
	}
	return e.W.Queue != next.W.Queue || e.W.Priority != next.W.Priority
}

// touchEntry notes in c a change of entry e, which may have been queued
// in, or hold quota in, a queue.
func touchEntry(c *passCache, e *entry) {
	if e.W != nil {
		c.touch(e.W.Queue)
	}
	c.touch(e.ChargedQueue)
}
