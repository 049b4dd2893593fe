package perf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/scenario"
)

// Comparison is several runs each of tally and Kueue on one scenario,
// taken in turn in one session, every run on an API server of its own
// started the same way (APIServerFlags).
type Comparison struct {
	Scenario string `json:"scenario"`
	// KueueConfig is Kueue's own config of the scenario
	// (scenario.Scenario.KueueConfig), whose rangespec.yaml judges
	// Kueue's runs.
	KueueConfig    string        `json:"kueueConfig,omitempty"`
	Jobs           int           `json:"jobs"`
	APIServerFlags string        `json:"apiServerFlags"`
	Contenders     []*Contender  `json:"contenders"`
	Ideal          IdealFigures  `json:"ideal"`
	Started        time.Time     `json:"started"`
	Took           time.Duration `json:"took"`
}

// IdealFigures are the ideal scheduler's, with nominal creation times.
type IdealFigures struct {
	WallSeconds float64            `json:"wallSeconds"`
	Classes     map[string]float64 `json:"avgTimeToAdmissionSeconds"`
}

// Contender is one system in a Comparison: what runs, with which client
// budget, and its runs.
type Contender struct {
	Name string `json:"name"`
	// Binary and Version name what ran; Flags its command line beyond
	// the runner's own (kubeconfig, ports, certificates); Budget its
	// client's QPS and burst; Edit a change made to the released source.
	Binary  string `json:"binary"`
	Version string `json:"version,omitempty"`
	Flags   string `json:"flags"`
	Budget  string `json:"budget"`
	Edit    string `json:"edit,omitempty"`
	// Pods: the runner played the admitted Jobs' pods too, through
	// tally's pod gate (-pods), as the job controller would make them.
	Pods bool         `json:"pods,omitempty"`
	Runs []CompareRun `json:"runs"`
	// Failed are the runs that did not complete, with why.
	Failed []string `json:"failed,omitempty"`
}

// CompareRun is one run's figures, taken alike for tally and Kueue.
type CompareRun struct {
	// WallSeconds: tally's, from the first creation to the last
	// completion; Kueue's, from the first Workload seen to the last one
	// seen finished.
	WallSeconds float64 `json:"wallSeconds"`
	// Classes are the times to admission as the runner's watch saw them
	// (AdmissionTimes).
	Classes map[string]AdmissionTimes `json:"classes"`
	// Preemptions are the runs cut short (Kueue: evictions).
	Preemptions int `json:"preemptions"`
	Admissions  int `json:"admissions"`
	// CPUSeconds in the window, CPUSecondsTotal over the process's life.
	CPUSeconds      float64 `json:"cpuSeconds"`
	CPUSecondsTotal float64 `json:"cpuSecondsTotal"`
	PeakRSSBytes    int64   `json:"peakRSSBytes"`
	// Requests are the scheduler's, from the audit log.
	Requests            Requests       `json:"requests"`
	APIServerCPUSeconds float64        `json:"apiServerCPUSeconds"`
	APIServerRequests   map[string]int `json:"apiServerRequests"`
	// WebhookCalls are the API server's calls of tally's webhooks.
	WebhookCalls int `json:"webhookCalls,omitempty"`
	// Kueue's runner's own figures: the makespan and average times to
	// admission its recorder reports, and its rangespec.yaml's verdict.
	KueueMakespanSeconds float64            `json:"kueueMakespanSeconds,omitempty"`
	KueueAvgTTASeconds   map[string]float64 `json:"kueueAvgTimeToAdmissionSeconds,omitempty"`
	KueueWallSeconds     float64            `json:"kueueWallSeconds,omitempty"`
	RangeSpec            []Target           `json:"rangeSpec,omitempty"`
}

