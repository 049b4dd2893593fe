package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"tally.dev/tally/e2e/perf/scenario"
)

// Names from tally's contract.
const (
	labelState         = "tally.dev/state"
	labelQueue         = "tally.dev/cluster-queue"
	labelManaged       = "tally.dev/managed"
	labelPriorityClass = "tally.dev/priority-class"
	annotationQueue    = "tally.dev/cluster-queue"
	stateAdmitted      = "admitted"
	statePending       = "pending"
	stateFinished      = "finished"
	configMapName      = "tally-config"
	configKey          = "queues.yaml"
	ledgerLease        = "tally-ledger"
	configurationName  = "tally"
	// annotationTopology is the placement tally writes on a Job it
	// admits on a flavor with a topology.
	annotationTopology = "tally.dev/topology"
)

// The pod-template annotations of Kueue's topology requests, which tally
// reads.
const (
	annotationRequiredTopology      = "kueue.x-k8s.io/podset-required-topology"
	annotationPreferredTopology     = "kueue.x-k8s.io/podset-preferred-topology"
	annotationSliceRequiredTopology = "kueue.x-k8s.io/podset-slice-required-topology"
	annotationSliceSize             = "kueue.x-k8s.io/podset-slice-size"
)

type phase int

const (
	// notCreated: its time has not come.
	notCreated phase = iota
	// waiting: created (or preempted) and not admitted.
	waiting
	// running: admitted; its completion is due after its runtime.
	running
	// finishing: its completion write is on its way.
	finishing
	finished
)

func (p phase) String() string {
	switch p {
	case notCreated:
		return "not created"
	case waiting:
		return "waiting"
	case running:
		return "running"
	case finishing:
		return "finishing"
	case finished:
		return "finished"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// trackedJob is the runner's record of one Job.
type trackedJob struct {
	spec  *scenario.Job
	index int // in the plan's Jobs
	due   time.Time

	mu    sync.Mutex
	phase phase
	rv    string
	// gen is the Job's metadata.generation when its current run began:
	// only a preemption changes its spec after an admission.
	gen     int64
	created time.Time
	// admittedAt is the start of the current run (the last admission),
	// first the first one; seen is when the watch first saw the Job.
	admittedAt, first, done, seen time.Time
	held                          time.Duration
	admissions, preempted         int
	// run counts runs, so a completion due for a preempted run is dropped.
	run   int
	timer *time.Timer
	// labelledFinished: tally's finished label was seen.
	labelledFinished bool
	// uid is the Job's; pod is the name of its current run's pod
	// (tracker.pods), podMade closed once its create returned.
	uid     types.UID
	pod     string
	podMade chan struct{}
}

// tracker creates the Jobs, follows them through the informer and
// completes them.
type tracker struct {
	// cs creates Jobs; ctl completes and stops them (see session).
	cs, ctl kubernetes.Interface
	jobs    map[string]*trackedJob // by namespace/name
	list    []*trackedJob          // parallel to the plan's Jobs
	// ctx ends the completions in flight.
	ctx context.Context
	// onCreated, when set, is told the index of each Job once it exists,
	// and onFinished once its completion is written.
	onCreated, onFinished func(i int)
	// pods: play the Jobs' pods too (Options.Pods).
	pods                 bool
	podsMade, podRetries atomic.Int64

	created, admitted, finished, labelled atomic.Int64
	admissions, preemptions               atomic.Int64
	// placed counts the admissions seen with tally's topology placement.
	placed                       atomic.Int64
	createRetries, finishRetries atomic.Int64
	allFinished, allLabelled     chan struct{}
	closeFinished, closeLabelled sync.Once

	errMu sync.Mutex
	err   error
}

func newTracker(ctx context.Context, cs, ctl kubernetes.Interface, p *scenario.Plan, start time.Time) *tracker {
	t := &tracker{cs: cs, ctl: ctl, ctx: ctx, jobs: make(map[string]*trackedJob, len(p.Jobs)), allFinished: make(chan struct{}), allLabelled: make(chan struct{})}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		tj := &trackedJob{spec: j, index: i, due: start.Add(j.Arrival)}
		t.jobs[j.Namespace+"/"+j.Name] = tj
		t.list = append(t.list, tj)
	}
	return t
}

func (t *tracker) fail(err error) {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

func (t *tracker) firstErr() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.err
}

// dispatch creates every Job at its due time, open-loop: a scheduler hands
// due Jobs to a pool of workers, so that a slow create delays no other.
func (t *tracker) dispatch(ctx context.Context, workers int, classes []scenario.Class) {
	work := make(chan *trackedJob, len(t.list))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tj := range work {
				t.create(ctx, tj, classes[tj.spec.Class])
			}
		}()
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, tj := range t.list {
		if d := time.Until(tj.due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		work <- tj
	}
}

func (t *tracker) create(ctx context.Context, tj *trackedJob, class scenario.Class) {
	job := newJob(tj.spec, class)
	tj.mu.Lock()
	tj.created = time.Now()
	tj.phase = waiting
	tj.mu.Unlock()
	t.created.Add(1)
	for attempt := 0; ; attempt++ {
		_, err := t.cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) && attempt > 0 {
			if t.onCreated != nil {
				t.onCreated(tj.index)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 20 {
			t.fail(fmt.Errorf("creating Job %s/%s: %w", job.Namespace, job.Name, err))
			return
		}
		t.createRetries.Add(1)
		sleepCtx(ctx, backoff(attempt))
	}
}

// newJob is Job j of class: j.Pods pods (parallelism and completions) of
// j.PodCPUMilli each, with the class's placement, if any, in its pod
// template's annotations.
func newJob(j *scenario.Job, class scenario.Class) *batchv1.Job {
	pods := max(j.Pods, 1)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: j.Namespace, Name: j.Name,
			Labels: map[string]string{labelPriorityClass: scenario.PriorityClassName(class.Name)},
		},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(pods),
			Completions:  ptr.To(pods),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: placementAnnotations(class.Placement)},
				Spec:       podSpec(j),
			},
		},
	}
}

