package perf

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	suspend := false
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench-0-0", Name: "small-1", ResourceVersion: "42", Generation: 2,
			Labels:      map[string]string{labelState: stateAdmitted},
			Annotations: map[string]string{"dropped": "yes"},
			UID:         "u",
		},
		Spec: batchv1.JobSpec{Suspend: &suspend, Parallelism: new(int32)},
	}
	got, err := stripJob(job)
	if err != nil {
		t.Fatal(err)
	}
	want := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench-0-0", Name: "small-1", ResourceVersion: "42", Generation: 2, UID: "u",
			Labels: map[string]string{labelState: stateAdmitted},
		},
		Spec: batchv1.JobSpec{Suspend: &suspend},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripJob = %+v, want %+v", got, want)
	}
}
