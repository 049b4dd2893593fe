package machine

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/queues"
)

// Phase is where a workload is in the state machine (see the package
// documentation for the transitions).
type Phase uint8

const (
	// Unrecorded: it runs without tally's admission record; the next pass
	// captures it (late.go). With captured set, the capture write landed
	// and the informer has yet to show it.
	Unrecorded Phase = iota
	// Capturing: a pass decided its capture; the write is in flight.
	Capturing
	// Pending: suspended and waiting, in its queue's Pending tree (inTree)
	// unless it waits out of it: for the newer version after a conflict,
	// or, with a claim, for its victims.
	Pending
	// Assumed: a pass chose it; its quota is charged and its admission
	// write is in flight.
	Assumed
	// Admitted: the informer shows it un-suspended; it is charged from its
	// tally.dev/flavors annotation.
	Admitted
	// Evicting: suspended (preempted, or by its owner) while its pods may
	// still run; it keeps its quota until they are gone.
	Evicting
	// Inadmissible: it cannot fit under the config in force; out of its
	// queue until the config, or its shape, changes.
	Inadmissible
	// Finished: complete or failed; it holds nothing.
	Finished
)

var phaseNames = [...]string{"unrecorded", "capturing", "pending", "assumed", "admitted", "evicting", "inadmissible", "finished"}

func (p Phase) String() string { return phaseNames[p] }

// Label is the tally.dev/state label a workload in phase p carries once
// the ledger's writes are done; "" for one tally has not recorded.
func (p Phase) Label() queues.State {
	switch p {
	case Pending, Assumed:
		return queues.StatePending
	case Admitted, Evicting:
		return queues.StateAdmitted
	case Inadmissible:
		return queues.StateInadmissible
	case Finished:
		return queues.StateFinished
	}
	return ""
}

// Writing says whether a write tally decided for the workload (an
// admission or a capture) is in flight: its outcome decides what comes
// next.
func (p Phase) Writing() bool { return p == Assumed || p == Capturing }

// Waiting says whether the workload waits for admission, pending or set
// aside as inadmissible, with no write in flight.
func (p Phase) Waiting() bool { return p == Pending || p == Inadmissible }

// Claim is what a preemptor waits for: its victims, and the quota it
// preempts for, counted in its queue until they are gone.
type Claim struct {
	Victims map[types.UID]bool
	Usage   queues.Usage
}

// Observed is what the ledger reads from one informer view of a recorded
// workload, with what the config in force derives from it.
type Observed struct {
	W                   *queues.Workload
	Finished, Suspended bool
	// Running: its status says its pods may still run (some are active,
	// or it started and its controller has not marked it stopped).
	Running bool
	// Pods is how many of the Pods its admission labelled have not
	// terminated (Pods.go): they outlive what its status says.
	Pods int
	// StoppedSince is when its controller marked it stopped, if it did.
	StoppedSince time.Time
	// AdmittedAt is its tally.dev/admitted-at annotation, if it has one.
	AdmittedAt time.Time
	// Usage is what it holds, from its tally.dev/flavors annotation, when
	// it runs un-suspended or was admitted before.
	Usage queues.Usage
	// Restore: it was admitted before, has stopped, and some pod template
	// still has another node affinity than its candidate flavors'.
	Restore bool
	// RequeueAt is its tally.dev/requeue-at annotation: evicted because
	// its pods were not ready in time (waitForPodsReady), it is not
	// queued again before then.
	RequeueAt time.Time
	// GaveUp: it was evicted for that more often than the config's
	// backoffLimitCount allows.
	GaveUp bool
}

// Holds says whether the view shows pods that may still hold resources.
func (o Observed) Holds() bool { return o.Running || o.Pods > 0 }

// Effect is one thing the ledger does beyond the entry when an entry
// changes. The set is closed: the types below, carried out by the
// ledger's apply.
type Effect interface {
	fmt.Stringer
	effect()
}

// Step is one transition of an entry: it returns the entry as it becomes,
// with its effects appended to effects. React and the steps of steps.go
// are the only code that changes a phase.
type Step func(e Entry, effects []Effect) (Entry, []Effect)