// placementAnnotations are the pod-template annotations that ask for a
// placement; nil for none.
func placementAnnotations(p *scenario.Placement) map[string]string {
	if p == nil {
		return nil
	}
	switch p.Constraint {
	case scenario.PlacementRequired:
		return map[string]string{annotationRequiredTopology: p.Level}
	case scenario.PlacementPreferred:
		return map[string]string{annotationPreferredTopology: p.Level}
	case scenario.PlacementBalanced:
		return map[string]string{annotationSliceRequiredTopology: p.Level, annotationSliceSize: strconv.Itoa(int(p.SliceSize))}
	}
	return nil
}

// podSpec is the pod template of Job j: one container that requests the
// pod's cpu (the whole Job's, for a Job that does not say).
func podSpec(j *scenario.Job) corev1.PodSpec {
	milli := j.PodCPUMilli
	if milli == 0 {
		milli = j.CPUMilli
	}
	return corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI),
			}},
		}},
	}
}

// observe folds one Job update from the informer into its record: an
// admission starts its run, a suspension while it runs (and before its
// completion) is a preemption.
func (t *tracker) observe(job *batchv1.Job) {
	tj := t.jobs[job.Namespace+"/"+job.Name]
	if tj == nil {
		return
	}
	now := time.Now()
	suspended := job.Spec.Suspend != nil && *job.Spec.Suspend
	tj.mu.Lock()
	defer tj.mu.Unlock()
	tj.rv = job.ResourceVersion
	tj.uid = job.UID
	if tj.seen.IsZero() {
		tj.seen = now
	}
	if !tj.labelledFinished && job.Labels[labelState] == stateFinished {
		tj.labelledFinished = true
		if t.labelled.Add(1) == int64(len(t.list)) {
			t.closeLabelled.Do(func() { close(t.allLabelled) })
		}
	}
	admitted := !suspended && job.Labels[labelState] == stateAdmitted
	inRun := tj.phase == running || tj.phase == finishing
	switch {
	case tj.phase == waiting && admitted:
		t.begin(tj, job, now)
	case inRun && suspended && job.Status.CompletionTime == nil:
		// A suspension of a Job whose completion is already written
		// came too late to stop the run: complete records its finish.
		run, pod, made := t.interrupt(tj, now)
		go func() {
			if pod != "" {
				t.endPod(tj, pod, made, false)
			}
			t.stopped(tj, run, job.ResourceVersion)
		}()
	case inRun && admitted && job.Generation != tj.gen && job.Status.CompletionTime == nil:
		// Preempted and admitted again between two sightings: a relist
		// after a cut-off watch shows only the latest state. The run
		// ends as a preemption (its completion, if on its way, loses on
		// the resourceVersion) and the new admission's run begins.
		_, pod, made := t.interrupt(tj, now)
		if pod != "" {
			go t.endPod(tj, pod, made, false)
		}
		t.begin(tj, job, now)
	}
}

// begin starts a run for an admission seen now: its completion falls
// due after the Job's runtime. tj.mu is held.
func (t *tracker) begin(tj *trackedJob, job *batchv1.Job, now time.Time) {
	tj.phase = running
	tj.gen = job.Generation
	tj.admittedAt = now
	if tj.admissions == 0 {
		tj.first = now
		t.admitted.Add(1)
	}
	tj.admissions++
	t.admissions.Add(1)
	if job.Annotations[annotationTopology] != "" {
		t.placed.Add(1)
	}
	tj.run++
	run := tj.run
	if t.pods {
		tj.pod, tj.podMade = fmt.Sprintf("%s-%d", tj.spec.Name, run), make(chan struct{})
		go t.startPod(tj, tj.pod, tj.uid, &job.Spec.Template.Spec, tj.podMade)
	}
	tj.timer = time.AfterFunc(tj.spec.Runtime, func() { t.complete(tj, run) })
}

