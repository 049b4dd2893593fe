package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// step carries out one of the machine's steps on e (see machine's
// steps.go) and puts its result in force.
func (l *Ledger) step(e *entry, s machine.Step) {
	next := *e
	var effects []machine.Effect
	next.Entry, effects = s(e.Entry, l.takeEffects())
	l.apply(e, next, effects)
}

// foldLocked folds view o into e (as next, with what changed besides the
// view already noted), keeps o for the folds of e's pod counts, and puts
// the result in force.
func (l *Ledger) foldLocked(e *entry, next entry, o machine.Observed) {
	var effects []machine.Effect
	next.Entry, effects = machine.React(next.Entry, o, l.opts.Clock.Now(), l.takeEffects())
	next.seen = o
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
// carried out (the books' first, LeaveTree on e as it was). effects is l.effects,
// handed back empty for the next fold. It is the one place where the
// ledger acts on the state machine's decisions: the books take theirs,
// the writer is woken, and what is left is carried out here.
func (l *Ledger) apply(e *entry, next entry, effects []machine.Effect) {
	defer func() { clear(effects); l.effects = effects[:0] }()
	l.books.carry(l.cfg, e, &next, effects)
	l.followPlacement(e)
	// Started and Shrunk are carried out once the books follow the entry.
	var judge machine.Effect
	for _, f := range effects {
		switch f := f.(type) {
		case machine.Arrive:
			l.writer.wakeOnArrival()
		case machine.Pass:
			l.writer.wakePass()
		case machine.Requeued:
			e.requeuedAt = l.opts.Clock.Now().UnixNano()
		case machine.TryFirst:
			l.preempt.reserved[e] = true
		case machine.Release:
			if f.Finished {
				l.event(e.W, corev1.EventTypeNormal, ReasonQuotaReleased, "Finished; released %s", f.Usage.Describe())
			}
		case machine.Started, machine.Shrunk:
			judge = f
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
	l.noteMetricsLocked(e)
	e.forgetEnded()
	if judge != nil {
		// The pods the gate held while it waited may run now (Started);
		// pods beyond a new, lower count may still run (Shrunk).
		l.judgePodsLocked(e.W.UID)
	}
	if _, started := judge.(machine.Started); started {
		l.admittedNowLocked(e)
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

// victimFreedLocked notes that a preemption victim's quota is free. When
// its preemptor waits for no other victim, the preemptor's claim is given
// back and it rejoins its queue, to be tried first in the next pass.
func (l *Ledger) victimFreedLocked(victim types.UID) {
	p := l.preempt.waitingOn[victim]
	if p == nil {
		return
	}
	delete(l.preempt.waitingOn, victim)
	l.step(p, machine.VictimGone(victim, l.jobs[p.W.UID] == p))
}

// recheckVictim frees an evicted Job held back by suspensionUnseen, if
// nothing has changed since its version rv.
func (l *Ledger) recheckVictim(uid types.UID, rv string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[uid]
	if e == nil || e.rv != rv {
		return
	}
	l.step(e, machine.Recheck(e.seen))
}

// followPlacement holds e's placement in the topologies' trees while it is
// charged quota, or, for a preemptor, while its claim waits for its
// victims (where it goes once they are gone), and takes it back once it
// is neither; a placement read from
// the workload's annotation (e.topologyAnn) stands for one not made by
// this ledger, after a restart. The trees (queues.FlavorDomains) keep
// the rest: nodes, and the reservations' sums.
func (l *Ledger) followPlacement(e *entry) {
	if e.W == nil || e.placed == nil && e.topologyAnn == "" && !l.topo.Holding() {
		return // nothing placed, here or anywhere: the common case, at no cost
	}
	owner := queues.Owner{Namespace: e.W.Namespace, UID: string(e.W.UID)}
	old, had := l.topo.Held(owner)
	if e.Charged == nil && (e.Claim == nil || e.placed == nil) {
		if had {
			l.topo.Hold(owner, nil)
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
			l.topo.Hold(owner, nil)
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
	l.topo.Hold(owner, &p)
}
