package ledger

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// phase is where a workload is in the ledger's state machine (see the
// package documentation for the transitions).
type phase uint8

const (
	// unrecorded: it runs without tally's admission record; the next pass
	// captures it (late.go). With captured set, the capture write landed
	// and the informer has yet to show it.
	unrecorded phase = iota
	// capturing: a pass decided its capture; the write is in flight.
	capturing
	// pending: suspended and waiting, in its queue's pending tree (inTree)
	// unless it waits out of it: for the newer version after a conflict,
	// or, with a claim, for its victims.
	pending
	// assumed: a pass chose it; its quota is charged and its admission
	// write is in flight.
	assumed
	// admitted: the informer shows it un-suspended; it is charged from its
	// tally.dev/flavors annotation.
	admitted
	// evicting: suspended (preempted, or by its owner) while its pods may
	// still run; it keeps its quota until they are gone.
	evicting
	// inadmissible: it cannot fit under the config in force; out of its
	// queue until the config, or its shape, changes.
	inadmissible
	// finished: complete or failed; it holds nothing.
	finished
)

var phaseNames = [...]string{"unrecorded", "capturing", "pending", "assumed", "admitted", "evicting", "inadmissible", "finished"}

func (p phase) String() string { return phaseNames[p] }

// label is the tally.dev/state label a workload in phase p carries once
// the ledger's writes are done; "" for one tally has not recorded.
func (p phase) label() queues.State {
	switch p {
	case pending, assumed:
		return queues.StatePending
	case admitted, evicting:
		return queues.StateAdmitted
	case inadmissible:
		return queues.StateInadmissible
	case finished:
		return queues.StateFinished
	}
	return ""
}

// writing says whether a write tally decided for the workload (an
// admission or a capture) is in flight: its outcome decides what comes
// next.
func (p phase) writing() bool { return p == assumed || p == capturing }

// claim is what a preemptor waits for: its victims, and the quota it
// preempts for, counted in its queue until they are gone.
type claim struct {
	victims map[types.UID]bool
	usage   queues.Usage
}

// observed is what the ledger reads from one informer view of a recorded
// workload, with what the config in force derives from it.
type observed struct {
	w                   *queues.Workload
	finished, suspended bool
	// running: its status says its pods may still run (some are active,
	// or it started and its controller has not marked it stopped).
	running bool
	// pods is how many of the pods its admission labelled have not
	// terminated (pods.go): they outlive what its status says.
	pods int
	// stoppedSince is when its controller marked it stopped, if it did.
	stoppedSince time.Time
	// admittedAt is its tally.dev/admitted-at annotation, if it has one.
	admittedAt time.Time
	// usage is what it holds, from its tally.dev/flavors annotation, when
	// it runs un-suspended or was admitted before.
	usage queues.Usage
	// restore: it was admitted before, has stopped, and some pod template
	// still has another node affinity than its candidate flavors'.
	restore bool
}

// holds says whether the view shows pods that may still hold resources.
func (o observed) holds() bool { return o.running || o.pods > 0 }

// observe reads o, whose Workload is w and of whose pods n are live,
// under cfg (which may be nil). restore is left to the caller, which
// knows the candidate flavors.
func observe(cfg *queues.Config, o *kinds.Object, w *queues.Workload, n int) observed {
	v := observed{
		w: w, finished: o.Finished, suspended: o.Suspended,
		running:      o.Active > 0 || (o.Started && o.StoppedSince.IsZero()),
		pods:         n,
		stoppedSince: o.StoppedSince,
	}
	if t, err := time.Parse(time.RFC3339, o.Meta.Annotations[queues.AnnotationAdmittedAt]); err == nil {
		v.admittedAt = t
	}
	if ann := o.Meta.Annotations[queues.AnnotationFlavors]; ann != "" || (!o.Finished && !o.Suspended) {
		v.usage = UsageOf(cfg, w, ann)
	}
	return v
}

// effect is one thing the ledger does beyond the entry when an entry
// changes. The set is closed: the types below, carried out by
// Ledger.apply.
type effect interface {
	fmt.Stringer
	effect()
}

