package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"tally.dev/tally/e2e/framework"
)

// Three ClusterQueues of one cohort. a (4 GPUs) and b (3 GPUs) are
// guaranteed queues that never borrow (borrowingLimit 0); c (3 GPUs) takes
// whatever they leave idle. Each preempts lower priorities within itself
// and takes back what it lent.
const soakQueueDocs = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-soak-a
spec:
  cohort: e2e-soak
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 0}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-soak-b
spec:
  cohort: e2e-soak
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 3, borrowingLimit: 0}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-soak-c
spec:
  cohort: e2e-soak
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 3}
`

// The soak's queues, namespaces (of the same names) and quotas.
const (
	soakCohort    = "e2e-soak"
	soakA         = "e2e-soak-a"
	soakB         = "e2e-soak-b"
	soakC         = "e2e-soak-c"
	soakCohortGPU = 10
)

var soakNominal = map[string]int64{soakA: 4, soakB: 3, soakC: 3}

// The soak's mix, repeated every soakPeriod:
//   - at 0s, low Jobs in c asking for 8 GPUs and running 5 to 6 seconds:
//     c borrows what a and b leave idle;
//   - at 3s, a burst of low Jobs in a asking for 5 GPUs (one more than a
//     has), which reclaims from c; at 3.75s a medium Job of 1 GPU and at
//     4.5s a high Job of 1 or 2 GPUs there, which preempt within a;
//   - at 10s and 13s, the same with c and b: low Jobs in c for 8 GPUs,
//     then in b low Jobs for 4 GPUs, a medium Job of 1 GPU and a high Job
//     of 1 or 2 GPUs;
//   - all the time, low Jobs in c (0.3 a second) and in a and b (0.06 a
//     second each).
//
// Jobs ask for 1, 2 or 3 GPUs (45%, 35%, 20%; in c at most 2) and, but
// for c's batches, run 2 to 4 seconds. A batch of c is admitted after the
// Jobs of c that an earlier burst preempted, so the next burst takes its
// quota back from the batch first. A Job of c never waits for 3 GPUs to
// come free at once, which tends to happen just before a and b need them.
const (
	soakPeriod    = 20 * time.Second
	soakTick      = 250 * time.Millisecond
	soakBatchC    = 8
	soakRateC     = 0.3
	soakRateOther = 0.06
)

// The soak's bounds.
const (
	// maxPreemptionsPerJob: in a period, a Job of a or b can lose its
	// quota to its queue's medium and high Jobs, a Job of c to the
	// bursts of a and of b; a third time is bad luck, a fourth is thrash.
	maxPreemptionsPerJob = 3
	// maxPreemptionsPerAdmission bounds preemptions over admissions. A
	// period brings about 27 Jobs (10 in c's batches, 6 more in c, 9 in
	// the bursts, 2 more in a and b) and about 13 victims at most: a and
	// b take back at most their nominal 4 and 3 GPUs, each medium Job
	// needs 1 GPU and each high Job at most 2, and a victim holds at
	// least 1 GPU. Every victim is admitted again, so admissions are at
	// least 27 + 13 a period and preemptions per admission at most 1/3.
	maxPreemptionsPerAdmission = 0.34
)

// Priorities of the soak (WorkloadPriorityClasses of priorityClassDocs).
var soakPriority = map[string]int32{"e2e-low": 100, "e2e-medium": 500, "e2e-high": 1000}

// soakJob is what the soak knows of a Job it created.
type soakJob struct {
	queue    string
	priority int32
	gpus     int64
}

// A contended mix runs for TALLY_SOAK (default 2m; at least two periods
// of 20s): three ClusterQueues of one cohort, Jobs of three priorities and
// 1 to 3 GPUs arriving all the time and running a few seconds, so that
// queues borrow, lend and reclaim and high-priority Jobs preempt low ones.
// Afterwards every Job has finished, and:
//   - quota was never overcommitted, per queue (a and b never above their
//     nominal quota, since they may not borrow) or in the cohort, checked
//     at every change of Jobs and of pods;
//   - every preemption has a Preempted Event that justifies it: within a
//     queue by a strictly higher priority, or as a reclaim of quota that
//     c borrowed; the priorities quoted are the Jobs' own;
//   - each Preempting Event lists exactly the Jobs then preempted;
//   - no two Jobs preempted each other, and preemptions per admission stay
//     within maxPreemptionsPerAdmission;
//   - no Job preempts twice without being admitted in between, so none
//     preempts more often than it is admitted;
//   - no victim is preempted again before the Job that preempted it was
//     admitted.
//
// Orders are read on the Job watch's clock alone (see soakRecord): an
// Event's arrival orders nothing against a Job's transitions.
//
// One more figure is logged, not asserted: how often one Job was
// preempted (compared with maxPreemptionsPerJob). A borrower may be
// reclaimed by several lenders in turn, which reclaimWithinCohort: Any
// allows, so it is a matter of the mix, not of a rule.
//
// TALLY_SOAK_SEED fixes the random mix (the seed used is logged).
func TestSoakNoThrash(t *testing.T) {
	s := setup(t)
	dur := envDuration(t, "TALLY_SOAK", 2*time.Minute)
	if dur < 2*soakPeriod {
		t.Fatalf("TALLY_SOAK=%s: the soak needs at least %s", dur, 2*soakPeriod)
	}
	seed := envSeed(t, "TALLY_SOAK_SEED")
	t.Logf("soak for %s with seed %d (TALLY_SOAK, TALLY_SOAK_SEED)", dur, seed)
	ctx := testContext(t, dur+10*time.Minute)

	queues := []string{soakA, soakB, soakC}
	useQueues(ctx, t, s, queues, soakQueueDocs, priorityClassDocs)
	nsQueue := map[string]string{}
	limits := []framework.UsageLimit{{Name: "cohort " + soakCohort, Queues: queues, Max: soakCohortGPU}}
	logs := map[string]*framework.EventLog{}
	for _, q := range queues {
		if err := framework.BindNamespace(ctx, s.client, q, q); err != nil {
			t.Fatalf("binding namespace %s: %v", q, err)
		}
		nsQueue[q] = q
		limit := int64(soakCohortGPU)
		if q != soakC {
			limit = soakNominal[q]
		}
		limits = append(limits, framework.UsageLimit{Name: "ClusterQueue " + q, Queues: []string{q}, Max: limit})
		_, logs[q] = observe(ctx, t, s, q)
	}
	trans, err := framework.WatchTransitions(ctx, s.client, queues...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Stop() })
	usage := watchUsage(ctx, t, s, nsQueue, limits)

	start := time.Now()
	jobs, perNS := soakMix(ctx, t, s, dur, seed, nil)
	t.Logf("created %d Jobs in %s (%v); waiting for them to finish", len(jobs), time.Since(start).Round(time.Second), perNS)

	for _, q := range queues {
		waitFinished(ctx, t, s, q, perNS[q], 5*time.Minute)
	}
	t.Logf("all Jobs finished %s after the start", time.Since(start).Round(time.Second))
	for _, q := range queues {
		checkCompleted(ctx, t, s.client, q, perNS[q])
		checkLabelledFinished(ctx, t, s, q)
	}
	checkUsage(t, usage.Stop(), "cohort "+soakCohort, soakCohortGPU, soakCohortGPU-2)
	if err := trans.Stop(); err != nil {
		t.Errorf("Job watch: %v", err)
	}
	checkSoakPreemptions(t, jobs, trans, logs)
}

// soakMix creates the soak's mix of Jobs (see TestSoakNoThrash) for dur,
// from seed, and returns them by namespace/name and how many each
// namespace got. While paused(ns) says so, it creates none in ns.
func soakMix(ctx context.Context, t *testing.T, s *suite, dur time.Duration, seed uint64, paused func(ns string) bool) (map[string]*soakJob, map[string]int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	jobs := map[string]*soakJob{} // by namespace/name
	perNS := map[string]int{}
	seq := 0
	create := func(q, class string, gpus int64, runtime time.Duration) {
		if paused != nil && paused(q) {
			return
		}
		name := fmt.Sprintf("%s-%dg-%03d", strings.TrimPrefix(class, "e2e-"), gpus, seq)
		seq++
		b := framework.NewJob(q, name).Runtime(runtime).Label(framework.LabelPriorityClass, class)
		if gpus > 1 && rng.IntN(2) == 0 {
			b = b.Parallelism(int32(gpus)).GPUs(1)
		} else {
			b = b.GPUs(int(gpus))
		}
		// A create can fail while faults are injected (the API server
		// restarting): retry it for a while.
		err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			err := framework.CreateJobs(ctx, s.client, b.Obj())
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			t.Fatalf("creating Job %s/%s: %v", q, name, err)
		}
		jobs[q+"/"+name] = &soakJob{queue: q, priority: soakPriority[class], gpus: gpus}
		perNS[q]++
	}
	size := func() int64 {
		switch x := rng.Float64(); {
		case x >= 0.8:
			return 3
		case x >= 0.45:
			return 2
		}
		return 1
	}
	short := func() time.Duration { return 2*time.Second + time.Duration(rng.IntN(5))*500*time.Millisecond }
	long := func() time.Duration { return 5*time.Second + time.Duration(rng.IntN(3))*500*time.Millisecond }
	burst := func(q string, gpus, most int64, runtime func() time.Duration) {
		for gpus > 0 {
			g := min(size(), gpus, most)
			create(q, "e2e-low", g, runtime())
			gpus -= g
		}
	}

	start := time.Now()
	ticker := time.NewTicker(soakTick)
	var last time.Duration
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("soak interrupted: %v", ctx.Err())
		case <-ticker.C:
		}
		now := time.Since(start)
		if now >= dur {
			break
		}
		// crossed says whether the period's mark at passed since the
		// last tick.
		crossed := func(at time.Duration) bool {
			for k := last / soakPeriod; k <= now/soakPeriod; k++ {
				if m := k*soakPeriod + at; m > last && m <= now || last == 0 && m == 0 {
					return true
				}
			}
			return false
		}
		for _, q := range []struct {
			name string
			at   time.Duration
		}{{soakA, 0}, {soakB, soakPeriod / 2}} {
			if crossed(q.at) {
				burst(soakC, soakBatchC, 2, long)
			}
			if crossed(q.at + 3*time.Second) {
				burst(q.name, soakNominal[q.name]+1, 3, short)
			}
			if crossed(q.at + 3750*time.Millisecond) {
				create(q.name, "e2e-medium", 1, short())
			}
			if crossed(q.at + 4500*time.Millisecond) {
				create(q.name, "e2e-high", 1+rng.Int64N(2), short())
			}
			if rng.Float64() < soakRateOther*soakTick.Seconds() {
				create(q.name, "e2e-low", size(), short())
			}
		}
		if rng.Float64() < soakRateC*soakTick.Seconds() {
			create(soakC, "e2e-low", min(size(), 2), short())
		}
		last = now
	}
	ticker.Stop()
	return jobs, perNS
}

// waitFinished waits until want Jobs of ns have finished.
func waitFinished(ctx context.Context, t *testing.T, s *suite, ns string, want int, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 500*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		jobs, err := framework.ListJobs(ctx, s.client, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		done := 0
		var notYet []string
		for i := range jobs {
			if j := &jobs[i]; framework.Finished(j) {
				done++
			} else if len(notYet) < 5 {
				notYet = append(notYet, fmt.Sprintf("%s(suspend=%s %s=%q)", j.Name, ptrString(j.Spec.Suspend), framework.LabelState, j.Labels[framework.LabelState]))
			}
		}
		return done >= want, fmt.Sprintf("%d of %d finished; e.g. %v", done, want, notYet), nil
	})
	if err != nil {
		t.Fatalf("waiting for the Jobs of %s to finish: %v", ns, err)
	}
}

// checkLabelledFinished checks, allowing tally a few seconds, that every
// finished Job of ns is labelled tally.dev/state=finished.
func checkLabelledFinished(ctx context.Context, t *testing.T, s *suite, ns string) {
	t.Helper()
	var wrong []string
	err := framework.Poll(ctx, 500*time.Millisecond, 15*time.Second, func(ctx context.Context) (bool, string, error) {
		jobs, err := framework.ListJobs(ctx, s.client, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		wrong = wrong[:0]
		for i := range jobs {
			if j := &jobs[i]; framework.Finished(j) && j.Labels[framework.LabelState] != framework.StateFinished {
				wrong = append(wrong, fmt.Sprintf("%s(suspend=%s %s=%q %s)", j.Name, ptrString(j.Spec.Suspend), framework.LabelState, j.Labels[framework.LabelState], conditions(j)))
			}
		}
		return len(wrong) == 0, fmt.Sprint(wrong), nil
	})
	if err != nil {
		t.Errorf("finished Jobs of %s not labelled %s=%s: %v", ns, framework.LabelState, framework.StateFinished, wrong)
	}
}

// preemption is one Preempted Event emission.
type preemption struct {
	at        time.Time
	victim    string // namespace/name
	preemptor string
	msg       framework.Preempted
	raw       string
}

// checkSoakPreemptions judges what the soak's watches saw (see
// soakRecord.verdict).
func checkSoakPreemptions(t *testing.T, jobs map[string]*soakJob, trans *framework.TransitionLog, logs map[string]*framework.EventLog) {
	t.Helper()
	r := soakRecord{jobs: jobs, transitions: trans.Transitions(), events: map[string][]framework.EventRecord{}, gaps: trans.Gaps()}
	for ns, l := range logs {
		r.events[ns] = l.Records()
		r.gaps += l.Gaps()
	}
	errs, notes := r.verdict()
	for _, n := range notes {
		t.Log(n)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// soakRecord is what the soak's watches saw: the Jobs it made (by
// namespace/name), the transitions of one Job watch of all its
// namespaces, and the Job Events of each namespace in the order its Event
// watch delivered them. gaps counts the watches' re-lists.
//
// Orders are read on one clock, the Job watch's: a preemption happens
// when its victim's suspension lands (the k-th Preempted Event of a Job
// goes with its k-th suspension), and an admission when the Job's
// un-suspension does. An Event is written after the decision it reports,
// on its own schedule, and its watch runs apart from the Job watch, so
// the time an Event arrives orders nothing against a Job's transitions.
type soakRecord struct {
	jobs        map[string]*soakJob
	transitions []framework.Transition
	events      map[string][]framework.EventRecord
	gaps        int
}

// preemptingRound is one Preempting Event: the victims a Job listed, and
// the Job watch's sequence numbers of their suspensions.
type preemptingRound struct {
	victims []string
	seqs    []int
}

// verdict checks the record (see TestSoakNoThrash for the rules) and
// returns what is wrong, and figures to log.
func (r soakRecord) verdict() (errs, notes []string) {
	errorf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	jobs, gaps := r.jobs, r.gaps
	admissions, resuspends := map[string]int{}, map[string]int{}
	// Where each Job's transitions are in the Job watch's order.
	admittedAt, resuspendedAt := map[string][]int{}, map[string][]int{}
	seqAt := map[int]time.Time{}
	for _, tr := range r.transitions {
		seqAt[tr.Seq] = tr.At
		switch tr.Kind {
		case framework.Unsuspended:
			admissions[tr.Job]++
			admittedAt[tr.Job] = append(admittedAt[tr.Job], tr.Seq)
		case framework.Resuspended:
			resuspends[tr.Job]++
			resuspendedAt[tr.Job] = append(resuspendedAt[tr.Job], tr.Seq)
		}
	}

	var preemptions []preemption
	byVictim := map[string][]preemption{}
	rounds := map[string][]*preemptingRound{} // by preemptor, in its Events' order
	listed := map[[2]string]int{}             // {preemptor, victim}: times listed in Preempting Events
	preemptedBy := map[[2]string]int{}        // {preemptor, victim}: Preempted Events
	for _, ns := range slices.Sorted(maps.Keys(r.events)) {
		for _, e := range r.events[ns] {
			if e.Kind != "Job" {
				continue
			}
			key := ns + "/" + e.Object
			switch e.Reason {
			case framework.ReasonPreempted:
				p, err := framework.ParsePreempted(e.Message)
				if err != nil {
					errorf("Preempted Event of %s: %v", key, err)
					continue
				}
				pr := preemption{at: e.At, victim: key, preemptor: p.Preemptor, msg: p, raw: e.Message}
				preemptions = append(preemptions, pr)
				byVictim[key] = append(byVictim[key], pr)
				preemptedBy[[2]string{p.Preemptor, key}]++
			case framework.ReasonPreempting:
				vs, err := framework.ParsePreempting(e.Message)
				if err != nil {
					errorf("Preempting Event of %s: %v", key, err)
					continue
				}
				round := &preemptingRound{}
				for _, v := range vs {
					round.victims = append(round.victims, v.Key)
					listed[[2]string{key, v.Key}]++
					if j := jobs[v.Key]; j != nil && j.priority != v.Priority {
						errorf("Preempting Event of %s quotes %s at priority %d, its priority is %d: %q", key, v.Key, v.Priority, j.priority, e.Message)
					}
				}
				rounds[key] = append(rounds[key], round)
			}
		}
	}
	if gaps > 0 {
		notes = append(notes, fmt.Sprintf("the Job and Event watches re-listed %d times; transitions in between may be missing, and the checks of order are skipped", gaps))
	}

	// Every preemption justified, with the Jobs' own priorities.
	var within, reclaim int
	for _, p := range preemptions {
		v, pe := jobs[p.victim], jobs[p.preemptor]
		if v == nil || pe == nil {
			errorf("Preempted Event names a Job this test did not create: %q on %s", p.raw, p.victim)
			continue
		}
		if p.msg.PreemptorPriority != pe.priority || p.msg.VictimPriority != v.priority {
			errorf("%s: priorities quoted (%d, %d) are not the Jobs' own (%d, %d): %q", p.victim, p.msg.PreemptorPriority, p.msg.VictimPriority, pe.priority, v.priority, p.raw)
		}
		if want := relation(p.msg.PreemptorPriority, p.msg.VictimPriority); p.msg.Relation != want {
			errorf("%s: relation %q, want %q: %q", p.victim, p.msg.Relation, want, p.raw)
		}
		switch p.msg.Reason {
		case "within ClusterQueue " + v.queue:
			within++
			if pe.queue != v.queue || pe.priority <= v.priority {
				errorf("unjustified preemption of %s (queue %s, priority %d) by %s (queue %s, priority %d): %q",
					p.victim, v.queue, v.priority, p.preemptor, pe.queue, pe.priority, p.raw)
			}
		case "to reclaim quota lent to cohort " + soakCohort:
			reclaim++
			if pe.queue == v.queue || v.queue != soakC {
				errorf("unjustified reclaim from %s (queue %s) by %s (queue %s): only %s borrows: %q", p.victim, v.queue, p.preemptor, pe.queue, soakC, p.raw)
			}
		default:
			errorf("preemption of %s by %s for a reason this config cannot give: %q", p.victim, p.preemptor, p.raw)
		}
	}

	// Preempted Events and the suspensions seen agree, Job by Job.
	for _, key := range slices.Sorted(maps.Keys(jobs)) {
		if r, e := resuspends[key], len(byVictim[key]); r != e && gaps == 0 {
			errorf("%s was suspended again %d times but has %d Preempted Events: %s", key, r, e, describe(preemptions, key))
		}
	}

	// Preempting Events list exactly the Jobs preempted.
	for pair, n := range preemptedBy {
		if listed[pair] != n {
			errorf("%s preempted %s %d times by its Preempted Events but lists it %d times in Preempting Events", pair[0], pair[1], n, listed[pair])
		}
	}
	for pair, n := range listed {
		if preemptedBy[pair] == 0 {
			errorf("%s lists %s in Preempting Events %d times, but %s has no Preempted Event naming it", pair[0], pair[1], n, pair[1])
		}
	}

	// A Job does not preempt twice without being admitted in between:
	// once its victims are gone it is admitted first, into the room it
	// preempted for. A round of preemptions happens, on the Job watch's
	// clock, when the first of its victims' suspensions lands.
	for _, key := range slices.Sorted(maps.Keys(rounds)) {
		rs := rounds[key]
		if n := len(admittedAt[key]); len(rs) > n {
			errorf("%s preempted %d times but was admitted %d times: %s", key, len(rs), n, describe(preemptions, key))
		}
		if gaps > 0 || jobs[key] == nil {
			continue
		}
		placed := placeRounds(key, rs, byVictim, resuspendedAt)
		for k := 0; k+1 < len(placed); k++ {
			from, to := slices.Min(placed[k].seqs), slices.Min(placed[k+1].seqs)
			if i, ok := firstAfter(admittedAt[key], from); !ok || i > to {
				errorf("%s preempted again (%v, suspended at #%d, %s) without being admitted since it preempted %v (suspended at #%d, %s): %s",
					key, placed[k+1].victims, to, seqAt[to].Format("15:04:05.000"), placed[k].victims, from, seqAt[from].Format("15:04:05.000"), describe(preemptions, key))
			}
		}
	}

	// A victim waits for its preemptor: it is not preempted again before
	// the Job that preempted it was admitted (the quota it freed belongs
	// to that Job).
	if gaps == 0 {
		for _, v := range slices.Sorted(maps.Keys(byVictim)) {
			ps, rs := byVictim[v], resuspendedAt[v]
			for k := 0; k+1 < len(ps) && k+1 < len(rs); k++ {
				p := ps[k].preemptor
				i, ok := firstAfter(admittedAt[p], rs[k])
				if !ok || rs[k+1] < i {
					errorf("%s was preempted again (%s) before %s, which had preempted it, was admitted: %s",
						v, ps[k+1].preemptor, p, describe(preemptions, v))
					break
				}
			}
		}
	}

	// Bounded per Job, and never back and forth.
	worst := 0
	for _, key := range slices.Sorted(maps.Keys(jobs)) {
		n := max(len(byVictim[key]), resuspends[key])
		worst = max(worst, n)
		if n > maxPreemptionsPerJob {
			notes = append(notes, fmt.Sprintf("not asserted: %s was preempted %d times (more than %d): %s", key, n, maxPreemptionsPerJob, describe(preemptions, key)))
		}
	}
	for pair := range preemptedBy {
		if pair[0] < pair[1] && preemptedBy[[2]string{pair[1], pair[0]}] > 0 {
			errorf("%s and %s preempted each other: %s", pair[0], pair[1], describe(preemptions, pair[0]))
		}
	}

	// Preemptions per admission.
	admitted, total := 0, len(preemptions)
	for _, n := range admissions {
		admitted += n
	}
	ratio := 0.0
	if admitted > 0 {
		ratio = float64(total) / float64(admitted)
	}
	notes = append(notes, fmt.Sprintf("%d Jobs, %d admissions, %d preemptions (%d within a queue, %d reclaims) by %d preemptors: %.3f preemptions per admission (bound %.2f), at most %d for one Job",
		len(jobs), admitted, total, within, reclaim, len(rounds), ratio, maxPreemptionsPerAdmission, worst))
	if admitted < len(jobs) {
		errorf("%d admissions seen for %d Jobs", admitted, len(jobs))
	}
	if ratio > maxPreemptionsPerAdmission {
		errorf("%.3f preemptions per admission, more than %.2f", ratio, maxPreemptionsPerAdmission)
	}
	if within == 0 || reclaim == 0 {
		errorf("the mix did not contend: %d preemptions within a queue, %d reclaims", within, reclaim)
	}
	return errs, notes
}

// placeRounds puts preemptor's rounds on the Job watch's clock and
// returns those it could place, in that order. The n-th time preemptor
// lists a victim goes with the n-th Preempted Event of that victim that
// names preemptor, and so with the victim's suspension of the same rank.
// A round none of whose victims' suspensions were seen is left out: the
// checks of counts above report it.
func placeRounds(preemptor string, rounds []*preemptingRound, byVictim map[string][]preemption, resuspendedAt map[string][]int) []*preemptingRound {
	// The suspensions of each victim that preemptor caused, in order.
	next := map[string][]int{}
	for v, ps := range byVictim {
		for k, p := range ps {
			if p.preemptor == preemptor && k < len(resuspendedAt[v]) {
				next[v] = append(next[v], resuspendedAt[v][k])
			}
		}
	}
	var placed []*preemptingRound
	for _, r := range rounds {
		r.seqs = r.seqs[:0]
		for _, v := range r.victims {
			if len(next[v]) > 0 {
				r.seqs = append(r.seqs, next[v][0])
				next[v] = next[v][1:]
			}
		}
		if len(r.seqs) > 0 {
			placed = append(placed, r)
		}
	}
	slices.SortStableFunc(placed, func(a, b *preemptingRound) int { return slices.Min(a.seqs) - slices.Min(b.seqs) })
	return placed
}

// firstAfter returns the first of the ascending seqs above after.
func firstAfter(seqs []int, after int) (int, bool) {
	for _, s := range seqs {
		if s > after {
			return s, true
		}
	}
	return 0, false
}

func relation(a, b int32) string {
	switch {
	case a > b:
		return ">"
	case a < b:
		return "<"
	}
	return "="
}

// describe lists the preemptions a Job took part in, on either side.
func describe(ps []preemption, key string) string {
	var out []string
	for _, p := range ps {
		if p.victim == key || p.preemptor == key {
			out = append(out, fmt.Sprintf("[%s %s: %s]", p.at.Format("15:04:05.000"), p.victim, p.raw))
		}
	}
	if len(out) == 0 {
		return "no Preempted Events"
	}
	return strings.Join(out, " ")
}

// envDuration reads a duration from the environment, or returns def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q is not a positive duration", name, v)
	}
	return d
}

// envSeed reads a random seed from the environment, or makes one.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return uint64(time.Now().UnixNano()) & math.MaxInt64
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q is not a number", name, v)
	}
	return n
}