type (
	// LeaveTree takes the workload out of its queue's pending tree. It is
	// carried out first, on the entry as it was: the tree is ordered by
	// the version the workload joined it with.
	LeaveTree struct{}
	// JoinTree puts the workload into its queue's pending tree.
	JoinTree struct{}
	// Arrive asks for a pass for a workload that starts waiting.
	Arrive struct{}
	// Started says the workload runs now: its pods that tally's gate
	// held while it waited are judged, and its wait for ready pods starts.
	Started struct{}
	// Shrunk says an admitted workload has fewer pods now: pods beyond
	// its new count may still run, and are judged.
	Shrunk struct{}
	// Charge adds usage to a queue's (a Pass follows it).
	Charge struct {
		Queue string
		Usage queues.Usage
	}
	// Release takes usage off a queue's (a Pass follows it); finished (the
	// workload completed) records a QuotaReleased Event.
	Release struct {
		Queue    string
		Usage    queues.Usage
		Finished bool
	}
	// Relabel wakes the label worker for the workload: its state label,
	// or its affinity (restore), is due for a write.
	Relabel struct{}
	// Freed tells the workload's preemptor, if it has one, that its quota
	// is free.
	Freed struct{}
	// RecheckLater folds an evicted workload again after a while (Recheck),
	// unless it has changed since.
	RecheckLater struct{ After time.Duration }
	// Yield takes usage that a victim's preemptor claims off the victim's
	// queue, without asking for a pass: the pass that preempts is running.
	Yield struct {
		Queue string
		Usage queues.Usage
	}
	// Unyield puts back what Yield took, without asking for a pass.
	Unyield struct {
		Queue string
		Usage queues.Usage
	}
	// Pass asks for a pass.
	Pass struct{}
	// Reserve counts a preemptor's claim in its queue's usage, and
	// Unreserve takes it off, without asking for a pass.
	Reserve struct {
		Queue string
		Usage queues.Usage
	}
	Unreserve struct {
		Queue string
		Usage queues.Usage
	}
	// Grew adds to a queue's usage what an admitted workload's charge
	// grew by in place, and Shrank takes it off, without asking for a
	// pass (Grow, Shrink).
	Grew struct {
		Queue string
		Usage queues.Usage
	}
	Shrank struct {
		Queue string
		Usage queues.Usage
	}
	// FoldAgain folds the workload's last view again after a while (the
	// end of its backoff), unless it has changed since.
	FoldAgain struct{ After time.Duration }
	// TryFirst puts a preemptor whose victims are gone first in the next
	// pass.
	TryFirst struct{}
	// Requeued says the workload is back in its queue after it ran
	// (admitted, evicting, running unrecorded or being captured): Kueue's
	// requeue, from which its next admission's wait counts.
	Requeued struct{}
)

func (Requeued) effect()        {}
func (Requeued) String() string { return "requeued" }

// requeued appends Requeued to effects when e, which was in phase was,
// is pending now after it ran.
func requeued(was Phase, e *Entry, effects []Effect) []Effect {
	if e.phase != Pending {
		return effects
	}
	switch was {
	case Admitted, Evicting, Unrecorded, Capturing:
		return append(effects, Requeued{})
	}
	return effects
}

func (Reserve) effect()   {}
func (Unreserve) effect() {}
func (TryFirst) effect()  {}
func (FoldAgain) effect() {}

func (r Reserve) String() string { return fmt.Sprintf("reserve %s %s", r.Queue, usageString(r.Usage)) }
func (u Unreserve) String() string {
	return fmt.Sprintf("unreserve %s %s", u.Queue, usageString(u.Usage))
}
func (TryFirst) String() string    { return "try-first" }
func (f FoldAgain) String() string { return "fold again after " + f.After.String() }

func (Yield) effect()   {}
func (Unyield) effect() {}
func (Pass) effect()    {}

func (y Yield) String() string   { return fmt.Sprintf("yield %s %s", y.Queue, usageString(y.Usage)) }
func (u Unyield) String() string { return fmt.Sprintf("unyield %s %s", u.Queue, usageString(u.Usage)) }
func (Pass) String() string      { return "pass" }