// interrupt ends the current run as a preemption seen now, and returns
// the number of the next run and the ended run's pod. tj.mu is held.
func (t *tracker) interrupt(tj *trackedJob, now time.Time) (int, string, chan struct{}) {
	tj.timer.Stop()
	tj.held += now.Sub(tj.admittedAt)
	tj.preempted++
	t.preemptions.Add(1)
	tj.phase = waiting
	tj.run++
	return tj.run, tj.pod, tj.podMade
}

// stopped answers a preemption as the job controller does once the pods
// are gone: status.startTime cleared and the Suspended condition set.
// Without it tally would have to wait out its grace for a Job that shows
// no sign of stopping (see the ledger's suspendGrace). It is guarded by
// the resourceVersion of the suspension, and gives up once the Job moved
// on (admitted again, or completed by a run that got there first).
func (t *tracker) stopped(tj *trackedJob, run int, rv string) {
	jobs := t.ctl.BatchV1().Jobs(tj.spec.Namespace)
	for attempt := 0; attempt < 20; attempt++ {
		now := metav1.Now()
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": rv},
			"status": map[string]any{"startTime": nil, "active": 0, "conditions": []batchv1.JobCondition{{
				Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", Message: "Job suspended",
				LastTransitionTime: now, LastProbeTime: now,
			}}},
		})
		if err != nil {
			t.fail(err)
			return
		}
		_, err = jobs.Patch(t.ctx, tj.spec.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
		if err == nil || t.ctx.Err() != nil {
			return
		}
		t.finishRetries.Add(1)
		if !apierrors.IsConflict(err) {
			sleepCtx(t.ctx, backoff(attempt))
			continue
		}
		job, err := jobs.Get(t.ctx, tj.spec.Name, metav1.GetOptions{})
		if err != nil || job.Spec.Suspend == nil || !*job.Spec.Suspend || job.Status.CompletionTime != nil {
			return
		}
		tj.mu.Lock()
		moved := tj.run != run
		tj.mu.Unlock()
		if moved {
			return
		}
		rv = job.ResourceVersion
	}
}

