package ideal

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// SimulateCore runs the plan's Jobs through tally's own admission core
// (queues.Decide, with the config the plan renders) with no latency at
// all: an admission pass runs every tick (or at every arrival and
// completion when tick is 0), admitted Jobs start at once, and preempted
// Jobs stop at once. Set beside Simulate, it tells what tally's decisions
// cost from what its plumbing (API round trips, watches) costs.
func SimulateCore(p *scenario.Plan, arrivals []time.Duration, tick time.Duration) ([]scenario.Outcome, error) {
	if len(arrivals) != len(p.Jobs) {
		return nil, fmt.Errorf("ideal: %d arrivals for %d jobs", len(arrivals), len(p.Jobs))
	}
	cfg, _, errs := queues.Parse([]byte(p.Config()))
	if len(errs) > 0 {
		return nil, fmt.Errorf("ideal: the plan's config: %v", errs.ToAggregate())
	}
	c := &coreSim{
		p: p, cfg: cfg, out: make([]scenario.Outcome, len(p.Jobs)),
		usage: map[string]queues.Usage{}, pending: map[string][]*queues.Workload{}, running: map[*queues.Workload]*coreRun{},
		index: map[*queues.Workload]int{}, yield: map[*queues.Workload]*queues.Workload{}, ns: map[string]labels.Set{},
	}
	epoch := time.Unix(0, 0)
	order := make([]int, len(p.Jobs))
	for i := range p.Jobs {
		order[i] = i
		c.out[i] = scenario.NewOutcome(arrivals[i])
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(arrivals[a] - arrivals[b]) })
	for i, j := range p.Jobs {
		cq := p.Queues[j.Queue]
		c.ns[j.Namespace] = labels.Set{}
		w := &queues.Workload{Namespace: j.Namespace, Name: j.Name, UID: types.UID(fmt.Sprint(i)), Queue: cq.Name, Priority: j.Priority,
			Created: epoch.Add(arrivals[i]), PodSets: []queues.PodSet{{Name: queues.MainPodSet, Count: 1,
				Requests: flavors.Resources{corev1.ResourceCPU: flavors.FromQuantity(corev1.ResourceCPU, *resource.NewMilliQuantity(j.CPUMilli, resource.DecimalSI))}}}}
		c.jobs = append(c.jobs, w.Seal())
		c.index[w] = i
	}
	next := 0
	for next < len(order) || len(c.running) > 0 || c.pendingLen() > 0 {
		now, ok := c.nextEvent(order, next, arrivals)
		if !ok {
			return nil, fmt.Errorf("ideal: %d Jobs pending that the core never admits", c.pendingLen())
		}
		if tick > 0 {
			now = now.Truncate(tick) + tick
		}
		for ; next < len(order) && arrivals[order[next]] <= now; next++ {
			w := c.jobs[order[next]]
			c.enqueue(w)
		}
		for w, r := range c.running {
			if r.end <= now {
				c.stop(w, r, r.end)
				o := &c.out[c.index[w]]
				o.Finished = r.end
			}
		}
		for c.pass(now) {
		}
	}
	return c.out, nil
}

type coreRun struct {
	queue    string
	usage    queues.Usage
	start    time.Duration
	end      time.Duration
	admitted *queues.Admitted
}

type coreSim struct {
	p       *scenario.Plan
	cfg     *queues.Config
	out     []scenario.Outcome
	jobs    []*queues.Workload
	index   map[*queues.Workload]int
	usage   map[string]queues.Usage
	pending map[string][]*queues.Workload
	running map[*queues.Workload]*coreRun
	// reserved and yield as the ledger keeps them (see queues.Snapshot).
	reserved []*queues.Workload
	yield    map[*queues.Workload]*queues.Workload
	ns       map[string]labels.Set
}

func (c *coreSim) pendingLen() int {
	n := 0
	for _, l := range c.pending {
		n += len(l)
	}
	return n
}

// nextEvent is the earliest arrival or completion still to come.
func (c *coreSim) nextEvent(order []int, next int, arrivals []time.Duration) (time.Duration, bool) {
	t, ok := time.Duration(0), false
	if next < len(order) {
		t, ok = arrivals[order[next]], true
	}
	for _, r := range c.running {
		if !ok || r.end < t {
			t, ok = r.end, true
		}
	}
	return t, ok
}

func (c *coreSim) enqueue(w *queues.Workload) {
	l := c.pending[w.Queue]
	i, _ := slices.BinarySearchFunc(l, w, func(a, b *queues.Workload) int {
		if queues.Before(a, b) {
			return -1
		}
		return 1
	})
	c.pending[w.Queue] = slices.Insert(l, i, w)
}

func (c *coreSim) dequeue(w *queues.Workload) {
	c.pending[w.Queue] = slices.DeleteFunc(c.pending[w.Queue], func(x *queues.Workload) bool { return x == w })
}

// stop ends a run at t: its quota is free.
func (c *coreSim) stop(w *queues.Workload, r *coreRun, t time.Duration) {
	c.usage[r.queue].Sub(r.usage)
	delete(c.running, w)
	c.out[c.index[w]].Held += t - r.start
}

// pass runs one admission pass at now and applies it; it reports whether
// anything was decided.
func (c *coreSim) pass(now time.Duration) bool {
	snap := queues.NewSnapshot(c.cfg, queues.CloneUsages(c.usage), c.ns)
	snap.Admitted = map[string][]*queues.Admitted{}
	for _, r := range c.running {
		snap.Admitted[r.queue] = append(snap.Admitted[r.queue], r.admitted)
	}
	snap.Reserved, c.reserved = c.reserved, nil
	snap.Yield = c.yield
	var never []*queues.Workload
	d := queues.Decide(snap, c.pending, func(w *queues.Workload, v queues.Verdict, _ int) {
		if v.Kind == queues.Never {
			never = append(never, w)
		}
	})
	// As the ledger does, a Job that can never fit leaves its queue.
	for _, w := range never {
		c.dequeue(w)
	}
	for _, a := range d.Admissions {
		w := a.Workload
		c.dequeue(w)
		delete(c.yield, w)
		for v, p := range c.yield {
			if p == w {
				delete(c.yield, v)
			}
		}
		if c.usage[w.Queue] == nil {
			c.usage[w.Queue] = queues.Usage{}
		}
		c.usage[w.Queue].Add(a.Assignment.Usage)
		j := c.p.Jobs[c.index[w]]
		c.running[w] = &coreRun{queue: w.Queue, usage: a.Assignment.Usage, start: now, end: now + j.Runtime,
			admitted: &queues.Admitted{W: w, Usage: a.Assignment.Usage, AdmittedAt: time.Unix(0, 0).Add(now)}}
		o := &c.out[c.index[w]]
		if o.Admissions == 0 {
			o.Admitted = now
		}
		o.Admissions++
	}
	for _, p := range d.Preemptions {
		for _, v := range p.Victims {
			r := c.running[v.W]
			c.stop(v.W, r, now)
			c.out[c.index[v.W]].Preemptions++
			c.enqueue(v.W)
			c.yield[v.W] = p.Preemptor
		}
		c.reserved = append(c.reserved, p.Preemptor)
	}
	return len(d.Admissions)+len(d.Preemptions) > 0
}
