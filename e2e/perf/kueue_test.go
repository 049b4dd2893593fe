package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally.dev/tally/e2e/perf/scenario"
)

// Kueue's test/performance/scheduler/configs/baseline/generator.yaml
// (v0.17.1), quantities as numbers the way it writes them.
const kueueBaseline = `
cohorts:
- className: cohort
  count: 5
  queuesSets:
  - className: cq
    count: 6
    nominalQuota: 20
    borrowingLimit: 100
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - {count: 350, creationIntervalMs: 100, workloads: [{className: small, runtimeMs: 200, priority: 50, request: 1}]}
    - {count: 100, creationIntervalMs: 500, workloads: [{className: medium, runtimeMs: 500, priority: 100, request: 5}]}
    - {count: 50, creationIntervalMs: 1200, workloads: [{className: large, runtimeMs: 1000, priority: 200, request: 20}]}
`

// bench/baseline.yaml is Kueue's baseline, and a change to either shows.
func TestKueueGeneratorBaseline(t *testing.T) {
	sc, err := scenario.Load(filepath.Join("..", "..", "bench", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := KueueGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	same, err := SameKueueGenerator(gen, []byte(kueueBaseline))
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Errorf("bench/baseline.yaml as Kueue's generator config:\n%s\nis not Kueue's baseline:\n%s", gen, kueueBaseline)
	}
	other := strings.Replace(kueueBaseline, "runtimeMs: 500", "runtimeMs: 501", 1)
	if same, err := SameKueueGenerator(gen, []byte(other)); err != nil || same {
		t.Errorf("a different runtime compares the same (%v)", err)
	}
}

// What Kueue's generator cannot express is refused, with the field.
func TestKueueGeneratorRefuses(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
name: alone
cohorts: 0
clusterQueuesPerCohort: 2
queueingStrategy: StrictFIFO
quota: {nominal: "2"}
classes:
- {name: short, count: 3, interval: 0s, cpu: "1", runtime: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = KueueGenerator(sc)
	for _, want := range []string{"scenario alone: cohorts: ", "queueingStrategy: Kueue's generator has no StrictFIFO"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// Kueue's runner output is read and set beside tally's summary.
func TestKueueCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadKueue(dir); err == nil {
		t.Fatal("ReadKueue of an empty folder: no error")
	}
	// Two 2-cpu queues (4000 mCPU) held 2000 mCPU on average over 10s.
	write("summary.yaml", `
clusterQueueClasses:
  cq:
    cpuAverageUsage: 2000
    cpuUsed: 20000000
    firstEventTime: "2026-11-24T20:00:00Z"
    lastEventTime: "2026-11-24T20:00:10Z"
    nominalQuota: 4000
droppedWorkloadEvents: 0
workloadClasses:
  short:
    averageTimeToAdmissionMs: 1500
    averageTimeToFinishMs: 2500
    count: 6
    totalEvictions: 2
  long:
    averageTimeToAdmissionMs: 4000
    averageTimeToFinishMs: 6000
    count: 2
    totalEvictions: 1
`)
	write("minimalkueue.stats.yaml", "wallMs: 12000\nuserMs: 3000\nsysMs: 500\nmaxrss: 102400\n")
	k, err := ReadKueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k.Makespan().Seconds() != 10 || k.UsagePercent() != 50 || k.Evictions() != 3 {
		t.Errorf("makespan %s usage %.2f evictions %d", k.Makespan(), k.UsagePercent(), k.Evictions())
	}

	p, outcomes := tinyIdeal(t)
	bound := scenario.Compute(p, outcomes)
	tally := &Summary{WallSeconds: 5, FloorWallSeconds: 4.5, UsagePercent: 80, Preemptions: 1, TallyCPUSecondsTotal: 1.75, TallyPeakRSSBytes: 50 << 20,
		Classes: map[string]ClassSummary{"short": {AvgTimeToAdmissionSeconds: 0.5, FloorAvgTimeToAdmissionSeconds: 0.4}, "long": {AvgTimeToAdmissionSeconds: 2, FloorAvgTimeToAdmissionSeconds: 1.8}}}
	var b strings.Builder
	if err := CompareTable(&b, p, bound, tally, k, "v0.17.1"); err != nil {
		t.Fatal(err)
	}
	// The columns: tally, kueue, ideal, floor, kueue / tally.
	table := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"Kueue v0.17.1", "wall / makespan (s) 5.00 10.00 4.00 4.50 ×2.00", "usage (%) 80.0 50.0 87.5 ×0.62",
		"preemptions 1 3 0 short", "short avg time to admission (s) 0.50 1.50 0.33 0.40 ×3.00", "long avg time to admission (s) 2.00 4.00 1.50 1.80 ×2.00",
		"scheduler CPU (s) 1.8 3.5 ×2.00", "scheduler peak RSS (MiB) 50 100 ×2.00", "minimalkueue ran 12.0s"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := CompareTable(&b, p, bound, nil, k, "v0.17.1"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "`make bench` measures it") || strings.Contains(b.String(), "×") {
		t.Errorf("table without tally:\n%s", b.String())
	}
}
