package ideal

import (
	"testing"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// TestSimulateCoreInvariants runs random plans through tally's core: the
// schedule it makes has the properties any schedule must have.
func TestSimulateCoreInvariants(t *testing.T) {
	for seed := range uint64(200) {
		p := randomPlan(seed, 2)
		out, err := SimulateCore(p, p.Arrivals(), 0)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkSchedule(t, seed, p, out)
	}
}

// On the baseline, tally's decisions with no latency come within 2% of
// the ideal scheduler's makespan, and within 2 s of its average time to
// admission per class: what tally loses in a real run is latency, not
// decisions.
func TestSimulateCoreBaseline(t *testing.T) {
	sc, err := scenario.Load("../../../bench/baseline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := sc.Expand()
	out, err := Simulate(p, p.Arrivals())
	if err != nil {
		t.Fatal(err)
	}
	best := scenario.Compute(p, out)
	start := time.Now()
	out, err = SimulateCore(p, p.Arrivals(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	core := scenario.Compute(p, out)
	t.Logf("core simulated in %s: makespan %s (ideal %s), usage %.1f%% (ideal %.1f%%), preemptions %d", time.Since(start), core.Wall, best.Wall, core.UsagePercent, best.UsagePercent, core.Preemptions)
	if core.Finished != len(p.Jobs) {
		t.Errorf("finished %d of %d", core.Finished, len(p.Jobs))
	}
	if core.Wall > best.Wall*102/100 {
		t.Errorf("core makespan %s, more than 2%% over the ideal %s", core.Wall, best.Wall)
	}
	for i, c := range core.Classes {
		t.Logf("  %s: avg %s (ideal %s)", c.Name, c.AvgTimeToAdmission, best.Classes[i].AvgTimeToAdmission)
		if c.AvgTimeToAdmission > best.Classes[i].AvgTimeToAdmission+2*time.Second {
			t.Errorf("%s: core avg time to admission %s, more than 2s over the ideal %s", c.Name, c.AvgTimeToAdmission, best.Classes[i].AvgTimeToAdmission)
		}
	}
}