// TallyRun is a run of tally as a CompareRun.
func TallyRun(p *scenario.Plan, s *Summary, r *Result) CompareRun {
	c := CompareRun{
		WallSeconds: s.WallSeconds, Classes: admissionTimes(p, r.Sightings),
		Preemptions: r.Preemptions, Admissions: r.Admissions,
		CPUSeconds: s.TallyCPUSeconds, CPUSecondsTotal: s.TallyCPUSecondsTotal, PeakRSSBytes: s.TallyPeakRSSBytes,
		Requests: r.Requests, APIServerCPUSeconds: s.APIServerCPUSeconds, APIServerRequests: r.APIServerRequests,
	}
	for name, n := range r.WebhookCalls {
		if strings.HasSuffix(name, "tally.dev") {
			c.WebhookCalls += int(n)
		}
	}
	return c
}

// KueueRun is a run of Kueue as a CompareRun, with its rangespec's
// verdict (nil: none).
func KueueRun(p *scenario.Plan, k *KueueResult, verdict []Target) CompareRun {
	c := CompareRun{
		WallSeconds: k.End.Sub(k.Start).Seconds(), Classes: admissionTimes(p, k.Sightings),
		Preemptions: k.Evictions, Admissions: k.Admissions,
		CPUSeconds: k.CPU.Seconds(), CPUSecondsTotal: k.CPUTotal.Seconds(), PeakRSSBytes: k.PeakRSS,
		Requests: k.Requests, APIServerCPUSeconds: k.APIServerCPU.Seconds(), APIServerRequests: k.APIServerRequests,
		KueueWallSeconds: k.Wall.Seconds(), RangeSpec: verdict,
	}
	if k.Own != nil {
		c.KueueMakespanSeconds = k.Own.Makespan().Seconds()
		c.KueueAvgTTASeconds = map[string]float64{}
		for name, wc := range k.Own.WorkloadClasses {
			c.KueueAvgTTASeconds[name] = float64(wc.AverageTimeToAdmissionMs) / 1000
		}
	}
	return c
}

// KueueRangeSpec is Kueue's configs/<config>/rangespec.yaml, as its
// checker (test/performance/scheduler/checker) reads it.
type KueueRangeSpec struct {
	Cmd struct {
		MaxWallMs int64 `json:"maxWallMs"`
	} `json:"cmd"`
	ClusterQueueClassesMinUsage      map[string]float64 `json:"clusterQueueClassesMinUsage"`
	WlClassesMaxAvgTimeToAdmissionMs map[string]int64   `json:"wlClassesMaxAvgTimeToAdmissionMs"`
}

// ReadKueueRangeSpec reads the range spec of Kueue's config (a folder of
// its configs, scenario.Scenario.KueueConfig) from the toolchain's
// kueue-perf folder; (nil, nil) when Kueue has none.
func ReadKueueRangeSpec(tools, config string) (*KueueRangeSpec, error) {
	b, err := os.ReadFile(filepath.Join(tools, "configs", config, "rangespec.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &KueueRangeSpec{}
	if err := yaml.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("rangespec.yaml: %w", err)
	}
	return r, nil
}

// Check applies the range spec to a run's own figures as Kueue's checker
// does: minimalkueue's wall time, each ClusterQueue class's usage and
// each Workload class's average time to admission.
func (r *KueueRangeSpec) Check(k *KueueResult) []Target {
	if r == nil || k.Own == nil {
		return nil
	}
	t := []Target{{Name: "minimalkueue wall time (ms)", Value: float64(k.Wall.Milliseconds()), Bound: float64(r.Cmd.MaxWallMs)}}
	t[0].Met = t[0].Value <= t[0].Bound
	for _, c := range sortedKeys(k.Own.ClusterQueueClasses) {
		q := k.Own.ClusterQueueClasses[c]
		ms := float64(q.LastEventTime.Sub(q.FirstEventTime).Milliseconds())
		v := 0.0
		if q.NominalQuota > 0 && ms > 0 {
			v = float64(q.CPUUsed) * 100 / (float64(q.NominalQuota) * ms)
		}
		bound := r.ClusterQueueClassesMinUsage[c]
		t = append(t, Target{Name: c + " usage (%)", Value: v, Bound: bound, Met: v >= bound})
	}
	for _, c := range sortedKeys(k.Own.WorkloadClasses) {
		v := float64(k.Own.WorkloadClasses[c].AverageTimeToAdmissionMs)
		bound, ok := r.WlClassesMaxAvgTimeToAdmissionMs[c]
		t = append(t, Target{Name: c + " avg time to admission (ms)", Value: v, Bound: float64(bound), Met: ok && v <= float64(bound)})
	}
	return t
}

// spread is the median, least and most of some figures.
type spread struct{ med, lo, hi float64 }

func spreadOf(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med, s[0], s[len(s)-1]}
}

