package perf

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/ideal"
	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

// Summary is a measured run next to the ideal scheduler's outcomes:
//   - ideal: the scenario's policies, Jobs created at their nominal times;
//   - idealActual: the same, Jobs created when the runner created them;
//   - idealNoPreemption: nominal times, no preemption at all, which bounds
//     what any scheduler can do on this work;
//   - core: tally's own admission core (queues.Decide) with the actual
//     creation times, a pass every CorePassInterval and no latency at all,
//     which tells the cost of tally's decisions from that of its plumbing.
//
// A replay run (Options.Replay) is summarized the same way; SetReplay puts
// one beside a run of tally.
type Summary struct {
	Scenario string `json:"scenario"`
	// Scheduler is tally, or replay for a replay run.
	Scheduler string `json:"scheduler"`
	// TallyFlags is tally's command line after `serve` (its client
	// budget is --kube-api-qps and --kube-api-burst, 500 and 1000 unless
	// given); APIServerFlags the API server's, besides envtest's own.
	TallyFlags     []string `json:"tallyFlags"`
	APIServerFlags string   `json:"apiServerFlags"`
	// CreationPolicy: a MutatingAdmissionPolicy stood in for tally's Job
	// webhook.
	CreationPolicy bool `json:"creationPolicy,omitempty"`
	Jobs           int  `json:"jobs"`
	ClusterQueues  int  `json:"clusterQueues"`
	Admitted       int  `json:"admitted"`
	Finished       int  `json:"finished"`

	WallSeconds                      float64 `json:"wallSeconds"`
	IdealMakespanSeconds             float64 `json:"idealMakespanSeconds"`
	IdealActualMakespanSeconds       float64 `json:"idealActualMakespanSeconds"`
	IdealNoPreemptionMakespanSeconds float64 `json:"idealNoPreemptionMakespanSeconds"`
	// WorkSeconds is the Jobs' cpu-time divided by the total nominal
	// quota: no schedule can be shorter.
	WorkSeconds float64 `json:"workSeconds"`
	// CoreMakespanSeconds is the core's (see above).
	CoreMakespanSeconds float64 `json:"coreMakespanSeconds"`
	// ReplayWallSeconds is the wall time of a replay run (SetReplay), and
	// ReplayAPIRequestsPerJob its API requests per Job.
	ReplayWallSeconds float64 `json:"replayWallSeconds,omitempty"`
	// ReplayHeld tells that the replay reference is the held replay
	// (Options.HeldReplay), in a replay run's summary and beside it.
	ReplayHeld              bool    `json:"replayHeld,omitempty"`
	ReplayAPIRequestsPerJob float64 `json:"replayAPIRequestsPerJob,omitempty"`

	UsagePercent                  float64 `json:"usagePercent"`
	IdealUsagePercent             float64 `json:"idealUsagePercent"`
	IdealActualUsagePercent       float64 `json:"idealActualUsagePercent"`
	IdealNoPreemptionUsagePercent float64 `json:"idealNoPreemptionUsagePercent"`

	Admissions  int `json:"admissions"`
	Preemptions int `json:"preemptions"`
	// Nodes is the scenario's topology's node count (0: no topology), and
	// Placed the admissions seen with tally's placement in it. The ideal
	// scheduler, the replay reference and tally's core know no topology:
	// they are references where the nodes hold more than the quota, so
	// that quota alone decides when a Job starts.
	Nodes  int `json:"nodes,omitempty"`
	Placed int `json:"placed,omitempty"`
	// TallyPreemptions is tally's own count of the Jobs it preempted: it
	// includes preemptions that lost the race against a completion.
	TallyPreemptions       int `json:"tallyPreemptions"`
	IdealPreemptions       int `json:"idealPreemptions"`
	IdealActualPreemptions int `json:"idealActualPreemptions"`

	// WritesPerAdmission is tally's admission writes (those refused
	// included) per admission, as the audit log counts them
	// (Requests.Admissions) when it has any, else as the runner saw them;
	// WritesPerPreemption its preemption writes per Job it preempted
	// (Events and the state label written when a Job finishes are counted
	// apart, in Requests); APIRequestsPerJob all its requests per Job.
	WritesPerAdmission  float64  `json:"writesPerAdmission"`
	WritesPerPreemption float64  `json:"writesPerPreemption"`
	APIRequestsPerJob   float64  `json:"apiRequestsPerJob"`
	Requests            Requests `json:"requests"`

	TallyCPUSeconds      float64 `json:"tallyCPUSeconds"`
	TallyCPUSecondsTotal float64 `json:"tallyCPUSecondsTotal"`
	TallyPeakRSSBytes    int64   `json:"tallyPeakRSSBytes"`
	APIServerCPUSeconds  float64 `json:"apiServerCPUSeconds"`
	// APIServerRequests are the requests the API server served in the
	// window, everyone's, by "VERB resource [subresource]".
	APIServerRequests map[string]int `json:"apiServerRequests,omitempty"`
	// JobWatchersCut counts the Job watches the API server closed in the
	// window because their watcher fell too far behind (tally's and the
	// runner's alike).
	JobWatchersCut int `json:"jobWatchersCut"`
	// TallyLabelledFinished counts the Jobs tally labelled finished
	// within the window.
	TallyLabelledFinished int `json:"tallyLabelledFinished"`
	// AdmissionPasses and AvgAdmissionPassSeconds come from tally's
	// tally_admission_pass_seconds metric.
	AdmissionPasses         float64 `json:"admissionPasses"`
	AvgAdmissionPassSeconds float64 `json:"avgAdmissionPassSeconds"`
	// WatchDelayP50Seconds and WatchDelayP99Seconds come from tally's
	// tally_watch_delay_seconds: how far behind the API server its view
	// of the Jobs was.
	WatchDelayP50Seconds float64 `json:"watchDelayP50Seconds"`
	WatchDelayP99Seconds float64 `json:"watchDelayP99Seconds"`
	// RunnerWatchDelay*Seconds: how long after the API server answered a
	// Job's first admission write (the audit log's time) the runner's
	// watch saw the Job admitted; the runner completes it its runtime
	// later. A view that falls behind holds quota past the Jobs' runtimes.
	RunnerWatchDelayP50Seconds float64 `json:"runnerWatchDelayP50Seconds"`
	RunnerWatchDelayP99Seconds float64 `json:"runnerWatchDelayP99Seconds"`
	RunnerWatchDelayMaxSeconds float64 `json:"runnerWatchDelayMaxSeconds"`
	// WebhookAvgSeconds is the API server's average call time per tally
	// webhook, WebhookCalls its calls.
	WebhookAvgSeconds map[string]float64 `json:"webhookAvgSeconds,omitempty"`
	WebhookCalls      map[string]int     `json:"webhookCalls,omitempty"`
	// Pods counts the pods the runner made (Options.Pods), through tally's
	// pod gate.
	Pods int `json:"pods,omitempty"`

	CreateLatenessP99Seconds float64 `json:"createLatenessP99Seconds"`
	CreateLatenessMaxSeconds float64 `json:"createLatenessMaxSeconds"`
	CreateRetries            int     `json:"createRetries"`
	CompleteRetries          int     `json:"completeRetries"`

	// ExplainEstimate is the error of tally explain's start estimates,
	// when the run sampled them (Options.ExplainEvery).
	ExplainEstimate *EstimateError `json:"explainEstimate,omitempty"`

	Classes map[string]ClassSummary  `json:"classes"`
	Cohorts map[string]CohortSummary `json:"cohorts,omitempty"`
	Targets []Target                 `json:"targets"`

	// order keeps the scenario's class order for the table.
	order []string
}

