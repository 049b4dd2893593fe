package perf

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

// testWriter sends progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmoke runs bench/smoke.yaml against a real API server and tally, to
// show the benchmark harness works: every Job is created, admitted and
// finished, and the summary holds sane values. It asserts no timings: a
// benchmark is not a test.
func TestSmoke(t *testing.T) { smoke(t, "smoke.yaml", false, false, false) }

// TestSmokeTopology runs bench/smoke-tas.yaml: the runner makes the
// topology's nodes, and tally admits every Job with one write that
// places its pods in the topology (its tally.dev/topology annotation).
func TestSmokeTopology(t *testing.T) { smoke(t, "smoke-tas.yaml", false, false, false) }

// TestSmokePods runs it with the runner playing the Jobs' pods
// (Options.Pods): each admitted Job's pod goes through tally's pod gate,
// which the API server calls once per pod, and the pods' ends (succeeded,
// or deleted when preempted) let every Job finish, as in TestSmoke.
func TestSmokePods(t *testing.T) { smoke(t, "smoke.yaml", false, false, true) }

// TestSmokeReplay runs the replay reference on bench/smoke.yaml: the replay admits
// every Job with one write per decision, as tally's user, and tally's
// ledger writes nothing at all.
func TestSmokeReplay(t *testing.T) { smoke(t, "smoke.yaml", true, false, false) }

// TestSmokeHeldReplay runs the held replay on bench/smoke.yaml: as the
// replay, and it never preempts and never holds more quota than the
// ClusterQueues and cohorts have, counted from each Job's admission to its
// completion as the runner saw them.
func TestSmokeHeldReplay(t *testing.T) { smoke(t, "smoke.yaml", true, true, false) }

func smoke(t *testing.T, file string, replay, held, pods bool) {
	assets, bin := os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("TALLY_BIN")
	if assets == "" || bin == "" {
		t.Skip("KUBEBUILDER_ASSETS and TALLY_BIN are not set: no control plane or tally to run (make test sets them)")
	}
	sc, err := scenario.Load(filepath.Join("..", "..", "bench", file))
	if err != nil {
		t.Fatal(err)
	}
	plan := sc.Expand()
	dir := t.TempDir()
	res, err := Run(context.Background(), Options{
		Plan: plan, Assets: assets, TallyBin: bin, Dir: dir, Replay: replay, HeldReplay: held, Pods: pods,
		Timeout: sc.Timeout.Duration, Progress: testWriter{t},
	})
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "unfinished.txt")); rerr == nil {
			t.Logf("Jobs that did not finish:\n%s", b)
		}
		t.Fatalf("run: %v", err)
	}
	sum, err := Summarize(plan, res)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := sum.Table(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	var problems []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	check(sum.Admitted == sum.Jobs && sum.Finished == sum.Jobs, "admitted %d and finished %d of %d Jobs", sum.Admitted, sum.Finished, sum.Jobs)
	check(sum.Admissions >= sum.Jobs, "%d admissions for %d Jobs", sum.Admissions, sum.Jobs)
	check(sum.Preemptions == sum.Admissions-sum.Jobs, "%d preemptions but %d re-admissions", sum.Preemptions, sum.Admissions-sum.Jobs)
	// Every Job's first admission write is in the audit log, and the
	// runner's watch saw it after the API server answered it, or at most a
	// moment before the log's time for the answer: within seconds on a
	// run this small.
	low, high := scenario.Percentile(res.ViewDelays, 0), scenario.Percentile(res.ViewDelays, 100)
	check(len(res.ViewDelays) == sum.Jobs && low > -time.Second && high < 5*time.Second,
		"the runner's watch delay measured for %d of %d Jobs, from %v to %v", len(res.ViewDelays), sum.Jobs, low, high)
	check(sum.WallSeconds > 0 && sum.IdealMakespanSeconds >= sum.WorkSeconds && sum.IdealActualMakespanSeconds > 0,
		"wall %.2fs, ideal makespan %.2fs (work %.2fs), ideal with actual creations %.2fs", sum.WallSeconds, sum.IdealMakespanSeconds, sum.WorkSeconds, sum.IdealActualMakespanSeconds)
	// The runner holds a Job's quota from seeing it admitted to completing
	// it, within the time tally holds it, so usage cannot pass 100%; the
	// replay evicts nothing, so it can.
	check(sum.UsagePercent > 0 && (replay || sum.UsagePercent <= 100), "usage %.1f%%", sum.UsagePercent)
	check(sum.IdealUsagePercent > 0 && sum.IdealUsagePercent <= 100, "ideal usage %.1f%%", sum.IdealUsagePercent)
	// The contract allows one write per admission and per preemption, and
	// the finished label on each Job. A Job placed in a topology has its
	// pod template pinned to its domains; once a preemption stopped it,
	// a second write gives the template back its flavors' affinity (the
	// Job API lets the template change only then).
	perPreemption := 1
	if plan.Topology != nil {
		perPreemption = 2
	}
	check(sum.WritesPerAdmission >= 1 && sum.Requests.Writes <= sum.Admissions+perPreemption*max(sum.Preemptions, sum.TallyPreemptions)+sum.Jobs+len(plan.Queues),
		"%d writes (%.2f per admission) for %d admissions, %d preemptions and %d Jobs: %v",
		sum.Requests.Writes, sum.WritesPerAdmission, sum.Admissions, sum.Preemptions, sum.Jobs, sum.Requests.ByKind)
	check(sum.APIRequestsPerJob > 0, "API requests per Job %.2f", sum.APIRequestsPerJob)
	if replay {
		// Every write is the replay's: one admission per Job, none of
		// them failed; tally's ledger never ran.
		check(res.ReplayFailures == 0, "%d of the replay reference's writes failed", res.ReplayFailures)
		check(sum.Scheduler == "replay", "scheduler %q", sum.Scheduler)
		check(sum.Admissions == sum.Jobs && sum.Preemptions == 0 && sum.Requests.Writes == sum.Jobs &&
			sum.Requests.WritesByManager[queues.FieldManagerAdmission] == sum.Jobs && sum.TallyLabelledFinished == 0,
			"replay: %d writes (%v) for %d Jobs, %d admissions and %d preemptions, %d Jobs labelled finished",
			sum.Requests.Writes, sum.Requests.WritesByManager, sum.Jobs, sum.Admissions, sum.Preemptions, sum.TallyLabelledFinished)
		check(sum.ReplayHeld == held, "replayHeld %t in a run with HeldReplay %t", sum.ReplayHeld, held)
	}
	if pods {
		check(res.Pods == sum.Admissions && sum.Pods == res.Pods && sum.WebhookCalls["pods.tally.dev"] >= res.Pods,
			"%d pods made for %d admissions, %d calls of the pod gate (%d pod retries)", res.Pods, sum.Admissions, sum.WebhookCalls["pods.tally.dev"], res.PodRetries)
	}
	if plan.Topology != nil {
		check(res.Placed == res.Admissions && sum.Placed == res.Placed && sum.Nodes == plan.Topology.NodeCount(),
			"%d of %d admissions placed in the topology's %d nodes (summary: %d of %d nodes)", res.Placed, res.Admissions, plan.Topology.NodeCount(), sum.Placed, sum.Nodes)
	}
	if held {
		check(sum.UsagePercent <= 100, "held replay: usage %.1f%%", sum.UsagePercent)
		for _, p := range overQuota(plan, res.Outcomes) {
			check(false, "held replay: %s", p)
		}
	}
	check(sum.TallyCPUSeconds > 0 && sum.TallyCPUSecondsTotal >= sum.TallyCPUSeconds, "tally CPU %.2fs in the run, %.2fs in all", sum.TallyCPUSeconds, sum.TallyCPUSecondsTotal)
	check(sum.TallyPeakRSSBytes > 1<<20, "tally peak RSS %d bytes", sum.TallyPeakRSSBytes)
	check(len(sum.Classes) == len(sc.Classes), "%d classes in the summary, want %d", len(sum.Classes), len(sc.Classes))
	for _, c := range sc.Classes {
		cs := sum.Classes[c.Name]
		check(cs.Jobs > 0 && cs.Admitted == cs.Jobs && cs.AvgTimeToAdmissionSeconds >= 0 && cs.P99TimeToAdmissionSeconds >= 0,
			"class %s: %+v", c.Name, cs)
	}
	if len(problems) > 0 {
		t.Errorf("the summary is not sane:\n  %s", strings.Join(problems, "\n  "))
	}

	path, err := sum.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := yaml.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"wallSeconds", "idealMakespanSeconds", "usagePercent", "idealUsagePercent", "writesPerAdmission",
		"preemptions", "tallyCPUSeconds", "tallyPeakRSSBytes", "apiRequestsPerJob", "classes"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("%s has no %s", path, k)
		}
	}
	classes, _ := fields["classes"].(map[string]any)
	for _, c := range sc.Classes {
		cls, _ := classes[c.Name].(map[string]any)
		for _, k := range []string{"avgTimeToAdmissionSeconds", "p99TimeToAdmissionSeconds", "idealAvgTimeToAdmissionSeconds"} {
			if _, ok := cls[k]; !ok {
				t.Errorf("%s: class %s has no %s", path, c.Name, k)
			}
		}
	}
}

