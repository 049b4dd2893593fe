package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// A Job that the real CronJob controller creates in a bound namespace is
// queued as any Job: created suspended and pending in the namespace's
// ClusterQueue, admitted, and finished.
func TestCronJobJobsAreQueued(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 3*time.Minute)
	const ns, queue = "e2e-cron", "e2e-quota"
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, err := framework.Record(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()

	tmpl := framework.NewJob(ns, "").GPUs(1).Runtime(2 * time.Second).Obj()
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: batchv1.CronJobSpec{
			// Every minute: the controller creates the first Job at the
			// next minute boundary.
			Schedule:          "* * * * *",
			ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate:       batchv1.JobTemplateSpec{Spec: tmpl.Spec},
		},
	}
	if err := s.client.Create(ctx, cron); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.client.Delete(context.Background(), cron, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})

	var job *batchv1.Job
	err = framework.Poll(ctx, 500*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		jobs, err := framework.ListJobs(ctx, s.client, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(jobs) == 0 {
			return false, "no Job from the CronJob yet", nil
		}
		job = &jobs[0]
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("the CronJob created no Job: %v", err)
	}
	// One Job is enough: no more.
	if err := s.client.Patch(ctx, cron, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(job); owner == nil || owner.Kind != "CronJob" || owner.Name != cron.Name {
		t.Fatalf("Job %s is not controlled by CronJob %s: owner %v", job.Name, cron.Name, owner)
	}

	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		h := rec.History(job.Name)
		if h == nil {
			return false, "not seen", nil
		}
		return slices.Equal(h.States, []string{framework.StatePending, framework.StateAdmitted, framework.StateFinished}) && framework.Completed(h.Last),
			fmt.Sprintf("states %v, conditions %v", h.States, conditions(h.Last)), nil
	})
	if err != nil {
		t.Fatalf("Job %s from the CronJob: %v", job.Name, err)
	}
	h := rec.History(job.Name)
	if !ptr.Deref(h.FirstSuspend, false) {
		t.Errorf("Job %s was first seen with suspend=%v, want true (suspended by tally's webhook at creation)", job.Name, ptrString(h.FirstSuspend))
	}
	if got := h.Last.Labels[framework.LabelQueue]; got != queue {
		t.Errorf("Job %s queued in %q, want %s", job.Name, got, queue)
	}
	if h.Unsuspends != 1 {
		t.Errorf("Job %s was admitted %d times, want once", job.Name, h.Unsuspends)
	}
}