func (s spread) format(format string) string {
	if s.lo == s.hi {
		return fmt.Sprintf(format, s.med)
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", s.med, s.lo, s.hi)
}

// spread is one figure's spread over a contender's runs.
func (c *Contender) spread(f func(r CompareRun) float64) spread {
	vs := make([]float64, len(c.Runs))
	for i, r := range c.Runs {
		vs[i] = f(r)
	}
	return spreadOf(vs)
}

// Table writes the comparison for people: each cell is the median of the
// contender's runs, [least–most].
func (cmp *Comparison) Table(w io.Writer, classes []string) error {
	fmt.Fprintf(w, "scenario %s: %d Jobs (tally) or Workloads (Kueue); medians [min–max] of each contender's runs, taken in turn in one session\n", cmp.Scenario, cmp.Jobs)
	fmt.Fprintf(w, "every run's API server: envtest's kube-apiserver and etcd, %s\n", cmp.APIServerFlags)
	for _, c := range cmp.Contenders {
		fmt.Fprintf(w, "  %s: %s, client budget %s; %s; %d runs", c.Name, strings.TrimSpace(c.Binary+" "+c.Version), c.Budget, c.Flags, len(c.Runs))
		if c.Pods {
			fmt.Fprint(w, "; the runner makes each admitted Job's pod, through tally's pod gate")
		}
		if len(c.Failed) > 0 {
			fmt.Fprintf(w, " (%d failed: %s)", len(c.Failed), strings.Join(c.Failed, "; "))
		}
		fmt.Fprintln(w)
		if c.Edit != "" {
			fmt.Fprintf(w, "    edit to the released source: %s\n", strings.ReplaceAll(c.Edit, "\n", "; "))
		}
	}
	fmt.Fprintln(w, "time to admission: from the runner's watch's first sighting of each Job or Workload to its first admission (tally's runner's measure) and to its last (Kueue's recorder's)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	head := []string{""}
	for _, c := range cmp.Contenders {
		head = append(head, c.Name)
	}
	row(append(head, "ideal")...)
	line := func(name, format string, f func(r CompareRun) float64, ideal string) {
		cells := []string{name}
		for _, c := range cmp.Contenders {
			if len(c.Runs) == 0 {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, c.spread(f).format(format))
		}
		row(append(cells, ideal)...)
	}
	line("wall (s)", "%.1f", func(r CompareRun) float64 { return r.WallSeconds }, fmt.Sprintf("%.1f", cmp.Ideal.WallSeconds))
	for _, name := range classes {
		line(name+" TTA, first admission (s)", "%.1f", func(r CompareRun) float64 { return r.Classes[name].AvgToFirstSeconds }, fmt.Sprintf("%.1f", cmp.Ideal.Classes[name]))
		line(name+" TTA, last admission (s)", "%.1f", func(r CompareRun) float64 { return r.Classes[name].AvgToLastSeconds }, "")
	}
	line("preemptions", "%.0f", func(r CompareRun) float64 { return float64(r.Preemptions) }, "")
	line("scheduler CPU in the run (s)", "%.1f", func(r CompareRun) float64 { return r.CPUSeconds }, "")
	line("scheduler CPU in all (s)", "%.1f", func(r CompareRun) float64 { return r.CPUSecondsTotal }, "")
	line("scheduler peak RSS (MiB)", "%.0f", func(r CompareRun) float64 { return float64(r.PeakRSSBytes) / (1 << 20) }, "")
	line("scheduler writes (all but Events)", "%.0f", func(r CompareRun) float64 { return float64(r.Requests.Writes) }, "")
	line("  per admission", "%.2f", func(r CompareRun) float64 { return perAdmission(r.Requests.Writes, r.Admissions) }, "")
	line("scheduler Event writes", "%.0f", func(r CompareRun) float64 { return float64(r.Requests.EventWrites) }, "")
	line("scheduler requests", "%.0f", func(r CompareRun) float64 { return float64(r.Requests.Total) }, "")
	line("tally webhook calls", "%.0f", func(r CompareRun) float64 { return float64(r.WebhookCalls) }, "")
	line("API server CPU (s)", "%.0f", func(r CompareRun) float64 { return r.APIServerCPUSeconds }, "")
	line("API server requests", "%.0f", func(r CompareRun) float64 { return float64(total(r.APIServerRequests)) }, "")
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range cmp.Contenders {
		if len(c.Runs) == 0 {
			continue
		}
		r := c.Runs[c.medianRun()]
		fmt.Fprintf(w, "\n%s, the run of median wall time:\n", c.Name)
		fmt.Fprintf(w, "  scheduler's requests: %s\n", strings.Join(r.Requests.sortedKinds(), ", "))
		fmt.Fprintf(w, "  API server's requests (everyone's): %s\n", strings.Join(topCounts(r.APIServerRequests, 12), ", "))
		if r.KueueAvgTTASeconds != nil {
			var own []string
			for _, name := range classes {
				own = append(own, fmt.Sprintf("%s %.1fs", name, r.KueueAvgTTASeconds[name]))
			}
			fmt.Fprintf(w, "  Kueue's recorder: makespan %.1fs, avg time to admission %s; minimalkueue ran %.1fs\n", r.KueueMakespanSeconds, strings.Join(own, ", "), r.KueueWallSeconds)
		}
	}
	for _, c := range cmp.Contenders {
		var lines []string
		for i, r := range c.Runs {
			for _, t := range r.RangeSpec {
				if !t.Met {
					lines = append(lines, fmt.Sprintf("run %d: %s %.0f, bound %.0f", i+1, t.Name, t.Value, t.Bound))
				}
			}
		}
		if len(c.Runs) == 0 || len(c.Runs[0].RangeSpec) == 0 {
			continue
		}
		verdict := "met in every run"
		if len(lines) > 0 {
			verdict = "MISSED: " + strings.Join(lines, "; ")
		}
		fmt.Fprintf(w, "\n%s, Kueue's own configs/%s/rangespec.yaml (its checker's bounds): %s\n", c.Name, cmp.KueueConfig, verdict)
	}
	return nil
}

func perAdmission(writes, admissions int) float64 {
	if admissions == 0 {
		return 0
	}
	return float64(writes) / float64(admissions)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// topCounts lists the n largest counts as "key=count".
func topCounts(m map[string]int, n int) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var out []string
	for i, k := range keys {
		if i == n {
			out = append(out, fmt.Sprintf("%d more kinds", len(keys)-n))
			break
		}
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return out
}

// medianRun is the index of the run of median wall time.
func (c *Contender) medianRun() int {
	idx := make([]int, len(c.Runs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return c.Runs[idx[a]].WallSeconds < c.Runs[idx[b]].WallSeconds })
	return idx[(len(idx)-1)/2]
}

// Write writes the comparison as dir/<scenario>.compare.yaml.
func (cmp *Comparison) Write(dir string) (string, error) {
	b, err := yaml.Marshal(cmp)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, cmp.Scenario+".compare.yaml")
	return path, os.WriteFile(path, b, 0o644)
}
