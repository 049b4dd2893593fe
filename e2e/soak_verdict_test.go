package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"tally.dev/tally/e2e/framework"
)

// at is a time of the soak run of seed 1795694909522612400, on
// 2026-11-26, from "15:04:05.000".
func at(t *testing.T, clock string) time.Time {
	t.Helper()
	d, err := time.Parse("15:04:05.000", clock)
	if err != nil {
		t.Fatal(err)
	}
	return time.Date(2026, 11, 26, d.Hour(), d.Minute(), d.Second(), d.Nanosecond(), time.UTC)
}

// timeline builds a soakRecord from lines, in the order the watches
// delivered them:
//
//	job  TIME ns/name Unsuspended|Resuspended
//	event TIME ns/name REASON MESSAGE...
func timeline(t *testing.T, jobs map[string]*soakJob, lines ...string) soakRecord {
	t.Helper()
	r := soakRecord{jobs: jobs, events: map[string][]framework.EventRecord{}}
	for _, l := range lines {
		f := strings.SplitN(l, " ", 5)
		ns, name, _ := strings.Cut(f[2], "/")
		switch f[0] {
		case "job":
			r.transitions = append(r.transitions, framework.Transition{Seq: len(r.transitions), At: at(t, f[1]), Job: f[2], Kind: framework.ObservationKind(f[3])})
		case "event":
			r.events[ns] = append(r.events[ns], framework.EventRecord{At: at(t, f[1]), Object: name, Kind: "Job", Type: "Normal", Reason: f[3], Message: f[4]})
		default:
			t.Fatalf("bad line %q", l)
		}
	}
	return r
}

// soakFixtureJobs are the Jobs of the fixtures below, with four that are
// admitted once and take no part, as most of a soak's Jobs are (they keep
// the preemptions per admission within the soak's bound).
func soakFixtureJobs() map[string]*soakJob {
	return map[string]*soakJob{
		"e2e-soak-a/low-2g-095":    {queue: soakA, priority: 100, gpus: 2},
		"e2e-soak-a/medium-1g-097": {queue: soakA, priority: 500, gpus: 1},
		"e2e-soak-c/low-2g-053":    {queue: soakC, priority: 100, gpus: 2},
		"e2e-soak-c/low-1g-092":    {queue: soakC, priority: 100, gpus: 1},
		"e2e-soak-b/low-1g-001":    {queue: soakB, priority: 100, gpus: 1},
		"e2e-soak-b/low-1g-002":    {queue: soakB, priority: 100, gpus: 1},
		"e2e-soak-b/low-1g-003":    {queue: soakB, priority: 100, gpus: 1},
		"e2e-soak-b/low-1g-004":    {queue: soakB, priority: 100, gpus: 1},
	}
}

var bystanders = []string{
	"job 12:09:20.000 e2e-soak-b/low-1g-001 Unsuspended",
	"job 12:09:20.100 e2e-soak-b/low-1g-002 Unsuspended",
	"job 12:09:20.200 e2e-soak-b/low-1g-003 Unsuspended",
	"job 12:09:20.300 e2e-soak-b/low-1g-004 Unsuspended",
}