// ClassSummary are one class's times to first admission.
type ClassSummary struct {
	Jobs                                       int     `json:"jobs"`
	Admitted                                   int     `json:"admitted"`
	AvgTimeToAdmissionSeconds                  float64 `json:"avgTimeToAdmissionSeconds"`
	P99TimeToAdmissionSeconds                  float64 `json:"p99TimeToAdmissionSeconds"`
	IdealAvgTimeToAdmissionSeconds             float64 `json:"idealAvgTimeToAdmissionSeconds"`
	IdealP99TimeToAdmissionSeconds             float64 `json:"idealP99TimeToAdmissionSeconds"`
	IdealActualAvgTimeToAdmissionSeconds       float64 `json:"idealActualAvgTimeToAdmissionSeconds"`
	IdealActualP99TimeToAdmissionSeconds       float64 `json:"idealActualP99TimeToAdmissionSeconds"`
	IdealNoPreemptionAvgTimeToAdmissionSeconds float64 `json:"idealNoPreemptionAvgTimeToAdmissionSeconds"`
	CoreAvgTimeToAdmissionSeconds              float64 `json:"coreAvgTimeToAdmissionSeconds"`
	ReplayAvgTimeToAdmissionSeconds            float64 `json:"replayAvgTimeToAdmissionSeconds,omitempty"`
	// Watch are the times to first and last admission from the
	// runner's first sighting of each Job (AdmissionTimes), as the
	// comparison with Kueue counts them.
	Watch                           AdmissionTimes `json:"watch"`
	ReplayP99TimeToAdmissionSeconds float64        `json:"replayP99TimeToAdmissionSeconds,omitempty"`
}

