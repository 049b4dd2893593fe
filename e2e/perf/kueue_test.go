package perf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// Kueue's test/performance/scheduler/configs/baseline/generator.yaml
// (the same in v0.17.1 and v0.19.2), quantities as numbers the way it
// writes them.
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

// sameAsKueue checks that scenario bench/file names Kueue's config
// config, and, written as Kueue's generator config, is the same work as
// kueue, that config's generator.yaml, and not as kueue with any one of
// changes made (each an old and a new text; the first old one is
// replaced).
func sameAsKueue(t *testing.T, file, config, kueue string, changes [][2]string) {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "..", "bench", file))
	if err != nil {
		t.Fatal(err)
	}
	if sc.KueueConfig != config {
		t.Errorf("bench/%s: kueueConfig %q, want %q", file, sc.KueueConfig, config)
	}
	gen, err := KueueGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	same, err := SameKueueGenerator(gen, []byte(kueue))
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Errorf("bench/%s as Kueue's generator config:\n%s\nis not Kueue's:\n%s", file, gen, kueue)
	}
	for _, change := range changes {
		other := strings.Replace(kueue, change[0], change[1], 1)
		if other == kueue {
			t.Fatalf("%q is not in Kueue's config", change[0])
		}
		if same, err := SameKueueGenerator(gen, []byte(other)); err != nil || same {
			t.Errorf("%s for %s compares the same (%v)", change[1], change[0], err)
		}
	}
}

// bench/baseline.yaml is Kueue's baseline, and a change to either shows.
func TestKueueGeneratorBaseline(t *testing.T) {
	sameAsKueue(t, "baseline.yaml", "baseline", kueueBaseline, [][2]string{{"runtimeMs: 500", "runtimeMs: 501"}})
}

// Kueue's test/performance/scheduler/configs/tas/generator.yaml of
// v0.19.2, its comments left out.
const kueueTAS = `
topology:
  name: default-topology
  levels:
  - {name: block, count: 1, nodeLabel: cloud.provider.com/topology-block}
  - {name: rack, count: 10, nodeLabel: cloud.provider.com/topology-rack}
  - {name: node, count: 64, nodeLabel: kubernetes.io/hostname, capacity: {cpu: "96", memory: 256Gi}}
resourceFlavor: {name: tas-flavor, nodeLabel: tas-node-group, topologyName: default-topology}
cohorts:
- className: cohort
  count: 5
  queuesSets:
  - className: cq
    count: 6
    nominalQuota: "20"
    borrowingLimit: "100"
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - {count: 120, creationIntervalMs: 100, workloads: [{className: small-required-rack, runtimeMs: 200, priority: 50, request: 500m, podCount: 2, tasConstraint: required, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 120, creationIntervalMs: 100, workloads: [{className: small-preferred-rack, runtimeMs: 200, priority: 50, request: 500m, podCount: 2, tasConstraint: preferred, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 110, creationIntervalMs: 100, workloads: [{className: small-balanced-rack, runtimeMs: 200, priority: 50, request: 500m, podCount: 2, tasConstraint: balanced, tasLevel: cloud.provider.com/topology-rack, sliceSize: 1}]}
    - {count: 34, creationIntervalMs: 500, workloads: [{className: medium-required-rack, runtimeMs: 500, priority: 100, request: 1250m, podCount: 4, tasConstraint: required, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 33, creationIntervalMs: 500, workloads: [{className: medium-preferred-rack, runtimeMs: 500, priority: 100, request: 1250m, podCount: 4, tasConstraint: preferred, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 33, creationIntervalMs: 500, workloads: [{className: medium-balanced-rack, runtimeMs: 500, priority: 100, request: 1250m, podCount: 4, tasConstraint: balanced, tasLevel: cloud.provider.com/topology-rack, sliceSize: 2}]}
    - {count: 17, creationIntervalMs: 1200, workloads: [{className: large-required-rack, runtimeMs: 1000, priority: 200, request: 2500m, podCount: 8, tasConstraint: required, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 17, creationIntervalMs: 1200, workloads: [{className: large-preferred-rack, runtimeMs: 1000, priority: 200, request: 2500m, podCount: 8, tasConstraint: preferred, tasLevel: cloud.provider.com/topology-rack}]}
    - {count: 16, creationIntervalMs: 1200, workloads: [{className: large-balanced-rack, runtimeMs: 1000, priority: 200, request: 2500m, podCount: 8, tasConstraint: balanced, tasLevel: cloud.provider.com/topology-rack, sliceSize: 4}]}
`

