package perf

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/e2e/perf/scenario"
)

// TestLabelsFinished: the run waits for finished labels unless tally's
// arguments turn them off, in either flag form; the last one counts.
func TestLabelsFinished(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--pprof-bind-address", "127.0.0.1:0"}, true},
		{[]string{"--finished-label=off"}, false},
		{[]string{"-finished-label", "off"}, false},
		{[]string{"--finished-label=lazy"}, true},
		{[]string{"--finished-label=off", "--finished-label=eager"}, true},
	} {
		if got := labelsFinished(tc.args); got != tc.want {
			t.Errorf("labelsFinished(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestStripJobKeepsWhatTheTrackerReads: the informer's copy keeps every
// field that observe and complete read. Without the generation, every
// conflicting completion looked like a preemption and left its Job
// unfinished.
func TestStripJobKeepsWhatTheTrackerReads(t *testing.T) {
	suspend, completed := false, metav1.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench-0-0", Name: "small-1", ResourceVersion: "42", Generation: 2,
			Labels:      map[string]string{labelState: stateAdmitted},
			Annotations: map[string]string{"dropped": "yes", annotationTopology: "bench;main=b/r/n:2"},
			UID:         "u",
		},
		Spec: batchv1.JobSpec{Suspend: &suspend, Parallelism: new(int32), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "a"}, Containers: []corev1.Container{{Name: "dropped"}}}}},
		Status: batchv1.JobStatus{CompletionTime: &completed, Succeeded: 1},
	}
	got, err := stripJob(job)
	if err != nil {
		t.Fatal(err)
	}
	want := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench-0-0", Name: "small-1", ResourceVersion: "42", Generation: 2, UID: "u",
			Labels:      map[string]string{labelState: stateAdmitted},
			Annotations: map[string]string{annotationTopology: "bench;main=b/r/n:2"},
		},
		Spec:   batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "a"}}}},
		Status: batchv1.JobStatus{CompletionTime: &completed},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripJob = %+v, want %+v", got, want)
	}
}

// TestNewJobPlacement: a Job of a class with pods and a placement has
// that many pods of the class's cpu each, and Kueue's annotation of its
// constraint on its pod template.
func TestNewJobPlacement(t *testing.T) {
	rack := "cloud.provider.com/topology-rack"
	for _, tc := range []struct {
		placement *scenario.Placement
		want      map[string]string
	}{
		{nil, nil},
		{&scenario.Placement{Constraint: scenario.PlacementRequired, Level: rack}, map[string]string{annotationRequiredTopology: rack}},
		{&scenario.Placement{Constraint: scenario.PlacementPreferred, Level: rack}, map[string]string{annotationPreferredTopology: rack}},
		{&scenario.Placement{Constraint: scenario.PlacementBalanced, Level: rack, SliceSize: 2},
			map[string]string{annotationSliceRequiredTopology: rack, annotationSliceSize: "2"}},
	} {
		j := &scenario.Job{Namespace: "ns", Name: "j", CPUMilli: 5000, Pods: 4, PodCPUMilli: 1250}
		job := newJob(j, scenario.Class{Name: "medium", Pods: 4, Placement: tc.placement})
		cpu := job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		if *job.Spec.Parallelism != 4 || *job.Spec.Completions != 4 || cpu.MilliValue() != 1250 || !reflect.DeepEqual(job.Spec.Template.Annotations, tc.want) {
			t.Errorf("placement %+v: parallelism %d, completions %d, %dm per pod, annotations %v; want 4, 4, 1250m, %v",
				tc.placement, *job.Spec.Parallelism, *job.Spec.Completions, cpu.MilliValue(), job.Spec.Template.Annotations, tc.want)
		}
	}
	// A Job that does not count its pods is one pod of its whole request.
	job := newJob(&scenario.Job{Namespace: "ns", Name: "p", CPUMilli: 1}, scenario.Class{Name: "probe"})
	if cpu := job.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; *job.Spec.Parallelism != 1 || cpu.MilliValue() != 1 {
		t.Errorf("probe: parallelism %d, %dm", *job.Spec.Parallelism, cpu.MilliValue())
	}
}

// TestSuspensionAfterCompletion: a suspension the watch shows on a Job
// whose completion this run already wrote is not a preemption, so the
// run's finish is recorded. It was the one Job of 15,000 the runner
// counted as never finished while tally labelled it finished.
func TestSuspensionAfterCompletion(t *testing.T) {
	tj := &trackedJob{phase: finishing, run: 1, admissions: 1, timer: time.NewTimer(time.Hour)}
	defer tj.timer.Stop()
	tr := &tracker{jobs: map[string]*trackedJob{"ns/j": tj}}
	suspend, completed := true, metav1.Now()
	tr.observe(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", ResourceVersion: "9"},
		Spec:       batchv1.JobSpec{Suspend: &suspend},
		Status:     batchv1.JobStatus{CompletionTime: &completed},
	})
	if tj.phase != finishing || tj.run != 1 || tj.preempted != 0 || tr.preemptions.Load() != 0 {
		t.Errorf("phase %v, run %d, preempted %d: want the run left to finish", tj.phase, tj.run, tj.preempted)
	}
}

// TestReadmissionBetweenSightings: a Job seen admitted again under a new
// generation while its run is under way was preempted and admitted
// between two sightings (a relist shows only the latest state). The old
// run ends as a preemption and a new one begins; without this the run
// stayed "finishing" for good and the Job was never completed. The same
// generation seen again changes nothing.
func TestReadmissionBetweenSightings(t *testing.T) {
	for _, from := range []phase{running, finishing} {
		tj := &trackedJob{spec: &scenario.Job{Name: "j", Runtime: time.Hour}, phase: from, run: 1, gen: 2, admissions: 1, timer: time.NewTimer(time.Hour)}
		tr := &tracker{jobs: map[string]*trackedJob{"ns/j": tj}}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", ResourceVersion: "9", Generation: 2, Labels: map[string]string{labelState: stateAdmitted}},
			Spec:       batchv1.JobSpec{Suspend: new(bool)},
		}
		tr.observe(job)
		if tj.phase != from || tj.run != 1 || tj.preempted != 0 || tj.admissions != 1 {
			t.Errorf("%v, same generation: phase %v, run %d, preempted %d, admissions %d: want nothing changed", from, tj.phase, tj.run, tj.preempted, tj.admissions)
		}
		job.Generation, job.ResourceVersion = 4, "12"
		tr.observe(job)
		tj.mu.Lock()
		if tj.phase != running || tj.run != 3 || tj.gen != 4 || tj.preempted != 1 || tj.admissions != 2 || tr.preemptions.Load() != 1 || tr.admissions.Load() != 1 {
			t.Errorf("%v, new generation: phase %v, run %d, gen %d, preempted %d, admissions %d, tracker preemptions %d admissions %d: want a new run 3 at generation 4 after one preemption",
				from, tj.phase, tj.run, tj.gen, tj.preempted, tj.admissions, tr.preemptions.Load(), tr.admissions.Load())
			tj.mu.Unlock()
			tj.timer.Stop()
			continue
		}
		tj.mu.Unlock()
		// The old run's completion, when it falls due, is dropped.
		tr.complete(tj, 1)
		if tj.phase != running || tr.finished.Load() != 0 {
			t.Errorf("%v: the old run's completion changed the record: phase %v, finished %d", from, tj.phase, tr.finished.Load())
		}
		tj.timer.Stop()
	}
}