func (Started) effect()         {}
func (Shrunk) effect()          {}
func (Started) String() string  { return "started" }
func (Shrunk) String() string   { return "shrunk" }
func (Grew) effect()            {}
func (Shrank) effect()          {}
func (g Grew) String() string   { return fmt.Sprintf("grew %s %s", g.Queue, usageString(g.Usage)) }
func (s Shrank) String() string { return fmt.Sprintf("shrank %s %s", s.Queue, usageString(s.Usage)) }

func (LeaveTree) effect()    {}
func (JoinTree) effect()     {}
func (Arrive) effect()       {}
func (Charge) effect()       {}
func (Release) effect()      {}
func (Relabel) effect()      {}
func (Freed) effect()        {}
func (RecheckLater) effect() {}

func (LeaveTree) String() string { return "leave-tree" }
func (JoinTree) String() string  { return "join-tree" }
func (Arrive) String() string    { return "arrive" }
func (c Charge) String() string  { return fmt.Sprintf("charge %s %s", c.Queue, usageString(c.Usage)) }
func (r Release) String() string {
	s := fmt.Sprintf("release %s %s", r.Queue, usageString(r.Usage))
	if r.Finished {
		s += " finished"
	}
	return s
}
func (Relabel) String() string { return "relabel" }

func usageString(u queues.Usage) string {
	if len(u) == 0 {
		return "nothing"
	}
	return u.Describe()
}
func (Freed) String() string          { return "freed" }
func (r RecheckLater) String() string { return "recheck after " + r.After.String() }

// React folds one informer view of a recorded workload into its entry: it
// returns the new entry and what the ledger is to do about the change,
// appended to effects. now is the time of the view. It changes nothing else.
func React(e Entry, o Observed, now time.Time, effects []Effect) (Entry, []Effect) {
	was := e.phase
	e, effects = react(e, o, now, effects)
	return e, requeued(was, &e, effects)
}

func react(e Entry, o Observed, now time.Time, effects []Effect) (Entry, []Effect) {
	if !o.AdmittedAt.IsZero() {
		e.AdmittedAt = o.AdmittedAt
	}
	switch {
	case o.Finished:
		effects = e.leave(effects)
		e.W = o.W
		e.phase = Finished
		if o.Pods > 0 {
			// Its pods outlive its status (a PyTorchJob succeeds with its
			// master while workers run): it holds its quota, charged
			// again if it was admitted before a restart, until they are
			// gone.
			if e.Charged == nil {
				effects = e.charge(effects, o.W.Queue, o.Usage)
			}
		} else {
			effects = e.release(effects, true)
			// A victim may finish before its preemption takes effect:
			// its preemptor waits no more.
			effects = append(effects, Freed{})
		}
		if e.LabelState != string(queues.StateFinished) {
			effects = append(effects, Relabel{})
		}
	case !o.Suspended && e.phase == Evicting:
		// A view from before the preemption write: it changes nothing.
		e.W = o.W
	case !o.Suspended:
		effects = e.leave(effects)
		was, wasW := e.phase, e.W
		e.W = o.W
		e.phase = Admitted
		switch {
		case was != Admitted:
			effects = append(effects, Started{})
		case wasW != nil && o.W != nil && o.W.PodCount() < wasW.PodCount():
			effects = append(effects, Shrunk{})
		}
		if e.Charged == nil || !o.Usage.Equal(e.Charged) || e.ChargedQueue != o.W.Queue {
			effects = e.release(effects, false)
			effects = e.charge(effects, o.W.Queue, o.Usage)
		}
	case e.phase.Writing():
		// Our write is in flight; its outcome decides.
		e.W = o.W
	case e.Claim != nil:
		// A preemptor waits out of its queue for its victims.
		e.W = o.W
	default:
		// Known now, written once the quota is free (the label worker
		// is woken then).
		e.Restore = o.Restore
		if e.Charged == nil && o.Usage != nil && o.Holds() {
			// Admitted before, suspended, and its pods still run, seen so
			// first after a restart: it holds its quota until they are
			// gone.
			effects = e.leave(effects)
			e.W = o.W
			e.phase = Evicting
			return e, e.charge(effects, o.W.Queue, o.Usage)
		}
		freeing := e.Charged != nil
		if freeing {
			// Suspended again (preempted, or by its owner): the quota
			// comes back once the pods are gone, and the workload queues
			// again.
			e.W = o.W
			if o.Holds() {
				e.phase = Evicting
				return e, effects
			}
			if wait := suspensionUnseen(e, o, now); wait > 0 {
				// The kind's controller may not have seen the admission
				// yet, and may still start pods: look again later.
				e.phase = Evicting
				return e, append(effects, RecheckLater{After: wait})
			}
			effects = e.free(effects)
		}
		if e.Restore && !freeing {
			effects = append(effects, Relabel{})
		}
		if o.GaveUp {
			// Evicted too often for pods that were not ready: set aside.
			effects = e.leave(effects)
			e.W = o.W
			if e.phase != Inadmissible && e.LabelState != string(queues.StateInadmissible) {
				effects = append(effects, Relabel{})
			}
			e.phase = Inadmissible
			return e, effects
		}
		if now.Before(o.RequeueAt) {
			// Backing off after such an eviction: it waits out of its
			// queue until then, and is folded again at that time.
			effects = e.leave(effects)
			e.W = o.W
			e.phase = Pending
			return e, append(effects, FoldAgain{After: o.RequeueAt.Sub(now)})
		}
		if e.phase == Inadmissible && e.W != nil && sameShape(e.W, o.W) {
			e.W = o.W
			return e, effects
		}
		effects = e.leave(effects)
		e.W = o.W
		e.phase = Pending
		effects = e.join(effects)
		effects = append(effects, Arrive{})
	}
	return e, effects
}

