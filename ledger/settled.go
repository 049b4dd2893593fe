package ledger

import "tally.dev/tally/queues"

// A pass that finds the end of a queue's pending list waiting, for the
// same reason as the pass before, need not walk it (queues.Tail): each
// Workload there already has its Queued Event, and its Pending Event for
// that reason, so observing it again writes nothing. settled remembers,
// by queue, which end that is; a pass learns it from what it observes,
// and forgets it when the list is made again (passCache.listsOf,
// passCache.drop). What it rests on, an entry's queued and lastCode,
// changes only in the observer, or as the entry leaves its tree
// (admitted, preempting), which has the list made again.

// settledTail says that every Workload of a queue's list from index from
// on was observed waiting for a reason of code, in positions one after
// another, and has had its Events for it.
type settledTail struct {
	from int
	code string
}

// tailRun follows, through one pass, the positions of one queue's list
// that it observes: the run of consecutive positions, up to the last one
// observed, that waited for one reason, and the furthest position
// observed. Positions are 1-based; 0 is none.
type tailRun struct {
	start, last, furthest int
	code                  string
	run                   bool
}

// observe notes position pos, which waited (for a reason of code) or not.
func (t *tailRun) observe(pos int, wait bool, code string) {
	switch {
	case !wait:
		t.run = false
	case !t.run || t.last != pos-1 || t.code != code:
		t.start, t.code, t.run = pos, code, true
	}
	t.last = pos
	t.furthest = max(t.furthest, pos)
}

// runs makes the tailRuns of a pass over lists, each empty. Those
// of other queues are left as they are: the pass reads only its own.
func (c *passCache) runs(lists map[string][]*queues.Workload) map[string]*tailRun {
	runs := c.scratch.runs
	if runs == nil {
		runs = map[string]*tailRun{}
		c.scratch.runs = runs
	}
	for q := range lists {
		if t := runs[q]; t != nil {
			*t = tailRun{}
		} else {
			runs[q] = &tailRun{}
		}
	}
	return runs
}

// settledFunc is the pass's queues.Snapshot.Settled: it says whether
// queue's list from index from on is settled with code, and if so counts
// those positions as observed, waiting for it.
func (c *passCache) settledFunc(runs map[string]*tailRun, lists map[string][]*queues.Workload) func(string, int, string) bool {
	return func(q string, from int, code string) bool {
		m, ok := c.settled[q]
		t := runs[q]
		if !ok || t == nil || from < m.from || code != m.code {
			return false
		}
		t.observe(from+1, true, code)
		t.last, t.furthest = len(lists[q]), len(lists[q])
		return true
	}
}

// settle keeps, after a pass, what it found settled: the end of
// each list that waited, observed to its last position, for one reason.
// An end learnt before stays unless the pass observed a position in it.
func (c *passCache) settle(runs map[string]*tailRun, lists map[string][]*queues.Workload) {
	for q := range lists {
		t := runs[q]
		switch m, ok := c.settled[q]; {
		case t.run && t.last == len(lists[q]):
			c.settled[q] = settledTail{from: t.start - 1, code: t.code}
		case ok && t.furthest > m.from:
			delete(c.settled, q)
		}
	}
}