type (
	// leaveTree takes the workload out of its queue's pending tree. It is
	// carried out first, on the entry as it was: the tree is ordered by
	// the version the workload joined it with.
	leaveTree struct{}
	// joinTree puts the workload into its queue's pending tree.
	joinTree struct{}
	// arrive asks for a pass for a workload that starts waiting.
	arrive struct{}
	// charge adds usage to a queue's.
	charge struct {
		queue string
		usage queues.Usage
	}
	// release takes usage off a queue's; finished (the workload completed)
	// records a QuotaReleased Event.
	release struct {
		queue    string
		usage    queues.Usage
		finished bool
	}
	// relabel wakes the label worker for the workload: its state label,
	// or its affinity (restore), is due for a write.
	relabel struct{}
	// freed tells the workload's preemptor, if it has one, that its quota
	// is free.
	freed struct{}
	// recheck looks at an evicted workload again after a while, unless it
	// has changed since (Ledger.recheckVictim).
	recheck struct{ after time.Duration }
)

func (leaveTree) effect() {}
func (joinTree) effect()  {}
func (arrive) effect()    {}
func (charge) effect()    {}
func (release) effect()   {}
func (relabel) effect()   {}
func (freed) effect()     {}
func (recheck) effect()   {}

func (leaveTree) String() string { return "leave-tree" }
func (joinTree) String() string  { return "join-tree" }
func (arrive) String() string    { return "arrive" }
func (c charge) String() string  { return fmt.Sprintf("charge %s %s", c.queue, usageString(c.usage)) }
func (r release) String() string {
	s := fmt.Sprintf("release %s %s", r.queue, usageString(r.usage))
	if r.finished {
		s += " finished"
	}
	return s
}
func (relabel) String() string { return "relabel" }

func usageString(u queues.Usage) string {
	if len(u) == 0 {
		return "nothing"
	}
	return describeUsage(u)
}
func (freed) String() string     { return "freed" }
func (r recheck) String() string { return "recheck after " + r.after.String() }

// react folds one informer view of a recorded workload into its entry: it
// returns the new entry and what the ledger is to do about the change,
// appended to fx. now is the time of the view. It changes nothing else.
func react(e entry, o observed, now time.Time, fx []effect) (entry, []effect) {
	if !o.admittedAt.IsZero() {
		e.admittedAt = o.admittedAt
	}
	switch {
	case o.finished:
		fx = e.leave(fx)
		e.w = o.w
		e.phase = finished
		if o.pods > 0 {
			// Its pods outlive its status (a PyTorchJob succeeds with its
			// master while workers run): it holds its quota, charged
			// again if it was admitted before a restart, until they are
			// gone.
			if e.charged == nil {
				fx = e.charge(fx, o.w.Queue, o.usage)
			}
		} else {
			fx = e.release(fx, true)
			// A victim may finish before its preemption takes effect:
			// its preemptor waits no more.
			fx = append(fx, freed{})
		}
		if e.labelState != string(queues.StateFinished) {
			fx = append(fx, relabel{})
		}
	case !o.suspended && e.phase == evicting:
		// A view from before the preemption write: it changes nothing.
		e.w = o.w
	case !o.suspended:
		fx = e.leave(fx)
		e.w = o.w
		e.phase = admitted
		if e.charged == nil || !sameUsage(o.usage, e.charged) || e.chargedQueue != o.w.Queue {
			fx = e.release(fx, false)
			fx = e.charge(fx, o.w.Queue, o.usage)
		}
	case e.phase.writing():
		// Our write is in flight; its outcome decides.
		e.w = o.w
	case e.claim != nil:
		// A preemptor waits out of its queue for its victims.
		e.w = o.w
	default:
		// Known now, written once the quota is free (the label worker
		// is woken then).
		e.restore = o.restore
		if e.charged == nil && o.usage != nil && o.holds() {
			// Admitted before, suspended, and its pods still run, seen so
			// first after a restart: it holds its quota until they are
			// gone.
			fx = e.leave(fx)
			e.w = o.w
			e.phase = evicting
			return e, e.charge(fx, o.w.Queue, o.usage)
		}
		freeing := e.charged != nil
		if freeing {
			// Suspended again (preempted, or by its owner): the quota
			// comes back once the pods are gone, and the workload queues
			// again.
			e.w = o.w
			if o.holds() {
				e.phase = evicting
				return e, fx
			}
			if wait := suspensionUnseen(e, o, now); wait > 0 {
				// The kind's controller may not have seen the admission
				// yet, and may still start pods: look again later.
				e.phase = evicting
				return e, append(fx, recheck{after: wait})
			}
			fx = e.free(fx)
		}
		if e.restore && !freeing {
			fx = append(fx, relabel{})
		}
		if e.phase == inadmissible && e.w != nil && sameShape(e.w, o.w) {
			e.w = o.w
			return e, fx
		}
		fx = e.leave(fx)
		e.w = o.w
		e.phase = pending
		fx = e.join(fx)
		fx = append(fx, arrive{})
	}
	return e, fx
}

