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
