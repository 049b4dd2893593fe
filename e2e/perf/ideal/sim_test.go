package ideal

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"tally.dev/tally/e2e/perf/scenario"
)

const s = time.Second

// planBuilder makes small plans whose outcomes can be worked out by hand.
type planBuilder struct{ p scenario.Plan }

func plan() *planBuilder {
	return &planBuilder{p: scenario.Plan{Name: "t", Classes: []scenario.Class{{Name: "any"}}}}
}

// queue adds a ClusterQueue with cpu nominal quota (whole cpus); cohort ""
// means none, borrow < 0 means no borrowing limit.
func (b *planBuilder) queue(name, cohort string, nominal, borrow int64, within, reclaim string) *planBuilder {
	if borrow >= 0 {
		borrow *= 1000
	}
	b.p.Queues = append(b.p.Queues, scenario.ClusterQueue{Name: name, Cohort: cohort, NominalMilli: nominal * 1000,
		BorrowingLimitMilli: borrow, WithinClusterQueue: within, ReclaimWithinCohort: reclaim})
	return b
}

func (b *planBuilder) strict() *planBuilder {
	b.p.Queues[len(b.p.Queues)-1].StrictFIFO = true
	return b
}

// job adds a Job of cpu whole cpus to queue qi, arriving at `at`.
func (b *planBuilder) job(name string, qi int, cpu int64, runtime time.Duration, prio int32, at time.Duration) *planBuilder {
	b.p.Jobs = append(b.p.Jobs, scenario.Job{Name: name, Queue: qi, CPUMilli: cpu * 1000, Runtime: runtime, Priority: prio, Arrival: at})
	return b
}

func (b *planBuilder) obj() *scenario.Plan { return &b.p }

// result is an Outcome in a form that is easy to write in a table.
type result struct {
	Admitted, Finished time.Duration
	Preemptions        int
}

