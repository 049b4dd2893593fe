package ideal

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// Simulate runs the plan's Jobs, created at arrivals (parallel to p.Jobs,
// in time from the start), through a zero-latency scheduler and returns
// their outcomes, parallel to p.Jobs.
func Simulate(p *scenario.Plan, arrivals []time.Duration) ([]scenario.Outcome, error) {
	if len(arrivals) != len(p.Jobs) {
		return nil, fmt.Errorf("ideal: %d arrivals for %d jobs", len(arrivals), len(p.Jobs))
	}
	s := newSim(p)
	for i, at := range arrivals {
		s.out[i] = scenario.NewOutcome(at)
		s.push(event{at: at, kind: arrive, job: s.jobs[i]})
	}
	s.run()
	return s.out, nil
}

type state int

const (
	waiting state = iota
	running
	done
)

type job struct {
	index   int
	cpu     int64
	prio    int32
	created time.Duration
	runtime time.Duration
	queue   *queue
	state   state
	// gen counts admissions, so that the completion of a run that was
	// preempted is recognised as stale.
	gen        int
	admittedAt time.Duration
	// admitSeq orders admissions, for "most recently admitted first".
	admitSeq int
}

// before is the admission order within a ClusterQueue.
func before(a, b *job) int {
	if a.prio != b.prio {
		return cmp.Compare(b.prio, a.prio)
	}
	if a.created != b.created {
		return cmp.Compare(a.created, b.created)
	}
	return cmp.Compare(a.index, b.index)
}

type queue struct {
	cq      scenario.ClusterQueue
	cohort  *cohort
	limit   int64 // most it may use: nominal + borrowing limit
	usage   int64
	pending []*job // sorted by before
	running []*job
}

func (q *queue) fits(cpu int64) bool {
	return q.usage+cpu <= q.limit && q.cohort.usage+cpu <= q.cohort.capacity
}

func (q *queue) borrowing() bool { return q.usage > q.cq.NominalMilli }

type cohort struct {
	queues   []*queue
	capacity int64
	usage    int64
	dirty    bool
}

type kind int

// Completions at an instant are handled before arrivals at it.
const (
	finish kind = iota
	arrive
)