// recheckFold is the fold of an evicted workload's recheck (see recheck):
// by then its pods are taken to be gone, unless its last view counts some.
func recheckFold(e entry, fx []effect) (entry, []effect) {
	if e.phase != evicting || e.charged == nil || e.seen.holds() {
		return e, fx
	}
	fx = e.free(fx)
	fx = e.leave(fx)
	e.phase = pending
	return e, e.join(fx)
}

// free gives back the quota of a workload whose pods are gone: its state
// label and affinity are due, and its preemptor's wait may be over.
func (e *entry) free(fx []effect) []effect {
	e.evictedAt = time.Time{}
	return append(e.release(fx, false), relabel{}, freed{})
}

func (e *entry) leave(fx []effect) []effect {
	if !e.inTree {
		return fx
	}
	e.inTree = false
	return append(fx, leaveTree{})
}

func (e *entry) join(fx []effect) []effect {
	e.inTree = true
	return append(fx, joinTree{})
}

func (e *entry) release(fx []effect, finished bool) []effect {
	if e.charged == nil {
		return fx
	}
	fx = append(fx, release{queue: e.chargedQueue, usage: e.charged, finished: finished})
	e.charged, e.chargedQueue = nil, ""
	return fx
}

func (e *entry) charge(fx []effect, queue string, u queues.Usage) []effect {
	if len(u) == 0 {
		return fx
	}
	e.charged, e.chargedQueue = u, queue
	return append(fx, charge{queue: queue, usage: u})
}

// suspendGrace is how long after an eviction a Job that the job
// controller has shown no sign of stopping still counts: it may not have
// seen the admission before the eviction, and then still start pods.
const suspendGrace = 3 * time.Second

// suspensionUnseen says how much longer to wait before trusting that an
// evicted workload without pods stays without them: none once its
// controller has marked it stopped since the eviction (conditions have
// one-second resolution), or once suspendGrace has passed.
func suspensionUnseen(e entry, o observed, now time.Time) time.Duration {
	if e.evictedAt.IsZero() {
		return 0
	}
	if !o.stoppedSince.IsZero() && !o.stoppedSince.Before(e.evictedAt.Truncate(time.Second)) {
		return 0
	}
	return suspendGrace - now.Sub(e.evictedAt)
}

// apply puts a folded entry in force: e becomes next, and the effects are
// carried out in order (leaveTree first). fx is l.fx, handed back empty
// for the next fold.
func (l *Ledger) apply(e *entry, next entry, fx []effect) {
	defer func() { clear(fx); l.fx = fx[:0] }()
	for _, f := range fx {
		if _, ok := f.(leaveTree); ok {
			l.untree(e)
		}
	}
	if next.phase == pending && (e.phase == admitted || e.phase == evicting || e.phase == unrecorded || e.phase == capturing) {
		// Back in its queue after it ran: Kueue's requeue, from which
		// its next admission's wait counts.
		next.requeuedAt = l.opts.Clock.Now().UnixNano()
	}
	if changesPass(e, &next) {
		l.touchEntryLocked(e)
		l.touchEntryLocked(&next)
	}
	nowAdmitted := next.phase == admitted && e.phase != admitted
	*e = next
	for _, f := range fx {
		switch f := f.(type) {
		case joinTree:
			l.entree(e)
		case arrive:
			l.pokeArrival()
		case charge:
			l.addUsageLocked(f.queue, f.usage)
			l.poke()
		case release:
			l.subUsageLocked(f.queue, f.usage)
			if f.finished {
				l.event(e.w, corev1.EventTypeNormal, ReasonQuotaReleased, "Finished; released %s", describeUsage(f.usage))
			}
			l.poke()
		case relabel:
			l.relabelJobLocked(e)
		case freed:
			l.victimFreedLocked(e.w.UID)
		case recheck:
			uid, rv := e.w.UID, e.rv
			time.AfterFunc(f.after, func() { l.recheckVictim(uid, rv) })
		}
	}
	if e.charged != nil {
		l.holding[e] = struct{}{}
	} else {
		delete(l.holding, e)
	}
	l.notePendingLocked(e)
	if nowAdmitted && e.w != nil {
		// The pods the gate held while it waited may run now.
		l.judgeGatedLocked(e.w.UID)
	}
}
