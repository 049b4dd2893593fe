package perf

import (
	"fmt"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"tally.dev/tally/e2e/perf/ideal"
	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

const tinyScenario = `
name: tiny
cohorts: 1
clusterQueuesPerCohort: 2
quota: {nominal: "2"}
classes:
- {name: short, count: 3, interval: 0s, cpu: "1", runtime: 1s, priority: 1}
- {name: long, count: 1, interval: 0s, cpu: "2", runtime: 2s}
`

// tinyIdeal expands tinyScenario and runs the ideal scheduler on it.
func tinyIdeal(t *testing.T) (*scenario.Plan, []scenario.Outcome) {
	t.Helper()
	sc, err := scenario.Parse([]byte(tinyScenario))
	if err != nil {
		t.Fatal(err)
	}
	p := sc.Expand()
	outcomes, err := ideal.Simulate(p, p.Arrivals())
	if err != nil {
		t.Fatal(err)
	}
	return p, outcomes
}

// A run that matches the ideal scheduler exactly meets every target but
// the write count it was given, and says so in the table and the file.
func TestSummarize(t *testing.T) {
	p, outcomes := tinyIdeal(t)
	res := &Result{
		Outcomes:       outcomes,
		CreateLateness: []time.Duration{time.Millisecond, 3 * time.Millisecond},
		Admissions:     len(p.Jobs),
		TallyCPU:       2 * time.Second, TallyCPUTotal: 3 * time.Second, TallyPeakRSS: 64 << 20,
		Requests: Requests{Total: 40, Writes: 16, EventWrites: 20, ByKind: map[string]int{"patch jobs": 16, "create events": 20, "watch jobs": 4},
			WritesByManager:  map[string]int{queues.FieldManagerAdmission: 12, queues.FieldManagerPreemption: 2, queues.FieldManagerState: 2},
			RefusedByManager: map[string]int{queues.FieldManagerAdmission: 3}},
		TallyMetrics: metrics{`tally_admission_pass_seconds_count`: 10, `tally_admission_pass_seconds_sum`: 0.01, `tally_preemptions_total`: 1},
	}
	s, err := Summarize(p, res)
	if err != nil {
		t.Fatal(err)
	}
	// Two 2-cpu queues in one cohort: 6 short Jobs and 2 long ones, 14
	// cpu-seconds of work for 4 cpus.
	if s.Jobs != 8 || s.Finished != 8 || s.WallSeconds != s.IdealMakespanSeconds || s.WallSeconds != s.IdealActualMakespanSeconds || s.WorkSeconds != 3.5 {
		t.Errorf("jobs %d finished %d wall %.2f ideal %.2f actual %.2f work %.2f", s.Jobs, s.Finished, s.WallSeconds, s.IdealMakespanSeconds, s.IdealActualMakespanSeconds, s.WorkSeconds)
	}
	if s.WritesPerAdmission != 1.5 || s.WritesPerPreemption != 2 || s.APIRequestsPerJob != 5 || s.TallyCPUSeconds != 2 || s.AvgAdmissionPassSeconds != 0.001 || s.CreateLatenessMaxSeconds != 0.003 {
		t.Errorf("writes/admission %.2f writes/preemption %.2f requests/job %.2f cpu %.2f pass %.4f lateness %.3f", s.WritesPerAdmission, s.WritesPerPreemption, s.APIRequestsPerJob, s.TallyCPUSeconds, s.AvgAdmissionPassSeconds, s.CreateLatenessMaxSeconds)
	}
	var missed []string
	for _, tg := range s.Targets {
		if !tg.Met {
			missed = append(missed, tg.Name)
		}
	}
	if diff := cmp.Diff([]string{"writes per admission ≤ 1", "writes per preemption ≤ 1"}, missed); diff != "" {
		t.Errorf("missed targets (-want +got):\n%s", diff)
	}
	short := s.Classes["short"]
	if short.Jobs != 6 || short.AvgTimeToAdmissionSeconds != short.IdealAvgTimeToAdmissionSeconds {
		t.Errorf("short: %+v", short)
	}

	var table strings.Builder
	if err := s.Table(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wall / makespan (s)", "short avg time to admission (s)", "long p99 time to admission (s)", "×1.00",
		"1.500 (12 admission writes, 3 of them refused, 8 admissions)", "2.00 (2 preemption writes, 1 Jobs preempted)", "2 state-label writes, 20 Event writes, 0 others", "create events=20, patch jobs=16, watch jobs=4", "MISSED writes per admission"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	dir := t.TempDir()
	path, err := s.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wallSeconds:", "idealMakespanSeconds:", "usagePercent:", "idealUsagePercent:", "writesPerAdmission: 1.5", "writesPerPreemption: 2",
		"preemptions: 0", "tallyCPUSeconds: 2", "tallyPeakRSSBytes: 67108864", "apiRequestsPerJob: 5", "  short:\n", "avgTimeToAdmissionSeconds:",
		"p99TimeToAdmissionSeconds:", "idealAvgTimeToAdmissionSeconds:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q:\n%s", path, want, b)
		}
	}
}

