package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/scenario"
)

// The generator config of Kueue's scheduler-performance runner
// (test/performance/scheduler/runner/generator of sigs.k8s.io/kueue), as
// far as a scenario uses it. Quantities are strings there.
type (
	kueueGenerator struct {
		Cohorts []kueueCohortSet `json:"cohorts"`
	}
	kueueCohortSet struct {
		ClassName  string           `json:"className"`
		Count      int              `json:"count"`
		QueuesSets []kueueQueuesSet `json:"queuesSets"`
	}
	kueueQueuesSet struct {
		ClassName           string              `json:"className"`
		Count               int                 `json:"count"`
		NominalQuota        string              `json:"nominalQuota"`
		BorrowingLimit      string              `json:"borrowingLimit,omitempty"`
		ReclaimWithinCohort string              `json:"reclaimWithinCohort"`
		WithinClusterQueue  string              `json:"withinClusterQueue"`
		WorkloadsSets       []kueueWorkloadsSet `json:"workloadsSets"`
	}
	kueueWorkloadsSet struct {
		Count              int             `json:"count"`
		CreationIntervalMs int64           `json:"creationIntervalMs"`
		Workloads          []kueueWorkload `json:"workloads"`
	}
	kueueWorkload struct {
		ClassName string `json:"className"`
		RuntimeMs int64  `json:"runtimeMs"`
		Priority  int32  `json:"priority"`
		Request   string `json:"request"`
	}
)

// KueueGenerator writes the scenario as a generator config for Kueue's
// runner: the same cohorts, ClusterQueues, quotas, policies and classes.
// Kueue's generator always puts its ClusterQueues in cohorts and leaves
// their queueing strategy at BestEffortFIFO, so a scenario without
// cohorts, or with StrictFIFO, has no Kueue equivalent.
//
// One difference stays: Kueue's generator waits an interval before each
// Workload of a class, counted from the return of the previous create, so
// the k-th is due at (k+1)×interval at the earliest, later when creates
// are slow, where the scenario's Job is due at k×interval.
func KueueGenerator(s *scenario.Scenario) ([]byte, error) {
	var errs []error
	if s.Cohorts == 0 {
		errs = append(errs, errors.New("cohorts: Kueue's generator puts every ClusterQueue in a cohort; 0 has no equivalent"))
	}
	if s.QueueingStrategy == scenario.StrictFIFO {
		errs = append(errs, errors.New("queueingStrategy: Kueue's generator has no StrictFIFO"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	q := kueueQueuesSet{
		ClassName:           "cq",
		Count:               s.ClusterQueuesPerCohort,
		NominalQuota:        s.Quota.Nominal.String(),
		ReclaimWithinCohort: orNever(s.Preemption.ReclaimWithinCohort),
		WithinClusterQueue:  orNever(s.Preemption.WithinClusterQueue),
	}
	if s.Quota.BorrowingLimit != nil {
		q.BorrowingLimit = s.Quota.BorrowingLimit.String()
	}
	for _, c := range s.Classes {
		q.WorkloadsSets = append(q.WorkloadsSets, kueueWorkloadsSet{
			Count:              c.Count,
			CreationIntervalMs: c.Interval.Milliseconds(),
			Workloads: []kueueWorkload{{
				ClassName: c.Name, RuntimeMs: c.Runtime.Milliseconds(), Priority: c.Priority, Request: c.CPU.String(),
			}},
		})
	}
	return yaml.Marshal(kueueGenerator{Cohorts: []kueueCohortSet{{ClassName: "cohort", Count: s.Cohorts, QueuesSets: []kueueQueuesSet{q}}}})
}

func orNever(policy string) string {
	if policy == "" {
		return scenario.PolicyNever
	}
	return policy
}

// SameKueueGenerator tells whether two generator configs describe the
// same work (Kueue's own file writes quantities as numbers, comments and
// all).
func SameKueueGenerator(a, b []byte) (bool, error) {
	var ga, gb kueueGenerator
	if err := yaml.Unmarshal(a, &ga); err != nil {
		return false, err
	}
	if err := yaml.Unmarshal(b, &gb); err != nil {
		return false, err
	}
	return reflect.DeepEqual(ga, gb), nil
}

// KueueOptions says how to run Kueue's scheduler-performance runner.
type KueueOptions struct {
	// Tools is the folder e2e/toolchain/build.sh builds kueue-perf into:
	// runner, minimalkueue, crds/, configs/ and VERSION.
	Tools string
	// Assets holds the etcd and kube-apiserver the runner's envtest
	// starts.
	Assets string
	// Generator is the generator config file; Dir gets the runner's
	// output and logs.
	Generator, Dir string
	Timeout        time.Duration
}

// RunKueue runs Kueue's runner with minimalkueue, as Kueue's `make
// run-performance-scheduler` does (minimalkueue's logs at level 2 in
// files, no metrics scraping), with the runner's clients at 1000 QPS
// (burst 2000) as in Kueue's in-cluster target, so that they are not what
// limits it. minimalkueue keeps its own client limits (50 QPS, burst
// 100).
func RunKueue(ctx context.Context, o KueueOptions) (*KueueSummary, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "runner.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(o.Tools, "runner"),
		"--o", o.Dir, "--crds", filepath.Join(o.Tools, "crds"), "--generatorConfig", o.Generator,
		"--minimalKueue", filepath.Join(o.Tools, "minimalkueue"), "--withLogs=true", "--logToFile=true",
		"--qps=1000", "--burst=2000", "--timeout", o.Timeout.String())
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+o.Assets)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s (its log: %s): %w", cmd.Path, logf.Name(), err)
	}
	return ReadKueue(o.Dir)
}