// CohortSummary is one cohort's usage.
type CohortSummary struct {
	UsagePercent      float64 `json:"usagePercent"`
	IdealUsagePercent float64 `json:"idealUsagePercent"`
}

// Target is one goal for tally against the ideal scheduler with the
// actual creation times, or against the replay reference.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Bound is the limit: at most (or, for usage, at least) this.
	Bound float64 `json:"bound"`
	Met   bool    `json:"met"`
}

// Summarize simulates the ideal scheduler on the plan and sets the
// measured run beside it.
func Summarize(p *scenario.Plan, r *Result) (*Summary, error) {
	nominal, err := simulate(p, p.Arrivals())
	if err != nil {
		return nil, err
	}
	actualArrivals := p.Arrivals()
	for i, o := range r.Outcomes {
		if o.Created != scenario.Never {
			actualArrivals[i] = o.Created
		}
	}
	actual, err := simulate(p, actualArrivals)
	if err != nil {
		return nil, err
	}
	plain, err := simulate(p.WithoutPreemption(), p.Arrivals())
	if err != nil {
		return nil, err
	}
	var core scenario.Stats
	if len(p.Jobs) <= CoreMaxJobs {
		coreOut, err := ideal.SimulateCore(p, actualArrivals, CorePassInterval)
		if err != nil {
			return nil, err
		}
		core = scenario.Compute(p, coreOut)
	}
	got := scenario.Compute(p, r.Outcomes)

	s := &Summary{
		Scenario: p.Name, Scheduler: "tally", Jobs: len(p.Jobs), ClusterQueues: len(p.Queues),
		Admitted: got.Admitted, Finished: got.Finished,
		WallSeconds:                      got.Wall.Seconds(),
		IdealMakespanSeconds:             nominal.Wall.Seconds(),
		IdealActualMakespanSeconds:       actual.Wall.Seconds(),
		IdealNoPreemptionMakespanSeconds: plain.Wall.Seconds(),
		WorkSeconds:                      p.WorkSeconds() / (float64(p.NominalMilli()) / 1000),
		CoreMakespanSeconds:              core.Wall.Seconds(),
		UsagePercent:                     got.UsagePercent,
		IdealUsagePercent:                nominal.UsagePercent,
		IdealActualUsagePercent:          actual.UsagePercent,
		IdealNoPreemptionUsagePercent:    plain.UsagePercent,
		Admissions:                       r.Admissions,
		Placed:                           r.Placed,
		Preemptions:                      r.Preemptions,
		IdealPreemptions:                 nominal.Preemptions,
		IdealActualPreemptions:           actual.Preemptions,
		Requests:                         r.Requests,
		TallyCPUSeconds:                  r.TallyCPU.Seconds(),
		TallyCPUSecondsTotal:             r.TallyCPUTotal.Seconds(),
		TallyPeakRSSBytes:                r.TallyPeakRSS,
		APIServerCPUSeconds:              r.APIServerCPU.Seconds(),
		APIServerRequests:                r.APIServerRequests,
		TallyFlags:                       r.TallyFlags,
		APIServerFlags:                   APIServerFlagsString(),
		JobWatchersCut:                   r.WatchersCut,
		RunnerWatchDelayP50Seconds:       scenario.Percentile(r.ViewDelays, 50).Seconds(),
		RunnerWatchDelayP99Seconds:       scenario.Percentile(r.ViewDelays, 99).Seconds(),
		RunnerWatchDelayMaxSeconds:       scenario.Percentile(r.ViewDelays, 100).Seconds(),
		TallyLabelledFinished:            r.LabelledFinished,
		CreateLatenessP99Seconds:         scenario.Percentile(r.CreateLateness, 99).Seconds(),
		CreateLatenessMaxSeconds:         scenario.Percentile(r.CreateLateness, 100).Seconds(),
		CreateRetries:                    r.CreateRetries,
		CompleteRetries:                  r.CompleteRetries,
		Classes:                          map[string]ClassSummary{},
		Cohorts:                          map[string]CohortSummary{},
	}
	if p.Topology != nil {
		s.Nodes = p.Topology.NodeCount()
	}
	if n := s.admissions(); n > 0 {
		s.WritesPerAdmission = float64(r.Requests.WritesByManager[queues.FieldManagerAdmission]) / float64(n)
	}
	if len(p.Jobs) > 0 {
		s.APIRequestsPerJob = float64(r.Requests.Total) / float64(len(p.Jobs))
	}
	if r.TallyMetrics != nil {
		s.TallyPreemptions = int(r.TallyMetrics.sum("tally_preemptions_total", nil))
		if s.TallyPreemptions > 0 {
			s.WritesPerPreemption = float64(r.Requests.WritesByManager[queues.FieldManagerPreemption]) / float64(s.TallyPreemptions)
		}
		s.AdmissionPasses = r.TallyMetrics.sum("tally_admission_pass_seconds_count", nil)
		if s.AdmissionPasses > 0 {
			s.AvgAdmissionPassSeconds = r.TallyMetrics.sum("tally_admission_pass_seconds_sum", nil) / s.AdmissionPasses
		}
		s.WatchDelayP50Seconds = r.TallyMetrics.quantile("tally_watch_delay_seconds", 0.5)
		s.WatchDelayP99Seconds = r.TallyMetrics.quantile("tally_watch_delay_seconds", 0.99)
	}
	for name, n := range r.WebhookCalls {
		if n > 0 && strings.HasSuffix(name, "tally.dev") {
			if s.WebhookAvgSeconds == nil {
				s.WebhookAvgSeconds, s.WebhookCalls = map[string]float64{}, map[string]int{}
			}
			s.WebhookAvgSeconds[name] = r.WebhookSeconds[name] / n
			s.WebhookCalls[name] = int(n)
		}
	}
	watch := admissionTimes(p, r.Sightings)
	for i, c := range got.Classes {
		s.order = append(s.order, c.Name)
		var coreAvg time.Duration
		if i < len(core.Classes) {
			coreAvg = core.Classes[i].AvgTimeToAdmission
		}
		s.Classes[c.Name] = ClassSummary{
			Jobs: c.Jobs, Admitted: c.Admitted,
			AvgTimeToAdmissionSeconds:                  c.AvgTimeToAdmission.Seconds(),
			P99TimeToAdmissionSeconds:                  c.P99TimeToAdmission.Seconds(),
			IdealAvgTimeToAdmissionSeconds:             nominal.Classes[i].AvgTimeToAdmission.Seconds(),
			IdealP99TimeToAdmissionSeconds:             nominal.Classes[i].P99TimeToAdmission.Seconds(),
			IdealActualAvgTimeToAdmissionSeconds:       actual.Classes[i].AvgTimeToAdmission.Seconds(),
			IdealActualP99TimeToAdmissionSeconds:       actual.Classes[i].P99TimeToAdmission.Seconds(),
			IdealNoPreemptionAvgTimeToAdmissionSeconds: plain.Classes[i].AvgTimeToAdmission.Seconds(),
			CoreAvgTimeToAdmissionSeconds:              coreAvg.Seconds(),
			Watch:                                      watch[c.Name],
		}
	}
	for c, u := range got.CohortUsagePercent {
		s.Cohorts[c] = CohortSummary{UsagePercent: u, IdealUsagePercent: nominal.CohortUsagePercent[c]}
	}
	if r.Replay {
		s.Scheduler = "replay"
		s.ReplayHeld = r.HeldReplay
	}
	s.CreationPolicy, s.Pods = r.CreationPolicy, r.Pods
	s.ExplainEstimate = estimateErrors(r.estimates, r.Start, r.Outcomes)
	s.Targets = targets(s)
	return s, nil
}