// overQuota says where the Jobs, each holding its quota from its
// admission to its completion, ever held more than a ClusterQueue's
// nominal quota and borrowing limit, or than a cohort's nominal quota.
func overQuota(p *scenario.Plan, out []scenario.Outcome) []string {
	type change struct {
		at  time.Duration
		job int
		cpu int64
	}
	var changes []change
	for i, o := range out {
		if o.Admitted != scenario.Never && o.Finished != scenario.Never {
			cpu := p.Jobs[i].CPUMilli
			changes = append(changes, change{o.Admitted, i, cpu}, change{o.Finished, i, -cpu})
		}
	}
	// At the same instant a completion comes first.
	slices.SortFunc(changes, func(a, b change) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.cpu, b.cpu)) })
	// A ClusterQueue in no cohort is a cohort of its own.
	cohort := func(q scenario.ClusterQueue) string {
		if q.Cohort == "" {
			return "(" + q.Name + ")"
		}
		return q.Cohort
	}
	byQueue := make([]int64, len(p.Queues))
	byCohort, capacity := map[string]int64{}, map[string]int64{}
	for _, q := range p.Queues {
		capacity[cohort(q)] += q.NominalMilli
	}
	var problems []string
	for _, c := range changes {
		qi := p.Jobs[c.job].Queue
		q := p.Queues[qi]
		byQueue[qi] += c.cpu
		co := cohort(q)
		byCohort[co] += c.cpu
		if c.cpu < 0 {
			continue
		}
		if limit := q.NominalMilli + q.BorrowingLimitMilli; q.Cohort != "" && q.BorrowingLimitMilli >= 0 && byQueue[qi] > limit {
			problems = append(problems, fmt.Sprintf("at %s, ClusterQueue %s held %dm of %dm", c.at, q.Name, byQueue[qi], limit))
		}
		if byCohort[co] > capacity[co] {
			problems = append(problems, fmt.Sprintf("at %s, cohort %s held %dm of %dm", c.at, co, byCohort[co], capacity[co]))
		}
	}
	return problems
}