// KueueSummary is what Kueue's runner reports: summary.yaml (recorder
// Summary) and minimalkueue.stats.yaml (stats CmdStats).
type KueueSummary struct {
	ClusterQueueClasses map[string]struct {
		CPUUsed        int64     `json:"cpuUsed"`
		NominalQuota   int64     `json:"nominalQuota"`
		FirstEventTime time.Time `json:"firstEventTime"`
		LastEventTime  time.Time `json:"lastEventTime"`
	} `json:"clusterQueueClasses"`
	WorkloadClasses map[string]struct {
		Count                    int   `json:"count"`
		TotalEvictions           int   `json:"totalEvictions"`
		AverageTimeToAdmissionMs int64 `json:"averageTimeToAdmissionMs"`
	} `json:"workloadClasses"`
	DroppedWorkloadEvents int `json:"droppedWorkloadEvents"`
	Cmd                   struct {
		WallMs int64 `json:"wallMs"`
		UserMs int64 `json:"userMs"`
		SysMs  int64 `json:"sysMs"`
		// Maxrss is in KiB, as getrusage gives it on Linux.
		Maxrss int64 `json:"maxrss"`
	} `json:"-"`
}

// ReadKueue reads the summary Kueue's runner wrote in dir.
func ReadKueue(dir string) (*KueueSummary, error) {
	s := &KueueSummary{}
	for _, f := range []struct {
		name string
		into any
	}{{"summary.yaml", s}, {"minimalkueue.stats.yaml", &s.Cmd}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, f.into); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f.name), err)
		}
	}
	if len(s.ClusterQueueClasses) == 0 || len(s.WorkloadClasses) == 0 {
		return nil, fmt.Errorf("%s: no ClusterQueue or Workload classes", filepath.Join(dir, "summary.yaml"))
	}
	return s, nil
}

// Makespan is the span of the ClusterQueue events Kueue's recorder saw
// (the first ClusterQueue's creation to the last one going idle), the
// nearest to tally's wall time: first creation to last completion.
func (k *KueueSummary) Makespan() time.Duration {
	var first, last time.Time
	for _, c := range k.ClusterQueueClasses {
		if first.IsZero() || c.FirstEventTime.Before(first) {
			first = c.FirstEventTime
		}
		if c.LastEventTime.After(last) {
			last = c.LastEventTime
		}
	}
	return last.Sub(first)
}

// UsagePercent is quota held over nominal quota × Makespan, as Kueue's
// checker computes it.
func (k *KueueSummary) UsagePercent() float64 {
	var used, quota float64
	for _, c := range k.ClusterQueueClasses {
		used += float64(c.CPUUsed)
		quota += float64(c.NominalQuota)
	}
	ms := float64(k.Makespan().Milliseconds())
	if quota == 0 || ms == 0 {
		return 0
	}
	return 100 * used / (quota * ms)
}