// SetReplay puts a replay run of the same plan beside s, a run of tally,
// and adds the targets against it.
func (s *Summary) SetReplay(f *Summary) {
	s.ReplayWallSeconds = f.WallSeconds
	s.ReplayAPIRequestsPerJob = f.APIRequestsPerJob
	s.ReplayHeld = f.ReplayHeld
	for name, c := range s.Classes {
		fc := f.Classes[name]
		c.ReplayAvgTimeToAdmissionSeconds, c.ReplayP99TimeToAdmissionSeconds = fc.AvgTimeToAdmissionSeconds, fc.P99TimeToAdmissionSeconds
		s.Classes[name] = c
	}
	s.Targets = targets(s)
}

// CorePassInterval is how often the core simulation runs a pass.
// CoreMaxJobs bounds the plans it runs on: it makes every pass tally
// would, so its time grows with pending Jobs × passes (under a second for
// the baseline's 15,000 Jobs, many minutes for 50,000).
const (
	CorePassInterval = 10 * time.Millisecond
	CoreMaxJobs      = 20000
)

func simulate(p *scenario.Plan, arrivals []time.Duration) (scenario.Stats, error) {
	out, err := ideal.Simulate(p, arrivals)
	if err != nil {
		return scenario.Stats{}, err
	}
	return scenario.Compute(p, out), nil
}