type event struct {
	at   time.Duration
	kind kind
	seq  int
	job  *job
	gen  int
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	if e[i].kind != e[j].kind {
		return e[i].kind < e[j].kind
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type sim struct {
	jobs     []*job
	out      []scenario.Outcome
	cohorts  []*cohort
	queue    events
	seq      int
	admitSeq int
	now      time.Duration
	// decided, when set, records every admission and eviction as it is
	// made (the online scheduler's output).
	decided []Decision
	logging bool
	// held: completions are reported (Online.Finish), not simulated
	// (NewHeldOnline).
	held bool
}

func newSim(p *scenario.Plan) *sim {
	s := &sim{out: make([]scenario.Outcome, len(p.Jobs))}
	byName := map[string]*cohort{}
	queues := make([]*queue, len(p.Queues))
	for i, cq := range p.Queues {
		q := &queue{cq: cq, limit: math.MaxInt64}
		c := byName[cq.Cohort]
		if cq.Cohort == "" || c == nil {
			c = &cohort{}
			s.cohorts = append(s.cohorts, c)
			if cq.Cohort != "" {
				byName[cq.Cohort] = c
			}
		}
		if cq.Cohort != "" && cq.BorrowingLimitMilli >= 0 {
			q.limit = cq.NominalMilli + cq.BorrowingLimitMilli
		}
		q.cohort = c
		c.queues = append(c.queues, q)
		c.capacity += cq.NominalMilli
		queues[i] = q
	}
	for i, j := range p.Jobs {
		s.jobs = append(s.jobs, &job{index: i, cpu: j.CPUMilli, prio: j.Priority, runtime: j.Runtime, queue: queues[j.Queue]})
	}
	return s
}

func (s *sim) push(e event) {
	e.seq = s.seq
	s.seq++
	heap.Push(&s.queue, e)
}

func (s *sim) run() { s.runUntil(math.MaxInt64) }

// runUntil handles the events due at or before until, in order.
func (s *sim) runUntil(until time.Duration) {
	for s.queue.Len() > 0 && s.queue[0].at <= until {
		s.now = s.queue[0].at
		for s.queue.Len() > 0 && s.queue[0].at == s.now {
			e := heap.Pop(&s.queue).(event)
			switch e.kind {
			case arrive:
				e.job.created = s.now
				s.enqueue(e.job)
			case finish:
				if e.job.state == running && e.job.gen == e.gen {
					s.release(e.job)
					e.job.state = done
					s.out[e.job.index].Finished = s.now
				}
			}
		}
		for _, c := range s.cohorts {
			if c.dirty {
				c.dirty = false
				s.schedule(c)
			}
		}
	}
}

func (s *sim) enqueue(j *job) {
	q := j.queue
	i, _ := slices.BinarySearchFunc(q.pending, j, before)
	q.pending = slices.Insert(q.pending, i, j)
	j.state = waiting
	q.cohort.dirty = true
}

// release returns a running Job's quota and accounts for the time it held.
func (s *sim) release(j *job) {
	q := j.queue
	q.usage -= j.cpu
	q.cohort.usage -= j.cpu
	q.running = slices.DeleteFunc(q.running, func(r *job) bool { return r == j })
	s.out[j.index].Held += s.now - j.admittedAt
	q.cohort.dirty = true
}

func (s *sim) admit(j *job) {
	q := j.queue
	q.pending = slices.DeleteFunc(q.pending, func(p *job) bool { return p == j })
	q.usage += j.cpu
	q.cohort.usage += j.cpu
	q.running = append(q.running, j)
	j.state = running
	j.gen++
	j.admittedAt = s.now
	j.admitSeq = s.admitSeq
	s.admitSeq++
	o := &s.out[j.index]
	if o.Admitted == scenario.Never {
		o.Admitted = s.now
	}
	o.Admissions++
	if !s.held {
		s.push(event{at: s.now + j.runtime, kind: finish, job: j, gen: j.gen})
	}
	if s.logging {
		s.decided = append(s.decided, Decision{Job: j.index, At: s.now, Admit: true})
	}
}

func (s *sim) evict(j *job) {
	s.release(j)
	s.out[j.index].Preemptions++
	s.enqueue(j)
	if s.logging {
		s.decided = append(s.decided, Decision{Job: j.index, At: s.now})
	}
}

// schedule admits what it can in one cohort, in rounds: each round takes
// every ClusterQueue's best candidate and admits them in Kueue's order.
func (s *sim) schedule(c *cohort) {
	for {
		var heads []*job
		for _, q := range c.queues {
			if h := s.candidate(q); h != nil {
				heads = append(heads, h)
			}
		}
		if len(heads) == 0 {
			return
		}
		slices.SortFunc(heads, func(a, b *job) int {
			ab, bb := a.queue.usage+a.cpu > a.queue.cq.NominalMilli, b.queue.usage+b.cpu > b.queue.cq.NominalMilli
			if ab != bb {
				if ab {
					return 1
				}
				return -1
			}
			return before(a, b)
		})
		progress := false
		for _, h := range heads {
			q := h.queue
			if q.fits(h.cpu) {
				s.admit(h)
				progress = true
				continue
			}
			if victims := s.victims(h); victims != nil {
				for _, v := range victims {
					s.evict(v)
				}
				s.admit(h)
				progress = true
			}
		}
		if !progress {
			return
		}
	}
}

// candidate is the first pending Job of q, in order, that fits now or
// could by preempting; with StrictFIFO only the head is considered.
func (s *sim) candidate(q *queue) *job {
	type shape struct {
		cpu  int64
		prio int32
	}
	failed := map[shape]bool{}
	for _, j := range q.pending {
		if failed[shape{j.cpu, j.prio}] {
			continue
		}
		if q.fits(j.cpu) || s.victims(j) != nil {
			return j
		}
		if q.cq.StrictFIFO {
			return nil
		}
		failed[shape{j.cpu, j.prio}] = true
	}
	return nil
}

// victims returns the Jobs whose eviction lets j fit, or nil when there is
// no such set (or no need).
func (s *sim) victims(j *job) []*job {
	q := j.queue
	if q.fits(j.cpu) {
		return nil
	}
	var cands []*job
	if q.cq.WithinClusterQueue == scenario.PolicyLowerPriority {
		for _, r := range q.running {
			if r.prio < j.prio {
				cands = append(cands, r)
			}
		}
	}
	reclaim := q.cq.ReclaimWithinCohort
	if q.cq.Cohort != "" && reclaim != scenario.PolicyNever && q.usage+j.cpu <= q.cq.NominalMilli {
		for _, o := range q.cohort.queues {
			if o == q || !o.borrowing() {
				continue
			}
			for _, r := range o.running {
				if reclaim == scenario.PolicyAny || r.prio < j.prio {
					cands = append(cands, r)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, func(a, b *job) int {
		ao, bo := a.queue != q, b.queue != q
		if ao != bo {
			if ao {
				return -1
			}
			return 1
		}
		if a.prio != b.prio {
			return cmp.Compare(a.prio, b.prio)
		}
		return cmp.Compare(b.admitSeq, a.admitSeq)
	})
	take := func(r *job, sign int64) {
		r.queue.usage -= sign * r.cpu
		r.queue.cohort.usage -= sign * r.cpu
	}
	var removed []*job
	for _, r := range cands {
		if r.queue != q && !r.queue.borrowing() {
			continue
		}
		take(r, 1)
		removed = append(removed, r)
		if q.fits(j.cpu) {
			break
		}
	}
	if !q.fits(j.cpu) {
		for _, r := range removed {
			take(r, -1)
		}
		return nil
	}
	// Keep any victim whose eviction turns out unneeded, trying the
	// last-chosen ones first.
	victims := []*job{removed[len(removed)-1]}
	for i := len(removed) - 2; i >= 0; i-- {
		r := removed[i]
		take(r, -1)
		if q.fits(j.cpu) {
			continue
		}
		take(r, 1)
		victims = append(victims, r)
	}
	for _, r := range victims {
		take(r, -1)
	}
	return victims
}
