package machine

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/queues"
)

// The steps below are the transitions that the ledger's own decisions and
// writes make, where React folds what the informers show. Each is a Step
// (or makes one from its inputs): it takes the entry as it is and returns
// it as it becomes, with its effects appended; none changes anything else.

// Reject sets a pending workload aside: a pass found that it can never
// fit under the config in force.
func Reject(e Entry, effects []Effect) (Entry, []Effect) {
	effects = e.leave(effects)
	e.phase = Inadmissible
	if e.LabelState != string(queues.StateInadmissible) {
		effects = append(effects, Relabel{})
	}
	return e, effects
}

// Assume takes a workload a pass chose out of its queue and charges it u
// in queue before its admission write, so that no pass spends that quota
// twice.
func Assume(queue string, u queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		effects = e.leave(effects)
		e.phase = Assumed
		return e, e.charge(effects, queue, u)
	}
}

// Rollback returns what Assume charged once the admission write failed.
// rejoin says whether it queues again at once; after a conflict it waits
// out of its queue for its next version instead.
func Rollback(rejoin bool) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.phase != Assumed {
			return e, effects
		}
		e.phase = Pending
		effects = e.release(effects, false)
		if rejoin {
			effects = e.join(effects)
		}
		return e, effects
	}
}

// Evict marks an admitted workload that a pass preempts, at now: moved,
// the part of its quota that its preemptor's claim takes over at once,
// leaves its queue's usage; the rest it keeps until its pods are gone.
func Evict(moved queues.Usage, now time.Time) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		e.phase = Evicting
		e.EvictedAt = now
		e.Charged = e.Charged.Clone()
		e.Charged.Sub(moved)
		return e, append(effects, Yield{Queue: e.ChargedQueue, Usage: moved})
	}
}

// EvictionFailed puts back what Evict took once the preemption write
// failed: the workload runs on with its quota in full, and its preemptor
// waits for it no more.
func EvictionFailed(moved queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.phase == Evicting {
			e.phase = Admitted
		}
		if e.Charged != nil {
			e.Charged = e.Charged.Clone()
			e.Charged.Add(moved)
			effects = append(effects, Unyield{Queue: e.ChargedQueue, Usage: moved})
		}
		return e, append(effects, Freed{})
	}
}

// Requeue marks an admitted workload that tally evicts, at now, to queue
// it again: at a larger size (a pod of it asks for more than it was
// admitted with), after its pods were not ready in time, or drained by
// its stopped queue. It keeps its quota until its pods are gone.
func Requeue(now time.Time) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		e.phase = Evicting
		e.EvictedAt = now
		return e, effects
	}
}

// RequeueFailed undoes Requeue once its write failed.
func RequeueFailed(e Entry, effects []Effect) (Entry, []Effect) {
	if e.phase == Evicting {
		e.phase = Admitted
	}
	return e, effects
}

// Grow charges an admitted workload delta more, in place: its pods ask
// for more than its pod sets (a container another admission webhook
// added), and its queue has room for the difference (the ledger judges
// that). A workload not admitted, or charged nothing, is left alone.
func Grow(delta queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.phase != Admitted || e.Charged == nil {
			return e, effects
		}
		e.Charged = e.Charged.Clone()
		e.Charged.Add(delta)
		return e, append(effects, Grew{Queue: e.ChargedQueue, Usage: delta})
	}
}

// Shrink takes back what Grow charged in queue once the write that
// records it failed, if the workload is still charged there.
func Shrink(queue string, delta queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.Charged == nil || e.ChargedQueue != queue {
			return e, effects
		}
		e.Charged = e.Charged.Clone()
		e.Charged.Sub(delta)
		return e, append(effects, Shrank{Queue: queue, Usage: delta})
	}
}

// Adopt charges a deleted workload's ghost (Ghost) u more in queue, for
// one more of its pods found running: it is charged in queue what it was
// charged and u.
func Adopt(queue string, u queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		sum := u.Clone()
		if e.Charged != nil {
			sum.Add(e.Charged)
			effects = e.release(effects, false)
		}
		return e, e.charge(effects, queue, sum)
	}
}