// A timeline of the soak run of seed 1795694909522612400 whose watches
// disagree: low-2g-095's first Preempting Event arrived (33.608) after
// the Job watch saw it admitted (33.596), so read by the Events' arrival
// times its admission would come before its first preemption. On the Job
// watch's clock, the one the verdict reads, it preempted low-2g-053
// (suspended at 33.107), was admitted (33.596), was preempted by
// medium-1g-097, preempted low-1g-092 (suspended at 39.0) and was admitted
// again (39.44): no thrash.
func TestSoakVerdictReadsOneClock(t *testing.T) {
	r := timeline(t, soakFixtureJobs(), append(slices.Clone(bystanders),
		"job 12:09:28.200 e2e-soak-c/low-2g-053 Unsuspended",
		"job 12:09:31.500 e2e-soak-c/low-1g-092 Unsuspended",
		"job 12:09:33.107 e2e-soak-c/low-2g-053 Resuspended",
		"job 12:09:33.596 e2e-soak-a/low-2g-095 Unsuspended",
		"event 12:09:33.608 e2e-soak-a/low-2g-095 Preempting Preempting 1 job to fit: e2e-soak-c/low-2g-053 (priority 100)",
		"event 12:09:33.775 e2e-soak-c/low-2g-053 Preempted Preempted by e2e-soak-a/low-2g-095 (priority 100 = 100) to reclaim quota lent to cohort e2e-soak",
		"event 12:09:33.945 e2e-soak-a/low-2g-095 Admitted Admitted by ClusterQueue e2e-soak-a in flavor nvidia-gpu-flavor",
		"job 12:09:33.957 e2e-soak-a/low-2g-095 Resuspended",
		"event 12:09:33.958 e2e-soak-a/medium-1g-097 Preempting Preempting 1 job to fit: e2e-soak-a/low-2g-095 (priority 100)",
		"event 12:09:33.961 e2e-soak-a/low-2g-095 Preempted Preempted by e2e-soak-a/medium-1g-097 (priority 500 > 100) within ClusterQueue e2e-soak-a",
		"job 12:09:34.300 e2e-soak-a/medium-1g-097 Unsuspended",
		"job 12:09:38.950 e2e-soak-c/low-2g-053 Unsuspended",
		"job 12:09:39.000 e2e-soak-c/low-1g-092 Resuspended",
		"event 12:09:39.011 e2e-soak-a/low-2g-095 Preempting Preempting 1 job to fit: e2e-soak-c/low-1g-092 (priority 100)",
		"event 12:09:39.022 e2e-soak-c/low-1g-092 Preempted Preempted by e2e-soak-a/low-2g-095 (priority 100 = 100) to reclaim quota lent to cohort e2e-soak",
		"job 12:09:39.440 e2e-soak-a/low-2g-095 Unsuspended",
		"job 12:09:44.000 e2e-soak-c/low-1g-092 Unsuspended",
	)...)
	errs, notes := r.verdict()
	for _, n := range notes {
		t.Log(n)
	}
	if len(errs) > 0 {
		t.Errorf("a timeline with late Events, and no thrash on the Job watch's clock, is judged wrong:\n%s", strings.Join(errs, "\n"))
	}
}

// A real thrash: low-2g-095 preempts twice with no admission between on
// the Job watch's clock, while its Events arrive late enough that its
// later admission falls between them on theirs. It is admitted twice in
// all, so only the order gives it away.
func TestSoakVerdictCatchesThrash(t *testing.T) {
	r := timeline(t, soakFixtureJobs(), append(slices.Clone(bystanders),
		"job 12:09:28.200 e2e-soak-c/low-2g-053 Unsuspended",
		"job 12:09:31.500 e2e-soak-c/low-1g-092 Unsuspended",
		"job 12:09:33.107 e2e-soak-c/low-2g-053 Resuspended",
		"job 12:09:33.500 e2e-soak-c/low-1g-092 Resuspended",
		"job 12:09:33.596 e2e-soak-a/low-2g-095 Unsuspended",
		"event 12:09:33.590 e2e-soak-a/low-2g-095 Preempting Preempting 1 job to fit: e2e-soak-c/low-2g-053 (priority 100)",
		"event 12:09:33.600 e2e-soak-c/low-2g-053 Preempted Preempted by e2e-soak-a/low-2g-095 (priority 100 = 100) to reclaim quota lent to cohort e2e-soak",
		"event 12:09:33.700 e2e-soak-a/low-2g-095 Preempting Preempting 1 job to fit: e2e-soak-c/low-1g-092 (priority 100)",
		"event 12:09:33.710 e2e-soak-c/low-1g-092 Preempted Preempted by e2e-soak-a/low-2g-095 (priority 100 = 100) to reclaim quota lent to cohort e2e-soak",
		"job 12:09:33.957 e2e-soak-a/low-2g-095 Resuspended",
		"event 12:09:33.961 e2e-soak-a/low-2g-095 Preempted Preempted by e2e-soak-a/medium-1g-097 (priority 500 > 100) within ClusterQueue e2e-soak-a",
		"event 12:09:33.962 e2e-soak-a/medium-1g-097 Preempting Preempting 1 job to fit: e2e-soak-a/low-2g-095 (priority 100)",
		"job 12:09:34.300 e2e-soak-a/medium-1g-097 Unsuspended",
		"job 12:09:38.950 e2e-soak-c/low-2g-053 Unsuspended",
		"job 12:09:39.440 e2e-soak-a/low-2g-095 Unsuspended",
		"job 12:09:44.000 e2e-soak-c/low-1g-092 Unsuspended",
	)...)
	errs, _ := r.verdict()
	var thrash []string
	for _, e := range errs {
		if strings.Contains(e, "e2e-soak-a/low-2g-095 preempted again") {
			thrash = append(thrash, e)
		}
	}
	if len(thrash) != 1 || len(errs) != 1 {
		t.Fatalf("want exactly one error, low-2g-095 preempting again without an admission; got:\n%s", strings.Join(errs, "\n"))
	}
	t.Log(thrash[0])
}