// bench/tas.yaml is Kueue's TAS scenario: topology, nodes, flavor and
// placements included.
func TestKueueGeneratorTAS(t *testing.T) {
	sameAsKueue(t, "tas.yaml", "tas", kueueTAS, [][2]string{
		{"sliceSize: 2", "sliceSize: 1"},
		{"tasConstraint: preferred", "tasConstraint: required"},
		{"podCount: 8", "podCount: 4"},
		{"count: 64", "count: 32"},
		{`memory: 256Gi`, `memory: 128Gi`},
		{"nodeLabel: tas-node-group", "nodeLabel: other"},
	})
}

// Kueue's test/performance/scheduler/configs/large-scale/generator.yaml
// of v0.19.2, its comments left out.
const kueueLargeScale = `
cohorts:
  - className: cohort
    count: 10
    queuesSets:
    - className: cq
      count: 100
      nominalQuota: 20
      borrowingLimit: 100
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 35
        creationIntervalMs: 60
        workloads:
        - className: small
          runtimeMs: 150
          priority: 50
          request: 1
      - count: 11
        creationIntervalMs: 300
        workloads:
        - className: medium
          runtimeMs: 350
          priority: 100
          request: 5
      - count: 4
        creationIntervalMs: 700
        workloads:
        - className: large
          runtimeMs: 700
          priority: 200
          request: 20
`

// bench/kueue-large-scale.yaml is Kueue's large-scale scenario.
func TestKueueGeneratorLargeScale(t *testing.T) {
	sameAsKueue(t, "kueue-large-scale.yaml", "large-scale", kueueLargeScale, [][2]string{
		{"count: 100", "count: 50"},
		{"creationIntervalMs: 60", "creationIntervalMs: 100"},
		{"runtimeMs: 350", "runtimeMs: 500"},
		{"count: 4", "count: 5"},
	})
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

	// Kueue's checker's bounds: the wall time is missed, the rest met.
	spec := &KueueRangeSpec{ClusterQueueClassesMinUsage: map[string]float64{"cq": 40}, WlClassesMaxAvgTimeToAdmissionMs: map[string]int64{"short": 2000, "long": 5000}}
	spec.Cmd.MaxWallMs = 11000
	res := &KueueResult{Own: k, Wall: 12 * time.Second}
	var missed []string
	for _, c := range spec.Check(res) {
		if !c.Met {
			missed = append(missed, c.Name)
		}
	}
	if len(missed) != 1 || missed[0] != "minimalkueue wall time (ms)" {
		t.Errorf("missed %v, want only the wall time", missed)
	}

	p, outcomes := tinyIdeal(t)
	bound := scenario.Compute(p, outcomes)
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	res.Start, res.End, res.Evictions, res.Admissions = t0, at(10), 3, 11
	// A "short" Workload admitted at 1s, evicted and admitted again at
	// 3s; another at 2s.
	res.Sightings = []sighting{{class: 0, seen: t0, first: at(1), last: at(3)}, {class: 0, seen: t0, first: at(2), last: at(2)}}
	res.Requests = Requests{Total: 40, Writes: 22, ByKind: map[string]int{"patch workloads/status": 22}}
	cmp := &Comparison{Scenario: "tiny", KueueConfig: "tiny-kueue", Jobs: len(p.Jobs), APIServerFlags: APIServerFlagsString(), Ideal: IdealFigures{WallSeconds: bound.Wall.Seconds()}}
	kc := &Contender{Name: "kueue", Binary: "minimalkueue", Version: "v0.17.1", Budget: "QPS 50, burst 100"}
	for range 3 {
		kc.Runs = append(kc.Runs, KueueRun(p, res, spec.Check(res)))
	}
	kc.Runs[1].WallSeconds, kc.Runs[2].WallSeconds = 8, 14
	cmp.Contenders = []*Contender{kc, {Name: "tally", Binary: "tally", Budget: "QPS 500, burst 1000", Failed: []string{"timed out"}}}
	var b strings.Builder
	if err := cmp.Table(&b, []string{p.Classes[0].Name}); err != nil {
		t.Fatal(err)
	}
	table := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"wall (s) 10.0 [8.0–14.0] - ", p.Classes[0].Name + " TTA, first admission (s) 1.5 -", p.Classes[0].Name + " TTA, last admission (s) 2.5 -",
		"preemptions 3 -", "scheduler writes (all but Events) 22 -", "per admission 2.00 -", "--max-requests-inflight=5000", "(1 failed: timed out)",
		"Kueue's own configs/tiny-kueue/rangespec.yaml (its checker's bounds): MISSED: run 1: minimalkueue wall time (ms) 12000, bound 11000"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