func TestSimulate(t *testing.T) {
	never := scenario.Never
	n, lower, anyP := scenario.PolicyNever, scenario.PolicyLowerPriority, scenario.PolicyAny
	cases := []struct {
		name string
		plan *scenario.Plan
		want map[string]result
	}{{
		name: "a queue runs what fits and starts the rest as quota frees",
		plan: plan().queue("a", "", 2, -1, n, n).
			job("j1", 0, 1, s, 0, 0).job("j2", 0, 1, s, 0, 0).job("j3", 0, 1, s, 0, 0).obj(),
		want: map[string]result{"j1": {0, s, 0}, "j2": {0, s, 0}, "j3": {s, 2 * s, 0}},
	}, {
		name: "higher priority goes first, then first come first served",
		plan: plan().queue("a", "", 1, -1, n, n).
			job("low1", 0, 1, s, 0, 0).job("low2", 0, 1, s, 0, s/2).job("high", 0, 1, s, 10, s/2+1).obj(),
		want: map[string]result{"low1": {0, s, 0}, "high": {s, 2 * s, 0}, "low2": {2 * s, 3 * s, 0}},
	}, {
		name: "withinClusterQueue LowerPriority evicts, and the victim restarts from scratch",
		plan: plan().queue("a", "", 1, -1, lower, n).
			job("low", 0, 1, 2*s, 0, 0).job("high", 0, 1, s, 10, s).obj(),
		want: map[string]result{"low": {0, 4 * s, 1}, "high": {s, 2 * s, 0}},
	}, {
		name: "without preemption the high priority Job waits",
		plan: plan().queue("a", "", 1, -1, n, n).
			job("low", 0, 1, 2*s, 0, 0).job("high", 0, 1, s, 10, s).obj(),
		want: map[string]result{"low": {0, 2 * s, 0}, "high": {2 * s, 3 * s, 0}},
	}, {
		name: "a queue borrows from an idle cohort member up to its borrowing limit",
		plan: plan().queue("a", "c", 2, 1, n, n).queue("b", "c", 2, -1, n, n).
			job("j1", 0, 1, s, 0, 0).job("j2", 0, 1, s, 0, 0).job("j3", 0, 1, s, 0, 0).job("j4", 0, 1, s, 0, 0).obj(),
		want: map[string]result{"j1": {0, s, 0}, "j2": {0, s, 0}, "j3": {0, s, 0}, "j4": {s, 2 * s, 0}},
	}, {
		name: "no borrowing limit: the cohort's quota is the only cap",
		plan: plan().queue("a", "c", 2, -1, n, n).queue("b", "c", 2, -1, n, n).
			job("j1", 0, 1, s, 0, 0).job("j2", 0, 1, s, 0, 0).job("j3", 0, 1, s, 0, 0).job("j4", 0, 1, s, 0, 0).job("j5", 0, 1, s, 0, 0).obj(),
		want: map[string]result{"j1": {0, s, 0}, "j2": {0, s, 0}, "j3": {0, s, 0}, "j4": {0, s, 0}, "j5": {s, 2 * s, 0}},
	}, {
		name: "reclaimWithinCohort Any takes back lent quota, newest victim first",
		plan: plan().queue("a", "c", 1, -1, n, n).queue("b", "c", 1, -1, n, anyP).
			job("a1", 0, 1, 10*s, 0, 0).job("a2", 0, 1, 10*s, 0, 0).job("b1", 1, 1, s, 0, s).obj(),
		want: map[string]result{"a1": {0, 10 * s, 0}, "a2": {0, 12 * s, 1}, "b1": {s, 2 * s, 0}},
	}, {
		name: "reclaimWithinCohort LowerPriority spares equal priority",
		plan: plan().queue("a", "c", 1, -1, n, n).queue("b", "c", 1, -1, n, lower).
			job("a1", 0, 1, 10*s, 0, 0).job("a2", 0, 1, 10*s, 0, 0).job("b1", 1, 1, s, 0, s).obj(),
		want: map[string]result{"a1": {0, 10 * s, 0}, "a2": {0, 10 * s, 0}, "b1": {10 * s, 11 * s, 0}},
	}, {
		name: "a queue that would borrow may not reclaim",
		plan: plan().queue("a", "c", 1, -1, n, n).queue("b", "c", 1, -1, n, anyP).
			job("a1", 0, 1, 10*s, 0, 0).job("a2", 0, 1, 10*s, 0, 0).job("b1", 1, 2, s, 0, s).obj(),
		want: map[string]result{"a1": {0, 10 * s, 0}, "a2": {0, 10 * s, 0}, "b1": {10 * s, 11 * s, 0}},
	}, {
		name: "only as many victims as needed: the 1-cpu Job is kept",
		plan: plan().queue("a", "", 3, -1, lower, n).
			job("big", 0, 2, 5*s, 0, 0).job("small", 0, 1, 5*s, 0, s/2).job("high", 0, 2, s, 10, s).obj(),
		want: map[string]result{"big": {0, 7 * s, 1}, "small": {s / 2, 11 * s / 2, 0}, "high": {s, 2 * s, 0}},
	}, {
		name: "BestEffortFIFO lets a small Job pass a head that does not fit",
		plan: plan().queue("a", "", 2, -1, n, n).
			job("run", 0, 1, 2*s, 0, 0).job("wide", 0, 2, s, 0, s/2).job("narrow", 0, 1, s, 0, s).obj(),
		want: map[string]result{"run": {0, 2 * s, 0}, "narrow": {s, 2 * s, 0}, "wide": {2 * s, 3 * s, 0}},
	}, {
		name: "StrictFIFO makes it wait behind the head",
		plan: plan().queue("a", "", 2, -1, n, n).strict().
			job("run", 0, 1, 2*s, 0, 0).job("wide", 0, 2, s, 0, s/2).job("narrow", 0, 1, s, 0, s).obj(),
		want: map[string]result{"run": {0, 2 * s, 0}, "wide": {2 * s, 3 * s, 0}, "narrow": {3 * s, 4 * s, 0}},
	}, {
		name: "a Job larger than its queue can ever hold is never admitted",
		plan: plan().queue("a", "", 1, -1, n, n).job("huge", 0, 2, s, 0, 0).job("ok", 0, 1, s, 0, 0).obj(),
		want: map[string]result{"huge": {never, never, 0}, "ok": {0, s, 0}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Simulate(tc.plan, tc.plan.Arrivals())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]result{}
			for i, o := range out {
				got[tc.plan.Jobs[i].Name] = result{o.Admitted, o.Finished, o.Preemptions}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimulateStats(t *testing.T) {
	// Three 1-cpu, 1s Jobs in a 2-cpu queue: the third runs alone in the
	// second second, so 3 cpu-seconds over 2 cpus × 2s is 75%.
	p := plan().queue("a", "", 2, -1, scenario.PolicyNever, scenario.PolicyNever).
		job("j1", 0, 1, s, 0, 0).job("j2", 0, 1, s, 0, 0).job("j3", 0, 1, s, 0, 0).obj()
	out, err := Simulate(p, p.Arrivals())
	if err != nil {
		t.Fatal(err)
	}
	st := scenario.Compute(p, out)
	if st.Wall != 2*s || st.UsagePercent != 75 || st.Classes[0].AvgTimeToAdmission != s/3 || st.Classes[0].P99TimeToAdmission != s {
		t.Errorf("wall %s usage %.1f%% avg %s p99 %s; want 2s, 75%%, 333.333333ms, 1s",
			st.Wall, st.UsagePercent, st.Classes[0].AvgTimeToAdmission, st.Classes[0].P99TimeToAdmission)
	}
}

func TestSimulateArrivals(t *testing.T) {
	// The same plan, with the second Job created late: it starts late.
	p := plan().queue("a", "", 1, -1, scenario.PolicyNever, scenario.PolicyNever).
		job("j1", 0, 1, s, 0, 0).job("j2", 0, 1, s, 0, 0).obj()
	out, err := Simulate(p, []time.Duration{0, 3 * s})
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Created != 3*s || out[1].Admitted != 3*s || out[1].Finished != 4*s {
		t.Errorf("late Job: %+v, want created, admitted at 3s and finished at 4s", out[1])
	}
	if _, err := Simulate(p, nil); err == nil {
		t.Error("want an error for missing arrivals")
	}
}

// TestSimulateInvariants checks random plans against properties any
// schedule must have: no Job starts before it arrives, ClusterQueue and
// cohort usage never pass their caps, the makespan is at least the work
// divided by the capacity, and every Job that can fit finishes.
func TestSimulateInvariants(t *testing.T) {
	for seed := range uint64(200) {
		p := randomPlan(seed, 1)
		out, err := Simulate(p, p.Arrivals())
		if err != nil {
			t.Fatal(err)
		}
		checkSchedule(t, seed, p, out)
	}
}

// randomPlan makes a small random plan: one to four ClusterQueues, most in
// one cohort, with random policies, and five to 34 Jobs.
func randomPlan(seed, stream uint64) *scenario.Plan {
	policies := []string{scenario.PolicyNever, scenario.PolicyLowerPriority, scenario.PolicyAny}
	r := rand.New(rand.NewPCG(seed, stream))
	b := plan()
	nq := 1 + r.IntN(4)
	for i := range nq {
		cohort := ""
		if r.IntN(3) > 0 {
			cohort = "c"
		}
		borrow := int64(-1)
		if cohort != "" && r.IntN(2) == 0 {
			borrow = r.Int64N(4)
		}
		b.queue(string(rune('a'+i)), cohort, 1+r.Int64N(4), borrow, policies[r.IntN(2)], policies[r.IntN(3)])
	}
	for i := range 5 + r.IntN(30) {
		b.job(string(rune('A'+i)), r.IntN(nq), 1+r.Int64N(3), time.Duration(1+r.IntN(4))*s/2, int32(r.IntN(3)), time.Duration(r.IntN(8))*s/4)
	}
	return b.obj()
}

func checkSchedule(t *testing.T, seed uint64, p *scenario.Plan, out []scenario.Outcome) {
	t.Helper()
	capacity := map[string]int64{}
	for _, q := range p.Queues {
		key := q.Cohort
		if key == "" {
			key = "queue " + q.Name
		}
		capacity[key] += q.NominalMilli
	}
	var work, total float64
	for qi, q := range p.Queues {
		total += float64(q.NominalMilli)
		limit := capacity[q.Cohort]
		if q.Cohort == "" {
			limit = q.NominalMilli
		}
		if q.Cohort != "" && q.BorrowingLimitMilli >= 0 {
			limit = min(limit, q.NominalMilli+q.BorrowingLimitMilli)
		}
		for i, j := range p.Jobs {
			o := out[i]
			if j.Queue != qi {
				continue
			}
			if j.CPUMilli > limit {
				if o.Admitted != scenario.Never {
					t.Errorf("seed %d: %s (%dm) admitted in %s, which holds at most %dm", seed, j.Name, j.CPUMilli, q.Name, limit)
				}
				continue
			}
			work += float64(j.CPUMilli) * j.Runtime.Seconds()
			if o.Finished == scenario.Never || o.Admitted < o.Created || o.Finished < o.Admitted+j.Runtime {
				t.Errorf("seed %d: %s: %+v (runtime %s)", seed, j.Name, o, j.Runtime)
			}
			if o.Held < j.Runtime {
				t.Errorf("seed %d: %s held quota %s, less than its runtime %s", seed, j.Name, o.Held, j.Runtime)
			}
		}
	}
	st := scenario.Compute(p, out)
	if st.Wall.Seconds()+1e-9 < work/total {
		t.Errorf("seed %d: makespan %s is below work/capacity %.3fs", seed, st.Wall, work/total)
	}
	if st.UsagePercent > 100+1e-9 {
		t.Errorf("seed %d: usage %.2f%% over 100%%", seed, st.UsagePercent)
	}
}

// The baseline's bound is 66 s of work for its quota. A zero-latency
// scheduler that never preempts finishes in about 67 s; with the baseline's
// preemption policies, large Jobs evict the medium ones that BestEffortFIFO
// let pass them, and the work thrown away makes it longer.
func TestSimulateBaseline(t *testing.T) {
	sc, err := scenario.Load("../../../bench/baseline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := sc.Expand()
	run := func(p *scenario.Plan) scenario.Stats {
		start := time.Now()
		out, err := Simulate(p, p.Arrivals())
		if err != nil {
			t.Fatal(err)
		}
		st := scenario.Compute(p, out)
		t.Logf("simulated in %s: makespan %s, usage %.1f%%, preemptions %d", time.Since(start), st.Wall, st.UsagePercent, st.Preemptions)
		for _, c := range st.Classes {
			t.Logf("  %s: avg %s p99 %s", c.Name, c.AvgTimeToAdmission, c.P99TimeToAdmission)
		}
		if st.Finished != len(p.Jobs) {
			t.Errorf("finished %d of %d", st.Finished, len(p.Jobs))
		}
		return st
	}
	plain := run(p.WithoutPreemption())
	if plain.Wall < 66*s || plain.Wall > 68*s || plain.Preemptions != 0 {
		t.Errorf("without preemption: makespan %s with %d preemptions, want 66s..68s and none", plain.Wall, plain.Preemptions)
	}
	policies := run(p)
	if policies.Wall < plain.Wall || policies.Preemptions == 0 || policies.Classes[2].AvgTimeToAdmission > plain.Classes[2].AvgTimeToAdmission {
		t.Errorf("with preemption: makespan %s, %d preemptions, large Jobs wait %s; want no shorter than %s, some preemptions, large Jobs waiting no longer than %s",
			policies.Wall, policies.Preemptions, policies.Classes[2].AvgTimeToAdmission, plain.Wall, plain.Classes[2].AvgTimeToAdmission)
	}
}