// Forget is the step of a deleted workload. If it holds quota and podsLive
// says its pods still run, it becomes a ghost: finished, holding its quota
// until they are gone. Else its quota is returned and its preemptor, if
// it was a victim, waits for it no more. A preemptor's claim is given
// back.
func Forget(podsLive bool) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		effects = e.leave(effects)
		effects = e.unclaim(effects)
		if e.Charged != nil && podsLive {
			e.phase = Finished
			return e, effects
		}
		effects = e.release(effects, false)
		return e, append(effects, Freed{})
	}
}

// Capture marks an unrecorded running workload that a pass decided, its
// capture write about to be made: charged u in queue when it fits (u not
// nil), else to be suspended.
func Capture(queue string, u queues.Usage) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if u != nil {
			effects = e.charge(effects, queue, u)
		}
		e.phase = Capturing
		return e, effects
	}
}

// Captured is the outcome of a capture write. If it failed (!ok), the
// charge is returned and the workload is captured again later. If it
// landed, the informer has yet to show it: one that did not fit, and
// that rejoin says is still recorded, queues now, whether or not its
// view has come.
func Captured(ok, fits, rejoin bool) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		was := e.phase
		if e.phase == Capturing {
			e.phase = Unrecorded
		}
		if !ok {
			return e, e.release(effects, false)
		}
		e.Captured = true
		if !fits && rejoin && !e.InTree && e.Charged == nil {
			e.phase = Pending
			effects = e.join(effects)
			effects = requeued(was, &e, append(effects, Pass{}))
		}
		return e, effects
	}
}

// Rebuild queues a waiting workload (pending, or inadmissible, which gets
// another chance) again at priority, derived anew, and ordered as pr (the
// config's waitForPodsReady, nil when off) says, in trees built from
// scratch. One with a claim, or in another phase, is left as it is.
func Rebuild(priority int32, pr *queues.PodsReady) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.Claim != nil || (e.phase != Pending && e.phase != Inadmissible) {
			return e, effects
		}
		w := *pr.Order(e.W)
		w.Priority = priority
		e.W = &w
		e.phase = Pending
		return e, e.join(effects)
	}
}

// Preempt takes a workload that a pass chose to preempt for out of its
// queue: it waits for victims with a claim on usage, which counts in its
// queue until they are gone, so that nothing else is decided on that room.
func Preempt(usage queues.Usage, victims []types.UID) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		effects = e.leave(effects)
		c := &Claim{Victims: make(map[types.UID]bool, len(victims)), Usage: usage}
		for _, v := range victims {
			c.Victims[v] = true
		}
		e.Claim = c
		return e, append(effects, Reserve{Queue: e.W.Queue, Usage: usage})
	}
}

// VictimGone is the step of a preemptor one of whose victims has given
// its quota back. Once none is left, its claim is given back and, if it
// still waits (rejoin: it is still recorded), it rejoins its queue, to be
// tried first in the next pass.
func VictimGone(victim types.UID, rejoin bool) Step {
	return func(e Entry, effects []Effect) (Entry, []Effect) {
		if e.Claim != nil {
			left := make(map[types.UID]bool, len(e.Claim.Victims))
			for v := range e.Claim.Victims {
				if v != victim {
					left[v] = true
				}
			}
			if len(left) > 0 {
				e.Claim = &Claim{Victims: left, Usage: e.Claim.Usage}
				return e, effects
			}
		}
		effects = e.unclaim(effects)
		if rejoin && e.phase == Pending {
			effects = append(e.join(effects), TryFirst{})
		}
		return e, append(effects, Pass{})
	}
}

// unclaim gives back e's claim, if it has one.
func (e *Entry) unclaim(effects []Effect) []Effect {
	if e.Claim == nil {
		return effects
	}
	if e.Claim.Usage != nil {
		effects = append(effects, Unreserve{Queue: e.W.Queue, Usage: e.Claim.Usage})
	}
	e.Claim = nil
	return effects
}