func TestCountRequests(t *testing.T) {
	log := `{"verb":"patch","user":{"username":"tally"},"objectRef":{"resource":"jobs","namespace":"a","name":"j"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z","stageTimestamp":"2026-01-01T00:00:01.250000Z","requestURI":"/apis/batch/v1/namespaces/a/jobs/j?fieldManager=tally-admission"}
{"verb":"patch","user":{"username":"tally"},"objectRef":{"resource":"jobs"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z","requestURI":"/apis/batch/v1/namespaces/a/jobs/j?fieldManager=tally-admission"}
{"verb":"create","user":{"username":"tally"},"objectRef":{"resource":"events"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}
{"verb":"watch","user":{"username":"tally"},"objectRef":{"resource":"jobs"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}
{"verb":"update","user":{"username":"tally"},"objectRef":{"resource":"jobs","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}
{"verb":"patch","user":{"username":"someone"},"objectRef":{"resource":"jobs"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}
{"verb":"patch","user":{"username":"tally"},"objectRef":{"resource":"jobs"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:09.000000Z"}
`
	from := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	got, err := countRequestsFrom(strings.NewReader(log), tallyUser, from, from.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{Total: 5, Writes: 3, EventWrites: 1, Failed: 1, ByKind: map[string]int{"patch jobs": 2, "create events": 1, "watch jobs": 1, "update jobs/status": 1},
		WritesByManager: map[string]int{"tally-admission": 2, "": 1}, RefusedByManager: map[string]int{"tally-admission": 1}, Admissions: 1,
		FirstAdmitted: map[string]time.Time{"a/j": from.Add(250 * time.Millisecond)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// Admissions are counted from the audit log in the order the API server
// completed the writes, whatever order the log lists them in: a Job's
// first admission write it took, and its first after each preemption
// write; a second one with no eviction between is a readmission, and a
// refused one is neither.
func TestCountAdmissions(t *testing.T) {
	line := func(name, manager string, code int, at string) string {
		return fmt.Sprintf(`{"verb":"patch","user":{"username":"tally"},"objectRef":{"resource":"jobs","namespace":"a","name":%q},"responseStatus":{"code":%d},`+
			`"requestReceivedTimestamp":"2026-01-01T00:00:01Z","stageTimestamp":"2026-01-01T00:00:%s","requestURI":"/apis/batch/v1/namespaces/a/jobs/%s?fieldManager=%s"}`+"\n",
			name, code, at, name, manager)
	}
	log := line("x", queues.FieldManagerAdmission, 200, "01.0Z") +
		line("x", queues.FieldManagerAdmission, 200, "03.0Z") + // after its preemption, listed below
		line("x", queues.FieldManagerPreemption, 200, "02.0Z") +
		line("y", queues.FieldManagerAdmission, 200, "01.5Z") +
		line("y", queues.FieldManagerAdmission, 200, "02.5Z") + // again, with no eviction between
		line("z", queues.FieldManagerAdmission, 409, "01.2Z") +
		line("z", queues.FieldManagerAdmission, 200, "01.3Z") +
		line("z", queues.FieldManagerState, 200, "04.0Z")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := countRequestsFrom(strings.NewReader(log), tallyUser, from, from.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Admissions != 4 || got.Readmissions != 1 || got.WritesByManager[queues.FieldManagerAdmission] != 6 {
		t.Errorf("admissions %d, readmissions %d, admission writes %d; want 4, 1 and 6", got.Admissions, got.Readmissions, got.WritesByManager[queues.FieldManagerAdmission])
	}
	// The first admission write taken, not a refused one before it.
	at := func(s string) time.Time { ts, _ := time.Parse(time.RFC3339Nano, "2026-01-01T00:00:"+s); return ts }
	if want := map[string]time.Time{"a/x": at("01.0Z"), "a/y": at("01.5Z"), "a/z": at("01.3Z")}; !maps.Equal(got.FirstAdmitted, want) {
		t.Errorf("first admissions %v; want %v", got.FirstAdmitted, want)
	}

	// The summary counts writes per admission against the audit log's
	// admissions, not the runner's.
	p, outcomes := tinyIdeal(t)
	s, err := Summarize(p, &Result{Outcomes: outcomes, Admissions: 3, Requests: got})
	if err != nil {
		t.Fatal(err)
	}
	if s.WritesPerAdmission != 1.5 {
		t.Errorf("writes per admission %.3f; want 6/4", s.WritesPerAdmission)
	}
	var table strings.Builder
	if err := s.Table(&table); err != nil {
		t.Fatal(err)
	}
	want := "1.500 (6 admission writes, 1 of them refused, 4 admissions in the audit log and 1 writes that admitted an admitted Job again; the runner's watch saw 3 admissions)"
	if !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PATCH"} 7
rest_client_requests_total{code="409",host="127.0.0.1:1",method="PATCH"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 3
odd_labels{a="x,y=\"z\"",b="2"} 1.5
tally_pending_jobs 4
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum("rest_client_requests_total", map[string]string{"method": "PATCH"}); got != 9 {
		t.Errorf("PATCH requests = %v, want 9", got)
	}
	if got := m.byLabel("rest_client_requests_total", "method"); !cmp.Equal(got, map[string]float64{"PATCH": 9, "GET": 3}) {
		t.Errorf("by method = %v", got)
	}
	if got := m.sum("odd_labels", map[string]string{"a": `x,y="z"`, "b": "2"}); got != 1.5 {
		t.Errorf("escaped label value not matched: %v", got)
	}
	before := metrics{"tally_pending_jobs": 1}
	if got := m.minus(before)["tally_pending_jobs"]; got != 3 {
		t.Errorf("difference = %v, want 3", got)
	}
	if _, err := parseMetrics(strings.NewReader("novalue\n")); err == nil {
		t.Error("want an error for a line without a value")
	}
}

func TestQuantile(t *testing.T) {
	text := `delay_bucket{le="0.1"} 10
delay_bucket{le="0.2"} 30
delay_bucket{le="0.4"} 40
delay_bucket{le="+Inf"} 50
delay_sum 12
delay_count 50
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.1, 0.05},  // 5 of 50: halfway into the first bucket, from 0
		{0.5, 0.175}, // 25: three quarters of the way from 0.1 to 0.2
		{0.8, 0.4},   // 40: the third bucket's top
		{0.99, 0.4},  // beyond the last finite bound
	} {
		if got := m.quantile("delay", c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (metrics{}).quantile("delay", 0.5); got != 0 {
		t.Errorf("empty histogram: quantile = %v, want 0", got)
	}
}