// admissions is the count of admissions that WritesPerAdmission is per:
// the audit log's, when it has any, else the runner's. The runner's watch
// misses an admission whose eviction falls in the same relist of its.
func (s *Summary) admissions() int {
	if s.Requests.Admissions > 0 {
		return s.Requests.Admissions
	}
	return s.Admissions
}

// replayName is what the table calls the replay reference beside s.
func (s *Summary) replayName() string {
	if s.ReplayHeld {
		return "held replay reference"
	}
	return "replay reference"
}

// targets are the goals for tally, against the ideal scheduler given the
// same creation times, and against the replay reference when one is set.
func targets(s *Summary) []Target {
	t := []Target{
		{Name: "wall time ≤ 1.3 × ideal makespan (s)", Value: s.WallSeconds, Bound: 1.3 * s.IdealActualMakespanSeconds},
		{Name: "usage ≥ 90% of ideal (%)", Value: s.UsagePercent, Bound: 0.9 * s.IdealActualUsagePercent},
		{Name: "writes per admission ≤ 1", Value: s.WritesPerAdmission, Bound: 1},
		{Name: "writes per preemption ≤ 1", Value: s.WritesPerPreemption, Bound: 1},
	}
	for _, name := range s.order {
		c := s.Classes[name]
		t = append(t, Target{Name: name + " avg time to admission ≤ ideal + 2s (s)", Value: c.AvgTimeToAdmissionSeconds, Bound: c.IdealActualAvgTimeToAdmissionSeconds + 2})
	}
	if s.ReplayWallSeconds > 0 {
		replay := s.replayName()
		t = append(t, Target{Name: "wall time ≤ 1.15 × " + replay + " (s)", Value: s.WallSeconds, Bound: 1.15 * s.ReplayWallSeconds})
		for _, name := range s.order {
			c := s.Classes[name]
			t = append(t, Target{Name: name + " avg time to admission ≤ " + replay + " + 2s (s)", Value: c.AvgTimeToAdmissionSeconds, Bound: c.ReplayAvgTimeToAdmissionSeconds + 2})
		}
	}
	for i := range t {
		if strings.HasPrefix(t[i].Name, "usage") {
			t[i].Met = t[i].Value >= t[i].Bound
		} else {
			t[i].Met = t[i].Value <= t[i].Bound
		}
	}
	return t
}

