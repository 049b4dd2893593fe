package ledger

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"

	"tally.dev/tally/queues"
)

// TestTailRun: what a pass's observations of one list of 10 leave
// settled, from an end learnt before ({3, "quota"}) or none.
func TestTailRun(t *testing.T) {
	type obs struct {
		pos  int
		wait bool
		code string
	}
	w := func(pos int, code string) obs { return obs{pos, true, code} }
	for _, tc := range []struct {
		name   string
		before *settledTail
		seen   []obs
		want   *settledTail
	}{
		{"all wait for one reason", nil, []obs{w(1, "quota"), w(2, "quota"), w(3, "quota"), w(4, "quota"), w(5, "quota"), w(6, "quota"), w(7, "quota"), w(8, "quota"), w(9, "quota"), w(10, "quota")}, &settledTail{0, "quota"}},
		{"the end waits for another reason", nil, []obs{w(1, "a"), w(2, "a"), w(3, "b"), w(4, "b"), w(5, "b"), w(6, "b"), w(7, "b"), w(8, "b"), w(9, "b"), w(10, "b")}, &settledTail{2, "b"}},
		{"the last fits", nil, []obs{w(8, "a"), w(9, "a"), {10, false, ""}}, nil},
		{"a gap: the taken one between", nil, []obs{w(7, "a"), w(9, "a"), w(10, "a")}, &settledTail{8, "a"}},
		{"the pass stopped before the end", nil, []obs{w(1, "a"), w(2, "a")}, nil},
		{"the pass stopped before the end learnt", &settledTail{3, "quota"}, []obs{w(1, "a"), w(2, "a"), w(3, "a")}, &settledTail{3, "quota"}},
		{"the pass observed in the end learnt", &settledTail{3, "quota"}, []obs{w(1, "a"), w(4, "a")}, nil},
		{"nothing observed", &settledTail{3, "quota"}, nil, &settledTail{3, "quota"}},
		{"a first walk's admission, then the second walk", nil, []obs{{5, false, ""}, w(1, "a"), w(2, "a"), w(3, "a"), w(4, "a"), w(6, "a"), w(7, "a"), w(8, "a"), w(9, "a"), w(10, "a")}, &settledTail{5, "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPassCache()
			if tc.before != nil {
				c.settled["q"] = *tc.before
			}
			lists := map[string][]*queues.Workload{"q": make([]*queues.Workload, 10)}
			runs := c.runs(lists)
			for _, o := range tc.seen {
				runs["q"].observe(o.pos, o.wait, o.code)
			}
			c.settle(runs, lists)
			got, ok := c.settled["q"]
			if ok != (tc.want != nil) || ok && got != *tc.want {
				t.Errorf("settled %v (%v), want %v", got, ok, tc.want)
			}
		})
	}
}

// TestSettledTailsWriteNothing: a pass over queues whose ends waited in the
// pass before, for the same reason, writes no Event and does not observe
// those ends; a new Job in one list has that list walked again.
func TestSettledTailsWriteNothing(t *testing.T) {
	const nQueues = 10
	l := newBenchLedger(t, nQueues, 10*nQueues, 20*nQueues)
	rec := record.NewFakeRecorder(10_000)
	l.recorder = rec
	events := func() map[string]int {
		n := map[string]int{}
		for {
			select {
			case e := <-rec.Events:
				n[strings.Fields(e)[1]]++
			default:
				return n
			}
		}
	}
	if adms := l.decide(); len(adms) != 0 {
		t.Fatalf("admitted %d into full queues", len(adms))
	}
	if got := events(); got[ReasonQueued] != 20*nQueues || got[ReasonPending] != 20*nQueues {
		t.Fatalf("first pass: Events %v, want %d Queued and Pending", got, 20*nQueues)
	}
	for q := range nQueues {
		name := fmt.Sprintf("cq-%d", q)
		if m, ok := l.passCache.settled[name]; !ok || m.from != 0 {
			t.Fatalf("%s: settled %v (%v), want all of it", name, m, ok)
		}
	}

	// An entry of cq-3's end made to look as if it had no Queued Event
	// would get one if its list were walked.
	l.mu.Lock()
	l.passCache.lists["cq-3"][7].Tag.(*entry).queued = false
	l.passCache.touchAll()
	l.mu.Unlock()
	l.decide()
	if got := events(); len(got) != 0 {
		t.Fatalf("second pass: Events %v, want none", got)
	}

	// A new Job in cq-3 has its list made and walked again.
	l.onJob(StripJobOrDie(benchJob(30*nQueues+3, nQueues, true)))
	l.decide()
	if got := events(); got[ReasonQueued] != 2 || got[ReasonPending] != 1 {
		t.Fatalf("after a new Job: Events %v, want 2 Queued (the new Job's, the unqueued one's) and 1 Pending", got)
	}
	if m, ok := l.passCache.settled["cq-3"]; !ok || m.from != 0 {
		t.Fatalf("cq-3: settled %v (%v), want all of it", m, ok)
	}
}