// Recheck is the fold of an evicted workload's recheck (see recheck):
// by then its pods are taken to be gone, unless its last view counts some.
func Recheck(last Observed) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.phase != Evicting || e.Charged == nil || last.Holds() {
			return e, effects
		}
		effects = e.free(effects)
		effects = e.leave(effects)
		e.phase = Pending
		return e, append(e.join(effects), Requeued{})
	}
}

// free gives back the quota of a workload whose pods are gone: its state
// label and affinity are due, and its preemptor's wait may be over.
func (e *Entry) free(effects []Effect) []Effect {
	e.EvictedAt = time.Time{}
	return append(e.release(effects, false), Relabel{}, Freed{})
}

func (e *Entry) leave(effects []Effect) []Effect {
	if !e.InTree {
		return effects
	}
	e.InTree = false
	return append(effects, LeaveTree{})
}

func (e *Entry) join(effects []Effect) []Effect {
	e.InTree = true
	return append(effects, JoinTree{})
}

func (e *Entry) release(effects []Effect, finished bool) []Effect {
	if e.Charged == nil {
		return effects
	}
	effects = append(effects, Release{Queue: e.ChargedQueue, Usage: e.Charged, Finished: finished}, Pass{})
	e.Charged, e.ChargedQueue = nil, ""
	return effects
}

func (e *Entry) charge(effects []Effect, queue string, u queues.Usage) []Effect {
	if len(u) == 0 {
		return effects
	}
	e.Charged, e.ChargedQueue = u, queue
	return append(effects, Charge{Queue: queue, Usage: u}, Pass{})
}

// suspendGrace is how long after an eviction a Job that the job
// controller has shown no sign of stopping still counts: it may not have
// seen the admission before the eviction, and then still start pods.
const suspendGrace = 3 * time.Second

// suspensionUnseen says how much longer to wait before trusting that an
// evicted workload without pods stays without them: none once its
// controller has marked it stopped since the eviction (conditions have
// one-second resolution), or once suspendGrace has passed.
func suspensionUnseen(e Entry, o Observed, now time.Time) time.Duration {
	if e.EvictedAt.IsZero() {
		return 0
	}
	if !o.StoppedSince.IsZero() && !o.StoppedSince.Before(e.EvictedAt.Truncate(time.Second)) {
		return 0
	}
	return suspendGrace - now.Sub(e.EvictedAt)
}

// sameShape reports whether a change to a Job leaves its admission
// question unchanged.
func sameShape(a, b *queues.Workload) bool {
	return a.Queue == b.Queue && a.Priority == b.Priority && sameResources(a, b)
}

func sameResources(a, b *queues.Workload) bool {
	ta, tb := a.Total(), b.Total()
	if len(ta) != len(tb) {
		return false
	}
	for k, v := range ta {
		if tb[k] != v {
			return false
		}
	}
	return true
}