// Evictions is the number of evictions Kueue's recorder counted.
func (k *KueueSummary) Evictions() int {
	n := 0
	for _, c := range k.WorkloadClasses {
		n += c.TotalEvictions
	}
	return n
}

// CompareTable writes tally's summary (nil: not measured) and Kueue's
// side by side, with the ideal scheduler's figures for the plan.
func CompareTable(w io.Writer, p *scenario.Plan, ideal scenario.Stats, tally *Summary, k *KueueSummary, version string) error {
	fmt.Fprintf(w, "scenario %s: %d Jobs in %d ClusterQueues; tally runs Jobs, Kueue %s (minimalkueue: its core controllers and scheduler) runs Workloads\n", p.Name, len(p.Jobs), len(p.Queues), version)
	fmt.Fprintf(w, "ideal = zero-latency scheduler with the same policies, nominal creation times\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	num := func(format string, v float64, ok bool) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	ratio := func(a, b float64) string {
		if tally == nil || a == 0 {
			return "-"
		}
		return fmt.Sprintf("×%.2f", b/a)
	}
	has := tally != nil
	var t Summary
	if has {
		t = *tally
	}
	makespan := k.Makespan().Seconds()
	// The floor (tally's run with its ledger replaced by the ideal
	// scheduler's decisions, see floor.go), when tally's summary has one.
	floor := t.FloorWallSeconds > 0
	fl := func(v float64) string {
		if !floor {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	row("", "tally", "kueue", "ideal", t.floorName(), "kueue / tally")
	row("wall / makespan (s)", num("%.2f", t.WallSeconds, has), fmt.Sprintf("%.2f", makespan), fmt.Sprintf("%.2f", ideal.Wall.Seconds()), fl(t.FloorWallSeconds), ratio(t.WallSeconds, makespan))
	row("usage (%)", num("%.1f", t.UsagePercent, has), fmt.Sprintf("%.1f", k.UsagePercent()), fmt.Sprintf("%.1f", ideal.UsagePercent), "", ratio(t.UsagePercent, k.UsagePercent()))
	row("preemptions", num("%.0f", float64(t.Preemptions), has), fmt.Sprint(k.Evictions()), fmt.Sprint(ideal.Preemptions), "", "")
	for i, c := range p.Classes {
		kc, ok := k.WorkloadClasses[c.Name]
		kAvg := float64(kc.AverageTimeToAdmissionMs) / 1000
		tc, tok := t.Classes[c.Name]
		row(c.Name+" avg time to admission (s)", num("%.2f", tc.AvgTimeToAdmissionSeconds, tok), num("%.2f", kAvg, ok),
			fmt.Sprintf("%.2f", ideal.Classes[i].AvgTimeToAdmission.Seconds()), fl(tc.FloorAvgTimeToAdmissionSeconds), ratio(tc.AvgTimeToAdmissionSeconds, kAvg))
	}
	cpu := float64(k.Cmd.UserMs+k.Cmd.SysMs) / 1000
	row("scheduler CPU (s)", num("%.1f", t.TallyCPUSecondsTotal, has), fmt.Sprintf("%.1f", cpu), "", "", ratio(t.TallyCPUSecondsTotal, cpu))
	rss := float64(k.Cmd.Maxrss) / 1024
	row("scheduler peak RSS (MiB)", num("%.0f", float64(t.TallyPeakRSSBytes)/(1<<20), has), fmt.Sprintf("%.0f", rss), "", "", ratio(float64(t.TallyPeakRSSBytes)/(1<<20), rss))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nminimalkueue ran %.1fs in all (the wall time Kueue's rangespec bounds)", float64(k.Cmd.WallMs)/1000)
	if k.DroppedWorkloadEvents > 0 {
		fmt.Fprintf(w, "; Kueue's recorder dropped %d Workload events", k.DroppedWorkloadEvents)
	}
	fmt.Fprintln(w)
	if !has {
		fmt.Fprintln(w, "no summary of tally for this scenario: `make bench` measures it")
	}
	return nil
}
