package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// priorityClassDocs are the WorkloadPriorityClasses of the preemption
// tests, picked by the label tally.dev/priority-class.
const priorityClassDocs = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: e2e-low
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: e2e-medium
value: 500
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: e2e-high
value: 1000
`

// A ClusterQueue of 5 GPUs that preempts lower priorities within itself.
// Its second flavor has no quota: it only makes the candidate affinity
// (two terms) differ from an admitted Job's (one).
const preemptQueueDoc = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-preempt
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 5}
    - name: cpu-flavor
      resources:
      - {name: cpu, nominalQuota: 0}
      - {name: memory, nominalQuota: 0}
      - {name: nvidia.com/gpu, nominalQuota: 0}
`

// Two ClusterQueues of a cohort, 4 and 2 GPUs, that take back what they
// lent.
const reclaimQueueDocs = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-reclaim-a
spec:
  cohort: e2e-reclaim
  namespaceSelector: {}
  preemption:
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-reclaim-b
spec:
  cohort: e2e-reclaim
  namespaceSelector: {}
  preemption:
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 2}
`

// A ClusterQueue of 5 GPUs holds three low-priority Jobs (WorkloadPriority-
// Class, 100) and one medium one (a Kubernetes PriorityClass on the pod
// template, 500), 1 GPU each, with 1 GPU free. A high-priority Job
// (1000) asking for 3 GPUs arrives. tally preempts exactly two low Jobs,
// the fewest that make room, and neither the medium one nor the third
// low one; it admits the high Job only once their pods are gone, explains
// both sides in Events, and the victims run again and finish.
func TestPreemptWithinQueue(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-preempt", "e2e-preempt"
	useQueues(ctx, t, s, []string{queue}, preemptQueueDoc, priorityClassDocs)
	createPriorityClass(ctx, t, s, "e2e-mid", 500)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, _ := observe(ctx, t, s, ns)
	usage := watchUsage(ctx, t, s, map[string]string{ns: queue}, []framework.UsageLimit{{Name: "ClusterQueue " + queue, Queues: []string{queue}, Max: 5}})

	const fillRuntime = 25 * time.Second
	fill := []*batchv1.Job{
		framework.NewJob(ns, "low-0").GPUs(1).Runtime(fillRuntime).Label(framework.LabelPriorityClass, "e2e-low").Obj(),
		framework.NewJob(ns, "low-1").GPUs(1).Runtime(fillRuntime).Label(framework.LabelPriorityClass, "e2e-low").Obj(),
		framework.NewJob(ns, "low-2").GPUs(1).Runtime(fillRuntime).Label(framework.LabelPriorityClass, "e2e-low").Obj(),
		framework.NewJob(ns, "mid").GPUs(1).Runtime(fillRuntime).Obj(),
	}
	fill[3].Spec.Template.Spec.PriorityClassName = "e2e-mid"
	if err := framework.CreateJobs(ctx, s.client, fill...); err != nil {
		t.Fatal(err)
	}
	waitRunning(ctx, t, s.client, ns, names(fill), time.Minute)

	high := framework.NewJob(ns, "high").Parallelism(3).GPUs(1).Runtime(5*time.Second).Label(framework.LabelPriorityClass, "e2e-high").Obj()
	if err := framework.CreateJobs(ctx, s.client, high); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitAdmitted(ctx, t, s.client, high, time.Minute)
	t.Logf("high admitted %s after its creation", time.Since(start).Round(time.Millisecond))

	// Who was suspended again, as the Job watch saw it.
	victims := resuspended(rec)
	if got := slices.Sorted(maps.Keys(victims)); len(got) != 2 || !strings.HasPrefix(got[0], "low-") || !strings.HasPrefix(got[1], "low-") {
		t.Fatalf("Jobs suspended again when high was admitted: %v; want exactly two of low-0, low-1, low-2 (the fewest that make room, and not mid)", got)
	}
	for _, name := range slices.Sorted(maps.Keys(victims)) {
		waitCandidateAffinity(ctx, t, s.client, ns, name, 2, 30*time.Second)
		j := getJob(ctx, t, s.client, ns, name)
		if !framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StatePending {
			t.Errorf("victim %s: suspend=%s %s=%q, want suspended and pending", name, ptrString(j.Spec.Suspend), framework.LabelState, j.Labels[framework.LabelState])
		}
		pods, err := framework.JobPods(ctx, s.client, j)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) > 0 {
			t.Errorf("victim %s still has %d pods (e.g. %s, phase %s) after the preemptor was admitted", name, len(pods), pods[0].Name, pods[0].Status.Phase)
		}
	}
	for _, j := range fill {
		if _, ok := victims[j.Name]; ok {
			continue
		}
		got := getJob(ctx, t, s.client, ns, j.Name)
		if framework.Suspended(got) || got.Labels[framework.LabelState] != framework.StateAdmitted {
			t.Errorf("%s was not a victim but is suspend=%s %s=%q", j.Name, ptrString(got.Spec.Suspend), framework.LabelState, got.Labels[framework.LabelState])
		}
	}

	checkPreemptionEvents(ctx, t, s.client, ns, high.Name, 1000, victims, map[string]int32{"low-0": 100, "low-1": 100, "low-2": 100},
		"within ClusterQueue "+queue)

	waitFinishedAndLabelled(ctx, t, s.client, ns, len(fill)+1, 3*time.Minute)
	checkCompleted(ctx, t, s.client, ns, len(fill)+1)
	checkHistories(t, rec, victims)
	checkUsage(t, usage.Stop(), "ClusterQueue "+queue, 5, 5)
}

// ClusterQueue b (2 GPUs) borrows all of a's idle 4 GPUs with six 1-GPU
// Jobs. A Job of a asking for 3 GPUs arrives: tally reclaims the quota,
// preempting exactly three of b's Jobs (what a needs, and b keeps its own
// nominal 2), and says so in Events; every Job finishes.
func TestCohortReclaim(t *testing.T) {
	reclaimAcross(t, reclaimRun{
		docs: reclaimQueueDocs, cohort: "e2e-reclaim", lender: "e2e-reclaim-a", borrower: "e2e-reclaim-b",
		borrowers: 6, victims: 3, running: 3,
		why: "a needs 3 GPUs and b must keep its nominal 2", runningWhy: "its nominal 2 plus 1 still borrowed",
	})
}

// reclaimRun is a reclaim across a cohort (or a tree of cohorts) of 6
// GPUs: the borrower's ClusterQueue runs borrowers 1-GPU Jobs, beyond its
// nominal quota; then a 3-GPU Job of the lender's arrives and reclaims.
// Each queue's namespace has the queue's name.
type reclaimRun struct {
	docs, cohort, lender, borrower string
	// borrowers, victims and running are the borrower's Jobs, those the
	// reclaim preempts, and the GPUs it runs after it.
	borrowers, victims int
	running            int64
	why, runningWhy    string
}

// reclaimAcross runs r: the reclaimer is admitted, exactly r.victims of
// the borrower's Jobs are preempted, their pods gone, with Events that
// say why; the lender's Jobs are never suspended; read from the pods, the
// cohort never runs more than 6 GPUs; every Job finishes.
func reclaimAcross(t *testing.T, r reclaimRun) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	nsA, nsB, qA, qB := r.lender, r.borrower, r.lender, r.borrower
	useQueues(ctx, t, s, []string{qA, qB}, r.docs)
	for ns, q := range map[string]string{nsA: qA, nsB: qB} {
		if err := framework.BindNamespace(ctx, s.client, ns, q); err != nil {
			t.Fatalf("binding namespace %s: %v", ns, err)
		}
	}
	recA, _ := observe(ctx, t, s, nsA)
	recB, _ := observe(ctx, t, s, nsB)
	usage := watchUsage(ctx, t, s, map[string]string{nsA: qA, nsB: qB}, []framework.UsageLimit{
		{Name: "ClusterQueue " + qA, Queues: []string{qA}, Max: 6},
		{Name: "ClusterQueue " + qB, Queues: []string{qB}, Max: 6},
		{Name: "cohort " + r.cohort, Queues: []string{qA, qB}, Max: 6},
	})

	var borrowers []*batchv1.Job
	for i := range r.borrowers {
		borrowers = append(borrowers, framework.NewJob(nsB, fmt.Sprintf("borrow-%d", i)).GPUs(1).Runtime(25*time.Second).Obj())
	}
	if err := framework.CreateJobs(ctx, s.client, borrowers...); err != nil {
		t.Fatal(err)
	}
	waitRunning(ctx, t, s.client, nsB, names(borrowers), time.Minute)

	reclaimer := framework.NewJob(nsA, "reclaimer").Parallelism(3).GPUs(1).Runtime(5 * time.Second).Obj()
	if err := framework.CreateJobs(ctx, s.client, reclaimer); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitAdmitted(ctx, t, s.client, reclaimer, time.Minute)
	t.Logf("reclaimer admitted %s after its creation", time.Since(start).Round(time.Millisecond))

	if v := resuspended(recA); len(v) > 0 {
		t.Errorf("Jobs of %s suspended again: %v", nsA, slices.Sorted(maps.Keys(v)))
	}
	victims := resuspended(recB)
	if len(victims) != r.victims {
		t.Fatalf("Jobs of %s suspended again when the reclaimer was admitted: %v; want exactly %d (%s)",
			nsB, slices.Sorted(maps.Keys(victims)), r.victims, r.why)
	}
	jobs, err := framework.ListJobs(ctx, s.client, nsB)
	if err != nil {
		t.Fatal(err)
	}
	var running int64
	for i := range jobs {
		j := &jobs[i]
		if _, ok := victims[j.Name]; ok {
			if pods, err := framework.JobPods(ctx, s.client, j); err != nil {
				t.Fatal(err)
			} else if len(pods) > 0 {
				t.Errorf("victim %s still has %d pods after the reclaimer was admitted", j.Name, len(pods))
			}
			continue
		}
		if j.Labels[framework.LabelState] == framework.StateAdmitted && !framework.Finished(j) {
			running += framework.GPUsOf(j)
		}
	}
	if running != r.running {
		t.Errorf("ClusterQueue %s runs %d GPUs after the reclaim, want %d (%s)", qB, running, r.running, r.runningWhy)
	}

	prios := map[string]int32{}
	for _, j := range borrowers {
		prios[j.Name] = 0
	}
	checkPreemptionEvents(ctx, t, s.client, nsB, nsA+"/"+reclaimer.Name, 0, victims, prios, "to reclaim quota lent to cohort "+r.cohort)

	waitFinishedAndLabelled(ctx, t, s.client, nsA, 1, 3*time.Minute)
	waitFinishedAndLabelled(ctx, t, s.client, nsB, len(borrowers), 3*time.Minute)
	checkCompleted(ctx, t, s.client, nsA, 1)
	checkCompleted(ctx, t, s.client, nsB, len(borrowers))
	checkHistories(t, recA, nil)
	checkHistories(t, recB, victims)
	rep := usage.Stop()
	checkUsage(t, rep, "cohort "+r.cohort, 6, 6)
	if rep.MaxPods["ClusterQueue "+qB] < int64(r.borrowers) {
		t.Errorf("ClusterQueue %s never borrowed: at most %d GPUs in pods, want %d", qB, rep.MaxPods["ClusterQueue "+qB], r.borrowers)
	}
}

// useQueues adds config documents to the suite's config until the test
// ends, and waits until tally knows the ClusterQueues named.
func useQueues(ctx context.Context, t *testing.T, s *suite, queues []string, docs ...string) {
	t.Helper()
	cfg := s.config
	for _, d := range docs {
		cfg += "---\n" + d
	}
	if err := framework.ApplyConfig(ctx, s.client, tallyNamespace, cfg); err != nil {
		t.Fatalf("applying config: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := framework.ApplyConfig(ctx, s.client, tallyNamespace, s.config); err != nil {
			t.Errorf("restoring the config: %v", err)
		}
	})
	if err := framework.WaitClusterQueues(ctx, s.client, 30*time.Second, queues...); err != nil {
		t.Fatalf("tally did not load ClusterQueues %v: %v", queues, err)
	}
}

// observe records the Jobs and the Events of ns until the test ends; if
// the test fails, it logs their merged timeline (or, when long, writes it
// to a file and logs where).
func observe(ctx context.Context, t *testing.T, s *suite, ns string) (*framework.Recorder, *framework.EventLog) {
	t.Helper()
	start := time.Now()
	rec, err := framework.Record(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	events, err := framework.WatchEvents(ctx, s.client, ns)
	if err != nil {
		rec.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rec.Stop()
		if err := events.Stop(); err != nil {
			t.Logf("event watch of %s: %v", ns, err)
		}
		if t.Failed() {
			logTimeline(t, ns, start, rec, events)
		}
	})
	return rec, events
}

// timelineLines is how long a timeline may be to go in the test log.
const timelineLines = 400

func logTimeline(t *testing.T, ns string, start time.Time, rec *framework.Recorder, events *framework.EventLog) {
	type line struct {
		at  time.Time
		txt string
	}
	var lines []line
	for _, o := range rec.Observations() {
		lines = append(lines, line{o.At, fmt.Sprintf("job %s/%s %s", ns, o.Job, o.Kind)})
	}
	for _, e := range events.Records() {
		lines = append(lines, line{e.At, fmt.Sprintf("event %s %s/%s %s: %s", e.Type, e.Kind, e.Object, e.Reason, e.Message)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %s (+%.3fs) %s", l.at.Format("15:04:05.000"), l.at.Sub(start).Seconds(), l.txt)
	}
	if len(lines) <= timelineLines {
		t.Logf("timeline of %s (time seen, and seconds since its watches started):%s", ns, b.String())
		return
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("tally-e2e-%d-%s.timeline", os.Getpid(), ns))
	if err := os.WriteFile(path, []byte(b.String()+"\n"), 0o644); err != nil {
		t.Logf("writing the timeline of %s: %v", ns, err)
		return
	}
	t.Logf("timeline of %s (%d lines) written to %s", ns, len(lines), path)
}

// createPriorityClass creates a Kubernetes PriorityClass for the test.
func createPriorityClass(ctx context.Context, t *testing.T, s *suite, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if err := s.client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating PriorityClass %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.client.Delete(ctx, pc); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting PriorityClass %s: %v", name, err)
		}
	})
}

// watchUsage starts a framework.UsageWatch of GPUs for the test.
func watchUsage(ctx context.Context, t *testing.T, s *suite, nsQueue map[string]string, limits []framework.UsageLimit) *framework.UsageWatch {
	t.Helper()
	u, err := framework.WatchUsage(ctx, s.client, framework.ResourceGPU, nsQueue, limits)
	if err != nil {
		t.Fatalf("watching usage: %v", err)
	}
	t.Cleanup(func() { u.Stop() })
	return u
}

// checkUsage fails the test for every state that exceeded a limit, and
// logs what was checked. The usage of name must have reached minPeak at
// some point, or the test did not contend for quota.
func checkUsage(t *testing.T, rep framework.UsageReport, name string, limit, minPeak int64) {
	t.Helper()
	t.Logf("usage checked in %d Job states and %d pod states; %s peaked at %d GPUs admitted, %d in pods (limit %d)",
		rep.JobStates, rep.PodStates, name, rep.MaxJobs[name], rep.MaxPods[name], limit)
	for _, v := range rep.Violations {
		t.Errorf("quota overcommitted: %s", v)
	}
	if rep.ViolationCount > len(rep.Violations) {
		t.Errorf("... %d overcommitted states in all", rep.ViolationCount)
	}
	if rep.Err != nil {
		t.Errorf("usage watch: %v", rep.Err)
	}
	if rep.Gaps > 0 {
		t.Logf("the usage watches re-listed %d times; states in between were not checked", rep.Gaps)
	}
	if rep.MaxPods[name] < minPeak {
		t.Errorf("%s never ran %d GPUs at once (peak %d): the test did not fill the quota", name, minPeak, rep.MaxPods[name])
	}
}

func names(jobs []*batchv1.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Name
	}
	return out
}

func getJob(ctx context.Context, t *testing.T, c client.Reader, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		t.Fatal(err)
	}
	return j
}

// waitRunning waits until the named Jobs of ns are admitted and all their
// pods are active.
func waitRunning(ctx context.Context, t *testing.T, c client.Reader, ns string, want []string, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		var notYet []string
		for _, name := range want {
			j := &batchv1.Job{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
				return false, err.Error(), nil
			}
			if framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StateAdmitted || j.Status.Active < ptrOr(j.Spec.Parallelism, 1) {
				notYet = append(notYet, fmt.Sprintf("%s(suspend=%s %s=%q active=%d)", name, ptrString(j.Spec.Suspend), framework.LabelState, j.Labels[framework.LabelState], j.Status.Active))
			}
		}
		return len(notYet) == 0, "not running: " + strings.Join(notYet, " "), nil
	})
	if err != nil {
		t.Fatalf("waiting for Jobs of %s to run: %v", ns, err)
	}
}

// waitCandidateAffinity waits until the stopped victim ns/name has its
// candidate affinity back (terms required terms) while it still waits.
func waitCandidateAffinity(ctx context.Context, t *testing.T, c client.Reader, ns, name string, terms int, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		j := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return false, err.Error(), nil
		}
		var got int
		if a := j.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			got = len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
		}
		if !framework.Suspended(j) {
			return false, "", fmt.Errorf("victim %s was admitted again with %d affinity terms before its candidate affinity (%d terms) was restored", name, got, terms)
		}
		return got == terms, fmt.Sprintf("%d required terms, startTime=%v", got, j.Status.StartTime), nil
	})
	if err != nil {
		t.Fatalf("victim %s/%s: %v", ns, name, err)
	}
}

// waitAdmitted waits until Job j is admitted: un-suspended and labelled.
func waitAdmitted(ctx context.Context, t *testing.T, c client.Reader, j *batchv1.Job, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		got := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(j), got); err != nil {
			return false, err.Error(), nil
		}
		return !framework.Suspended(got) && got.Labels[framework.LabelState] == framework.StateAdmitted,
			fmt.Sprintf("suspend=%s %s=%q", ptrString(got.Spec.Suspend), framework.LabelState, got.Labels[framework.LabelState]), nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s not admitted: %v", j.Namespace, j.Name, err)
	}
}

// resuspended returns the Jobs the recorder saw suspended again, with how
// many times.
func resuspended(rec *framework.Recorder) map[string]int {
	out := map[string]int{}
	for _, o := range rec.Observations() {
		if o.Kind == framework.Resuspended {
			out[o.Job]++
		}
	}
	return out
}

// checkPreemptionEvents checks the Preempting Event of the preemptor
// (namespace/name, or a name in ns) and the Preempted Event of each victim
// in ns: each names the other, with the right priorities and reason.
func checkPreemptionEvents(ctx context.Context, t *testing.T, c client.Reader, ns, preemptor string, preemptorPrio int32, victims map[string]int, victimPrio map[string]int32, reason string) {
	t.Helper()
	if !strings.Contains(preemptor, "/") {
		preemptor = ns + "/" + preemptor
	}
	pns, pname, _ := strings.Cut(preemptor, "/")
	var preempting []corev1.Event
	var preempted map[string][]corev1.Event
	err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		byJob, err := framework.JobEvents(ctx, c, pns, framework.ReasonPreempting)
		if err != nil {
			return false, err.Error(), nil
		}
		preempting = byJob[pname]
		if preempted, err = framework.JobEvents(ctx, c, ns, framework.ReasonPreempted); err != nil {
			return false, err.Error(), nil
		}
		missing := 0
		for v := range victims {
			if len(preempted[v]) == 0 {
				missing++
			}
		}
		return len(preempting) > 0 && missing == 0, fmt.Sprintf("%d Preempting Events on %s, %d victims without a Preempted Event", len(preempting), preemptor, missing), nil
	})
	if err != nil {
		t.Fatalf("Events of the preemption: %v", err)
	}

	if len(preempting) != 1 || framework.EventCount(&preempting[0]) != 1 {
		t.Errorf("%s has %d Preempting Events, want one: %v", preemptor, len(preempting), messages(preempting))
	}
	e := preempting[0]
	if e.Type != corev1.EventTypeNormal {
		t.Errorf("Preempting Event has type %s, want Normal", e.Type)
	}
	listed, err := framework.ParsePreempting(e.Message)
	if err != nil {
		t.Errorf("Preempting Event on %s: %v", preemptor, err)
	}
	var got, want []string
	for _, v := range listed {
		got = append(got, fmt.Sprintf("%s (priority %d)", v.Key, v.Priority))
	}
	for v := range victims {
		want = append(want, fmt.Sprintf("%s/%s (priority %d)", ns, v, victimPrio[v]))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("Preempting Event on %s lists %v, want the Jobs preempted: %v (message %q)", preemptor, got, want, e.Message)
	}

	for name, es := range preempted {
		if _, ok := victims[name]; !ok {
			t.Errorf("%s/%s was not preempted but has Preempted Events: %v", ns, name, messages(es))
		}
	}
	for v := range victims {
		es := preempted[v]
		if len(es) != 1 || framework.EventCount(&es[0]) != 1 {
			t.Errorf("%s/%s has Preempted Events %v, want exactly one", ns, v, messages(es))
			continue
		}
		if es[0].Type != corev1.EventTypeWarning {
			t.Errorf("Preempted Event of %s has type %s, want Warning", v, es[0].Type)
		}
		rel := "="
		switch {
		case preemptorPrio > victimPrio[v]:
			rel = ">"
		case preemptorPrio < victimPrio[v]:
			rel = "<"
		}
		wantMsg := fmt.Sprintf("Preempted by %s (priority %d %s %d) %s", preemptor, preemptorPrio, rel, victimPrio[v], reason)
		if es[0].Message != wantMsg {
			t.Errorf("Preempted Event of %s/%s says %q, want %q", ns, v, es[0].Message, wantMsg)
		}
	}
}

func messages(es []corev1.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%q x%d", e.Message, framework.EventCount(&e))
	}
	return out
}

// checkCompleted checks that want Jobs of ns have the Complete condition.
func checkCompleted(ctx context.Context, t *testing.T, c client.Reader, ns string, want int) {
	t.Helper()
	jobs, err := framework.ListJobs(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for i := range jobs {
		if framework.Completed(&jobs[i]) {
			done++
		} else {
			t.Errorf("Job %s/%s did not complete: %s", ns, jobs[i].Name, conditions(&jobs[i]))
		}
	}
	if done != want {
		t.Errorf("%d Jobs of %s completed, want %d", done, ns, want)
	}
}

// checkHistories checks the states each Job of the recorder went through:
// a victim pending, admitted, pending again, admitted again and finished;
// any other Job pending, admitted and finished.
func checkHistories(t *testing.T, rec *framework.Recorder, victims map[string]int) {
	t.Helper()
	p, a, f := framework.StatePending, framework.StateAdmitted, framework.StateFinished
	for name, h := range rec.Histories() {
		want, admissions := []string{p, a, f}, 1
		if _, ok := victims[name]; ok {
			want, admissions = []string{p, a, p, a, f}, 2
		}
		if !slices.Equal(h.States, want) || h.Unsuspends != admissions {
			t.Errorf("Job %s went through %v with %d admissions, want %v with %d", name, h.States, h.Unsuspends, want, admissions)
		}
	}
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
