package scenario_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

func benchDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "bench")
}

// The scenario files load, expand to the Jobs they promise, and render a
// config that tally's own parser accepts.
func TestScenarioFiles(t *testing.T) {
	cases := []struct {
		file              string
		jobs, queues      int
		workSecondsPerCPU float64
	}{
		{"baseline.yaml", 15000, 30, 66},
		{"large.yaml", 50000, 1000, 66},
		{"smoke.yaml", 300, 4, 5.25},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			s, err := scenario.Load(filepath.Join(benchDir(), tc.file))
			if err != nil {
				t.Fatal(err)
			}
			p := s.Expand()
			if len(p.Jobs) != tc.jobs || len(p.Queues) != tc.queues {
				t.Errorf("%d jobs in %d queues, want %d in %d", len(p.Jobs), len(p.Queues), tc.jobs, tc.queues)
			}
			if got := p.WorkSeconds() / (float64(p.NominalMilli()) / 1000); got < tc.workSecondsPerCPU-1e-9 || got > tc.workSecondsPerCPU+1e-9 {
				t.Errorf("work / quota = %.3fs, want %.3fs", got, tc.workSecondsPerCPU)
			}
			for i := 1; i < len(p.Jobs); i++ {
				if p.Jobs[i].Arrival < p.Jobs[i-1].Arrival {
					t.Fatalf("jobs not sorted by arrival at %d", i)
				}
			}
			cfg, warnings, errs := queues.Parse([]byte(p.Config()))
			if len(errs) > 0 || len(warnings) > 0 {
				t.Fatalf("config rejected: %v %v\n%s", errs, warnings, p.Config())
			}
			if len(cfg.ClusterQueues) != tc.queues || len(cfg.PriorityClasses) != len(s.Classes) {
				t.Errorf("config has %d ClusterQueues and %d priority classes", len(cfg.ClusterQueues), len(cfg.PriorityClasses))
			}
		})
	}
}

func TestExpand(t *testing.T) {
	s, err := scenario.Parse([]byte(`
name: t
cohorts: 2
clusterQueuesPerCohort: 1
quota: {nominal: 1500m}
classes:
- {name: a, count: 2, interval: 1s, cpu: 250m, runtime: 3s, priority: 7}
- {name: b, count: 1, interval: 0s, cpu: "2", runtime: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Expand()
	var got []string
	for _, j := range p.Jobs {
		q := p.Queues[j.Queue]
		got = append(got, q.Cohort+"/"+q.Name+"/"+j.Namespace+"/"+j.Name+"@"+j.Arrival.String())
	}
	want := "cohort-0/cq-0-0/bench-0-0/a-0@0s cohort-0/cq-0-0/bench-0-0/b-0@0s cohort-1/cq-1-0/bench-1-0/a-0@0s cohort-1/cq-1-0/bench-1-0/b-0@0s " +
		"cohort-0/cq-0-0/bench-0-0/a-1@1s cohort-1/cq-1-0/bench-1-0/a-1@1s"
	if strings.Join(got, " ") != want {
		t.Errorf("jobs:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	j := p.Jobs[0]
	if j.CPUMilli != 250 || j.Runtime != 3*time.Second || j.Priority != 7 || p.Queues[0].NominalMilli != 1500 || p.Queues[0].BorrowingLimitMilli != -1 {
		t.Errorf("job %+v queue %+v", j, p.Queues[0])
	}
	if p.Queues[0].WithinClusterQueue != scenario.PolicyNever || p.Queues[0].ReclaimWithinCohort != scenario.PolicyNever {
		t.Errorf("policies default to Never, got %+v", p.Queues[0])
	}
	if !strings.Contains(p.Config(), "{name: cpu, nominalQuota: 1500m}") {
		t.Errorf("config without borrowing limit:\n%s", p.Config())
	}
}

func TestValidate(t *testing.T) {
	_, err := scenario.Parse([]byte(`
name: ""
cohorts: 0
clusterQueuesPerCohort: 0
quota: {nominal: "1", borrowingLimit: "1"}
preemption: {withinClusterQueue: Any, reclaimWithinCohort: Sometimes}
queueingStrategy: Random
classes:
- {name: A, count: 0, interval: 1s, cpu: "0", runtime: 0s}
- {name: A, count: 1, interval: 1s, cpu: "1", runtime: 1s}
`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		"name: required",
		"clusterQueuesPerCohort: must be positive",
		"quota.borrowingLimit: must not be set without cohorts",
		`preemption.withinClusterQueue: "Any" is not Never or LowerPriority`,
		`preemption.reclaimWithinCohort: "Sometimes"`,
		`queueingStrategy: "Random"`,
		`classes[0].name: "A" is not a lowercase DNS label`,
		"classes[0].count: must be positive",
		"classes[0].cpu: must be positive",
		"classes[0].runtime: must be positive",
		`classes[1].name: "A" is repeated`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, err := scenario.Parse([]byte("name: x\nunknownField: 1\n")); err == nil || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("unknown fields must be rejected, got %v", err)
	}
}
