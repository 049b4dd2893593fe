package ideal

import (
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// Decision is one admission or eviction the scheduler made.
type Decision struct {
	// Job indexes the plan's Jobs.
	Job int
	// At is the scheduler's time of the decision.
	At time.Duration
	// Admit is true for an admission, false for an eviction.
	Admit bool
}

// Online is the ideal scheduler fed as it goes: Jobs arrive when they are
// known to exist, and Advance makes the decisions due up to a time. Given
// the same arrivals it decides what Simulate does, as long as no arrival
// is reported for a time before the last Advance (such an arrival counts
// from that time instead: the scheduler cannot go back). It is not safe
// for concurrent use.
type Online struct {
	s *sim
}

// NewOnline returns the scheduler for the plan, at time zero, with no Job
// arrived.
func NewOnline(p *scenario.Plan) *Online {
	s := newSim(p)
	s.logging = true
	for i := range s.out {
		s.out[i] = scenario.NewOutcome(scenario.Never)
	}
	return &Online{s: s}
}

// NewHeldOnline returns the scheduler for the plan that holds each Job's
// quota until its completion is reported (Finish) instead of for its
// runtime, and that never preempts (p.WithoutPreemption), so that it can
// be replayed on a real API server without taking more quota than is free
// there.
func NewHeldOnline(p *scenario.Plan) *Online {
	o := NewOnline(p.WithoutPreemption())
	o.s.held = true
	return o
}

// Finish records that Job i's run completed at time at (or at the last
// Advance, if that is later). It is for NewHeldOnline's scheduler, and
// ignored for a Job that is not running.
func (o *Online) Finish(i int, at time.Duration) {
	j := o.s.jobs[i]
	o.s.push(event{at: max(at, o.s.now), kind: finish, job: j, gen: j.gen})
}

// Arrive records that Job i (an index into the plan's Jobs) exists from
// time at on.
func (o *Online) Arrive(i int, at time.Duration) {
	at = max(at, o.s.now)
	o.s.out[i].Created = at
	o.s.push(event{at: at, kind: arrive, job: o.s.jobs[i]})
}

// Advance handles every arrival and completion due at or before now and
// returns the decisions they led to, in the order they were made.
func (o *Online) Advance(now time.Duration) []Decision {
	o.s.runUntil(now)
	o.s.now = max(o.s.now, now)
	d := o.s.decided
	o.s.decided = nil
	return d
}

// Outcomes are the scheduler's outcomes so far, parallel to the plan's
// Jobs.
func (o *Online) Outcomes() []scenario.Outcome { return o.s.out }