// Table writes the summary as a table for people.
func (s *Summary) Table(w io.Writer) error {
	fmt.Fprintf(w, "scenario %s: %d Jobs in %d ClusterQueues, %.1fs of work for the nominal quota\n", s.Scenario, s.Jobs, s.ClusterQueues, s.WorkSeconds)
	if len(s.TallyFlags) > 0 {
		fmt.Fprintf(w, "tally serve %s\nAPI server: %s\n", strings.Join(s.TallyFlags, " "), s.APIServerFlags)
	}
	fmt.Fprintf(w, "admitted %d, finished %d; ideal = zero-latency scheduler with the same policies; actual = with the runner's creation times;\ntally core = tally's own decisions, a pass every %s, no API latency\n\n", s.Admitted, s.Finished, CorePassInterval)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	replay := s.ReplayWallSeconds > 0
	// vsReplay are the replay reference's columns, when there is a replay run.
	vsReplay := func(v, f string) []string {
		if !replay {
			return nil
		}
		return []string{v, f}
	}
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row(append([]string{"", s.Scheduler, "ideal", "ideal(actual)", "ideal(no preemption)", s.Scheduler + " vs ideal(actual)", "tally core(actual)"}, vsReplay(s.replayName(), s.Scheduler+" vs "+s.replayName())...)...)
	secs := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("×%.2f", a/b)
	}
	diff := func(a, b float64) string { return fmt.Sprintf("%+.2fs", a-b) }
	core := func(v float64) string {
		if s.CoreMakespanSeconds == 0 {
			return "-"
		}
		return secs(v)
	}
	row(append([]string{"wall / makespan (s)", secs(s.WallSeconds), secs(s.IdealMakespanSeconds), secs(s.IdealActualMakespanSeconds), secs(s.IdealNoPreemptionMakespanSeconds), ratio(s.WallSeconds, s.IdealActualMakespanSeconds), core(s.CoreMakespanSeconds)},
		vsReplay(secs(s.ReplayWallSeconds), ratio(s.WallSeconds, s.ReplayWallSeconds))...)...)
	row("usage (%)", fmt.Sprintf("%.1f", s.UsagePercent), fmt.Sprintf("%.1f", s.IdealUsagePercent), fmt.Sprintf("%.1f", s.IdealActualUsagePercent), fmt.Sprintf("%.1f", s.IdealNoPreemptionUsagePercent), ratio(s.UsagePercent, s.IdealActualUsagePercent))
	row("preemptions", fmt.Sprintf("%d (tally: %d)", s.Preemptions, s.TallyPreemptions), fmt.Sprint(s.IdealPreemptions), fmt.Sprint(s.IdealActualPreemptions), "0", "")
	if s.Nodes > 0 {
		row("admissions placed in the topology", fmt.Sprintf("%d of %d (%d nodes)", s.Placed, s.Admissions, s.Nodes), "-", "-", "-", "")
	}
	for _, name := range s.order {
		c := s.Classes[name]
		row(append([]string{name + " avg time to admission (s)", secs(c.AvgTimeToAdmissionSeconds), secs(c.IdealAvgTimeToAdmissionSeconds), secs(c.IdealActualAvgTimeToAdmissionSeconds), secs(c.IdealNoPreemptionAvgTimeToAdmissionSeconds), diff(c.AvgTimeToAdmissionSeconds, c.IdealActualAvgTimeToAdmissionSeconds), core(c.CoreAvgTimeToAdmissionSeconds)},
			vsReplay(secs(c.ReplayAvgTimeToAdmissionSeconds), diff(c.AvgTimeToAdmissionSeconds, c.ReplayAvgTimeToAdmissionSeconds))...)...)
		row(append([]string{name + " p99 time to admission (s)", secs(c.P99TimeToAdmissionSeconds), secs(c.IdealP99TimeToAdmissionSeconds), secs(c.IdealActualP99TimeToAdmissionSeconds), "", diff(c.P99TimeToAdmissionSeconds, c.IdealActualP99TimeToAdmissionSeconds), ""},
			vsReplay(secs(c.ReplayP99TimeToAdmissionSeconds), diff(c.P99TimeToAdmissionSeconds, c.ReplayP99TimeToAdmissionSeconds))...)...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row("writes per admission", fmt.Sprintf("%.3f (%d admission writes%s, %s)", s.WritesPerAdmission, s.Requests.WritesByManager[queues.FieldManagerAdmission],
		refusedOf(s.Requests, queues.FieldManagerAdmission), s.admissionsText()))
	row("writes per preemption", fmt.Sprintf("%.2f (%d preemption writes, %d Jobs preempted)", s.WritesPerPreemption, s.Requests.WritesByManager[queues.FieldManagerPreemption], s.TallyPreemptions))
	row("other writes", fmt.Sprintf("%d state-label writes, %d Event writes, %d others", s.Requests.WritesByManager[queues.FieldManagerState], s.Requests.EventWrites,
		s.Requests.Writes-s.Requests.WritesByManager[queues.FieldManagerAdmission]-s.Requests.WritesByManager[queues.FieldManagerPreemption]-s.Requests.WritesByManager[queues.FieldManagerState]))
	row("Jobs labelled finished", fmt.Sprintf("%d of %d by the end of the window", s.TallyLabelledFinished, s.Finished))
	row("API requests per Job", fmt.Sprintf("%.2f (%s)", s.APIRequestsPerJob, strings.Join(s.Requests.sortedKinds(), ", ")))
	if replay {
		row(s.replayName()+"'s API requests per Job", fmt.Sprintf("%.2f", s.ReplayAPIRequestsPerJob))
	}
	row("tally CPU (s)", fmt.Sprintf("%.1f in the run, %.1f in all", s.TallyCPUSeconds, s.TallyCPUSecondsTotal))
	row("API server CPU (s)", fmt.Sprintf("%.1f in the run", s.APIServerCPUSeconds))
	if len(s.APIServerRequests) > 0 {
		row("API server requests", fmt.Sprintf("%d in the run, everyone's (%s)", total(s.APIServerRequests), strings.Join(topCounts(s.APIServerRequests, 8), ", ")))
	}
	var times []string
	for _, name := range s.order {
		w := s.Classes[name].Watch
		times = append(times, fmt.Sprintf("%s %.2f / %.2f", name, w.AvgToFirstSeconds, w.AvgToLastSeconds))
	}
	row("avg time to first / last admission (s)", strings.Join(times, ", ")+" (from the watch's first sighting of each Job)")
	row("Job watches cut off", fmt.Sprintf("%d, by the API server, for falling behind", s.JobWatchersCut))
	row("tally peak RSS (MiB)", fmt.Sprintf("%.0f", float64(s.TallyPeakRSSBytes)/(1<<20)))
	if s.AdmissionPasses > 0 {
		row("admission passes", fmt.Sprintf("%.0f, %.2f ms on average", s.AdmissionPasses, 1000*s.AvgAdmissionPassSeconds))
	}
	if s.WatchDelayP99Seconds > 0 {
		row("tally's watch delay (ms)", fmt.Sprintf("p50 %.0f, p99 %.0f (admission write answered until its version came back)", 1000*s.WatchDelayP50Seconds, 1000*s.WatchDelayP99Seconds))
	}
	if s.RunnerWatchDelayMaxSeconds != 0 {
		row("runner's watch delay (ms)", fmt.Sprintf("p50 %.0f, p99 %.0f, max %.0f (first admission write answered until the runner saw it)",
			1000*s.RunnerWatchDelayP50Seconds, 1000*s.RunnerWatchDelayP99Seconds, 1000*s.RunnerWatchDelayMaxSeconds))
	}
	if s.Pods > 0 {
		row("pods", fmt.Sprintf("%d made by the runner, through tally's pod gate (pods.tally.dev)", s.Pods))
	}
	if s.CreationPolicy {
		row("Job creation", "a MutatingAdmissionPolicy in place of tally's Job webhook")
	}
	for _, name := range sortedKeys(s.WebhookAvgSeconds) {
		row("webhook "+name, fmt.Sprintf("%d calls, %.2f ms on average", s.WebhookCalls[name], 1000*s.WebhookAvgSeconds[name]))
	}
	if e := s.ExplainEstimate; e != nil {
		row("tally explain's estimates", fmt.Sprintf("%d sampled; error median %.1fs, p90 %.1fs (signed median %+.1fs; median actual wait %.1fs)",
			e.Samples, e.MedianSeconds, e.P90Seconds, e.MedianSignedSeconds, e.MedianWaitSeconds))
	}
	row("create lateness p99 / max (ms)", fmt.Sprintf("%.0f / %.0f (%d retries; %d status retries)", 1000*s.CreateLatenessP99Seconds, 1000*s.CreateLatenessMaxSeconds, s.CreateRetries, s.CompleteRetries))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range s.Targets {
		mark := "met"
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %-6s %s: %.2f (bound %.2f)\n", mark, t.Name, t.Value, t.Bound)
	}
	return nil
}

// Write writes the summary as dir/<scenario>.summary.yaml (a replay run's
// as dir/<scenario>.replay.summary.yaml) and returns the path.
func (s *Summary) Write(dir string) (string, error) {
	b, err := yaml.Marshal(s)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := s.Scenario
	if s.Scheduler == "replay" {
		name += ".replay"
	}
	path := filepath.Join(dir, name+".summary.yaml")
	return path, os.WriteFile(path, b, 0o644)
}

// WriteJobs writes one line per Job (times in seconds from the start) as
// CSV, for a closer look.
func WriteJobs(path string, p *scenario.Plan, r *Result) error {
	var b strings.Builder
	b.WriteString("namespace,name,class,nominal,created,admitted,finished,held,admissions,preemptions\n")
	at := func(d time.Duration) string {
		if d == scenario.Never {
			return ""
		}
		return fmt.Sprintf("%.3f", d.Seconds())
	}
	for i, j := range p.Jobs {
		o := r.Outcomes[i]
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s,%d,%d\n", j.Namespace, j.Name, p.Classes[j.Class].Name, at(j.Arrival),
			at(o.Created), at(o.Admitted), at(o.Finished), at(o.Held), o.Admissions, o.Preemptions)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// admissionsText says what the admissions of the writes-per-admission
// row were counted from.
func (s *Summary) admissionsText() string {
	if s.Requests.Admissions == 0 {
		return fmt.Sprintf("%d admissions", s.Admissions)
	}
	return fmt.Sprintf("%d admissions in the audit log and %d writes that admitted an admitted Job again; the runner's watch saw %d admissions",
		s.Requests.Admissions, s.Requests.Readmissions, s.Admissions)
}

// refusedOf says how many of manager's writes the API server refused,
// when any were.
func refusedOf(r Requests, manager string) string {
	if n := r.RefusedByManager[manager]; n > 0 {
		return fmt.Sprintf(", %d of them refused", n)
	}
	return ""
}
