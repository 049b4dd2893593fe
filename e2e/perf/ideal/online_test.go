package ideal

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOnlineMatchesSimulate feeds random plans to the online scheduler
// arrival by arrival, advancing it at random times in between, and expects
// Simulate's outcomes, with one decision logged per admission and per
// eviction.
func TestOnlineMatchesSimulate(t *testing.T) {
	for seed := range uint64(300) {
		p := randomPlan(seed, 2)
		want, err := Simulate(p, p.Arrivals())
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 3))
		order := make([]int, len(p.Jobs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(p.Jobs[a].Arrival - p.Jobs[b].Arrival) })
		o := NewOnline(p)
		var decided []Decision
		last := time.Duration(0)
		for k, i := range order {
			at := p.Jobs[i].Arrival
			if at > last && r.IntN(2) == 0 {
				// Somewhere in [last, at): nothing new has arrived yet.
				decided = append(decided, o.Advance(last+time.Duration(r.Int64N(int64(at-last))))...)
			}
			o.Arrive(i, at)
			if k+1 == len(order) || p.Jobs[order[k+1]].Arrival > at {
				decided = append(decided, o.Advance(at)...)
			}
			last = at
		}
		decided = append(decided, o.Advance(time.Hour)...)
		got := o.Outcomes()
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("seed %d: online outcomes differ from Simulate's (-want +got):\n%s", seed, d)
		}
		admits, evictions := make([]int, len(p.Jobs)), make([]int, len(p.Jobs))
		for k, d := range decided {
			if k > 0 && d.At < decided[k-1].At {
				t.Fatalf("seed %d: decision %d at %s comes after one at %s", seed, k, d.At, decided[k-1].At)
			}
			if d.Admit {
				if admits[d.Job] == 0 && d.At != want[d.Job].Admitted {
					t.Fatalf("seed %d: Job %d first admitted at %s, Simulate says %s", seed, d.Job, d.At, want[d.Job].Admitted)
				}
				admits[d.Job]++
			} else {
				evictions[d.Job]++
			}
		}
		for i, w := range want {
			if admits[i] != w.Admissions || evictions[i] != w.Preemptions {
				t.Fatalf("seed %d: Job %d: %d admissions and %d evictions logged, Simulate says %d and %d", seed, i, admits[i], evictions[i], w.Admissions, w.Preemptions)
			}
		}
	}
}

// TestOnlineLateArrival: an arrival reported for a time the scheduler has
// passed counts from the time it reached.
func TestOnlineLateArrival(t *testing.T) {
	p := plan().queue("a", "", 1, -1, "Never", "Never").job("A", 0, 1, s, 0, 0).obj()
	o := NewOnline(p)
	if d := o.Advance(2 * s); len(d) != 0 {
		t.Fatalf("decisions with no Job arrived: %v", d)
	}
	o.Arrive(0, s)
	d := o.Advance(2 * s)
	if want := []Decision{{Job: 0, At: 2 * s, Admit: true}}; !slices.Equal(d, want) {
		t.Fatalf("got %v, want %v", d, want)
	}
	if got := o.Outcomes()[0].Created; got != 2*s {
		t.Fatalf("created at %s, want 2s", got)
	}
}

// TestHeldOnlineMatchesNoPreemption reports each run's completion at the
// end of its runtime, as the simulation would, and expects Simulate's
// outcomes for the plan without preemption: the held scheduler differs
// only in where completions come from.
func TestHeldOnlineMatchesNoPreemption(t *testing.T) {
	for seed := range uint64(300) {
		p := randomPlan(seed, 4)
		want, err := Simulate(p.WithoutPreemption(), p.Arrivals())
		if err != nil {
			t.Fatal(err)
		}
		o := NewHeldOnline(p)
		order := make([]int, len(p.Jobs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(p.Jobs[a].Arrival - p.Jobs[b].Arrival) })
		type finish struct {
			job int
			at  time.Duration
		}
		var due []finish // kept sorted by time
		next := 0
		for next < len(order) || len(due) > 0 {
			now := time.Duration(1<<62 - 1)
			if next < len(order) {
				now = p.Jobs[order[next]].Arrival
			}
			if len(due) > 0 && due[0].at <= now {
				now = due[0].at
			}
			for len(due) > 0 && due[0].at == now {
				o.Finish(due[0].job, now)
				due = due[1:]
			}
			for next < len(order) && p.Jobs[order[next]].Arrival == now {
				o.Arrive(order[next], now)
				next++
			}
			for _, d := range o.Advance(now) {
				if !d.Admit {
					t.Fatalf("seed %d: Job %d evicted at %s by a scheduler that never preempts", seed, d.Job, d.At)
				}
				f := finish{d.Job, d.At + p.Jobs[d.Job].Runtime}
				k, _ := slices.BinarySearchFunc(due, f, func(a, b finish) int {
					if a.at != b.at {
						return int(a.at - b.at)
					}
					return a.job - b.job
				})
				due = slices.Insert(due, k, f)
			}
		}
		if d := cmp.Diff(want, o.Outcomes()); d != "" {
			t.Fatalf("seed %d: held outcomes differ from Simulate's without preemption (-want +got):\n%s", seed, d)
		}
	}
}

// TestHeldOnlineWaitsForFinish: a Job's quota stays taken past its
// runtime until its completion is reported.
func TestHeldOnlineWaitsForFinish(t *testing.T) {
	p := plan().queue("a", "", 1, -1, "Never", "Never").job("A", 0, 1, s, 0, 0).job("B", 0, 1, s, 0, 0).obj()
	o := NewHeldOnline(p)
	o.Arrive(0, 0)
	o.Arrive(1, 0)
	if d, want := o.Advance(0), []Decision{{Job: 0, Admit: true}}; !slices.Equal(d, want) {
		t.Fatalf("at 0: got %v, want %v", d, want)
	}
	if d := o.Advance(5 * s); len(d) != 0 {
		t.Fatalf("B admitted before A's completion was reported: %v", d)
	}
	o.Finish(0, 3*s) // reported late: counts from the last Advance
	if d, want := o.Advance(5*s), []Decision{{Job: 1, At: 5 * s, Admit: true}}; !slices.Equal(d, want) {
		t.Fatalf("after A finished: got %v, want %v", d, want)
	}
	if got := o.Outcomes()[0].Finished; got != 5*s {
		t.Fatalf("A finished at %s, want 5s", got)
	}
}