// complete marks a Job's run finished through the status subresource, as
// the job controller would once its pod succeeded. The patch is guarded by
// the resourceVersion of the admitted Job, so it loses against a
// preemption that got there first.
func (t *tracker) complete(tj *trackedJob, run int) {
	tj.mu.Lock()
	if tj.run != run || tj.phase != running {
		tj.mu.Unlock()
		return
	}
	tj.phase = finishing
	rv, gen, started := tj.rv, tj.gen, tj.admittedAt
	pod, made := tj.pod, tj.podMade
	tj.mu.Unlock()
	if pod != "" {
		t.endPod(tj, pod, made, true)
	}
	jobs := t.ctl.BatchV1().Jobs(tj.spec.Namespace)
	for attempt := 0; ; attempt++ {
		now := time.Now()
		body, err := completionPatch(rv, started, now)
		if err != nil {
			t.fail(err)
			return
		}
		_, err = jobs.Patch(t.ctx, tj.spec.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
		if apierrors.IsConflict(err) {
			t.finishRetries.Add(1)
			// Something wrote the Job since the version this run knows.
			// Read it afresh: on a big run the informer can lag by many
			// seconds. A spec changed since the run began means a
			// preemption (and maybe a new admission), which ends this run
			// once the informer delivers it, so a run is never completed
			// on behalf of another. A completion already there is this
			// run's own, from an attempt whose answer was lost (the
			// runner is the Jobs' only job controller). Otherwise try
			// again on the new version.
			job, gerr := jobs.Get(t.ctx, tj.spec.Name, metav1.GetOptions{})
			tj.mu.Lock()
			stale := tj.run != run
			tj.mu.Unlock()
			if stale || (gerr == nil && job.Generation != gen) {
				return
			}
			if gerr == nil && job.Status.CompletionTime != nil {
				err = nil
			} else if gerr == nil && attempt < 100 {
				rv = job.ResourceVersion
				continue
			}
		}
		if err == nil {
			done := time.Now()
			tj.mu.Lock()
			current := tj.run == run
			if current {
				tj.phase = finished
				tj.done = done
				tj.held += done.Sub(tj.admittedAt)
			}
			tj.mu.Unlock()
			if current && t.onFinished != nil {
				t.onFinished(tj.index)
			}
			if t.finished.Add(1) == int64(len(t.list)) {
				t.closeFinished.Do(func() { close(t.allFinished) })
			}
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.finishRetries.Add(1)
		}
		if attempt >= 20 {
			t.fail(fmt.Errorf("completing Job %s/%s: %w", tj.spec.Namespace, tj.spec.Name, err))
			return
		}
		sleepCtx(t.ctx, backoff(attempt))
	}
}

// startPod creates the pod of a Job's run, as the job controller does
// once the Job is no longer suspended: controlled by the Job, with its
// template, placed where the admitted Job's template (admitted, as seen)
// places it. Tally's pod gate judges it. A create that fails is tried a
// few times, then left: the run goes on without its pod.
func (t *tracker) startPod(tj *trackedJob, name string, uid types.UID, admitted *corev1.PodSpec, made chan struct{}) {
	defer close(made)
	spec := podSpec(tj.spec)
	spec.NodeSelector, spec.Affinity, spec.Tolerations = admitted.NodeSelector, admitted.Affinity, admitted.Tolerations
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: tj.spec.Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: tj.spec.Name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: spec,
	}
	for attempt := 0; attempt < 5; attempt++ {
		_, err := t.ctl.CoreV1().Pods(pod.Namespace).Create(t.ctx, pod, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			t.podsMade.Add(1)
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		t.podRetries.Add(1)
		sleepCtx(t.ctx, backoff(attempt))
	}
}

// endPod ends a run's pod once its create returned: marked succeeded
// when the run completes (before the Job's completion is written, as the
// job controller sees its pod succeed first), deleted when it is
// preempted.
func (t *tracker) endPod(tj *trackedJob, name string, made chan struct{}, succeeded bool) {
	select {
	case <-made:
	case <-t.ctx.Done():
		return
	}
	pods := t.ctl.CoreV1().Pods(tj.spec.Namespace)
	for attempt := 0; attempt < 5; attempt++ {
		var err error
		if succeeded {
			_, err = pods.Patch(t.ctx, name, types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`), metav1.PatchOptions{}, "status")
		} else {
			err = pods.Delete(t.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		if err == nil || apierrors.IsNotFound(err) || t.ctx.Err() != nil {
			return
		}
		t.podRetries.Add(1)
		sleepCtx(t.ctx, backoff(attempt))
	}
}

// completionPatch is what the job controller writes when a one-pod Job
// succeeds: the success criteria met, then Complete, with its start and
// completion times.
func completionPatch(rv string, started, now time.Time) ([]byte, error) {
	start, end := metav1.NewTime(started), metav1.NewTime(now)
	conditions := []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"status": map[string]any{
			"startTime": start, "completionTime": end, "succeeded": 1, "ready": 0, "active": 0,
			"conditions": conditions,
		},
	})
}

// outcomes returns what happened to each Job, in time since start.
func (t *tracker) outcomes(start time.Time) ([]scenario.Outcome, []time.Duration) {
	out := make([]scenario.Outcome, len(t.list))
	late := make([]time.Duration, 0, len(t.list))
	at := func(ts time.Time) time.Duration {
		if ts.IsZero() {
			return scenario.Never
		}
		return ts.Sub(start)
	}
	for i, tj := range t.list {
		tj.mu.Lock()
		out[i] = scenario.Outcome{
			Created: at(tj.created), Admitted: at(tj.first), Finished: at(tj.done),
			Held: tj.held, Admissions: tj.admissions, Preemptions: tj.preempted,
		}
		if tj.phase == running || tj.phase == finishing {
			out[i].Held += time.Since(tj.admittedAt)
		}
		if !tj.created.IsZero() {
			late = append(late, tj.created.Sub(tj.due))
		}
		tj.mu.Unlock()
	}
	return out, late
}

// sightings are what the watch saw of each Job.
func (t *tracker) sightings() []sighting {
	out := make([]sighting, len(t.list))
	for i, tj := range t.list {
		tj.mu.Lock()
		out[i] = sighting{class: tj.spec.Class, seen: tj.seen, first: tj.first}
		if !tj.first.IsZero() {
			out[i].last = tj.admittedAt
		}
		tj.mu.Unlock()
	}
	return out
}

// viewDelays are how long after first (the API server's answer to each
// Job's first admission write, by namespace/name) the watch saw each of
// those Jobs admitted.
func (t *tracker) viewDelays(first map[string]time.Time) []time.Duration {
	var out []time.Duration
	for _, tj := range t.list {
		at, ok := first[tj.spec.Namespace+"/"+tj.spec.Name]
		tj.mu.Lock()
		seen := tj.first
		tj.mu.Unlock()
		if ok && !seen.IsZero() {
			out = append(out, seen.Sub(at))
		}
	}
	return out
}

// stop cancels the completion timers of Jobs still running.
func (t *tracker) stop() {
	for _, tj := range t.list {
		tj.mu.Lock()
		if tj.timer != nil {
			tj.timer.Stop()
		}
		tj.mu.Unlock()
	}
}

func backoff(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 2*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
