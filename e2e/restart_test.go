package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
)

// tally is killed with SIGKILL while a batch runs, and Jobs finish while it
// is down. Restarted, it rebuilds its ledger from the cluster: every Job
// finishes, the quota is never overcommitted and no Job is admitted twice.
func TestRestartMidRun(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 4*time.Minute)
	const ns, queue, limit, n = "e2e-restart", "e2e-restart", 10, 24
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, err := framework.Record(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	var jobs []*batchv1.Job
	for i := range n {
		jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("batch-%02d", i)).GPUs(1).Runtime(3*time.Second).Obj())
	}
	if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
		t.Fatal(err)
	}
	quota := make(chan framework.QuotaReport, 1)
	go func() {
		quota <- framework.WatchQuota(ctx, s.client, ns, limit, n, 100*time.Millisecond, 3*time.Minute)
	}()

	// Kill tally once the queue is full, Jobs wait, and the running Jobs
	// have their pods: a pod the job controller creates while tally is
	// down is refused by the pod gate, and its Job could not finish.
	var runningAtKill, finishedAtKill int
	err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		jobs, err := framework.ListJobs(ctx, s.client, ns)
		running, pending, finished := sortJobs(jobs)
		runningAtKill, finishedAtKill = running, finished
		podless := runningWithoutPods(jobs)
		return err == nil && running >= limit && pending > 0 && podless == 0,
			fmt.Sprintf("%d running (%d without pods yet), %d pending, %d finished (err %v)", running, podless, pending, finished, err), nil
	})
	if err != nil {
		t.Fatalf("the queue never filled: %v", err)
	}
	killTally(t, s)
	t.Logf("killed tally with %d Jobs running and %d finished", runningAtKill, finishedAtKill)

	// Let some running Jobs finish while tally is down: their quota is
	// free when it comes back, and only a recount can know.
	err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		_, _, finished, err := count(ctx, s, ns)
		return err == nil && finished > finishedAtKill, fmt.Sprintf("%d finished (err %v)", finished, err), nil
	})
	if err != nil {
		t.Fatalf("no Job finished while tally was down: %v", err)
	}
	if err := s.tally.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("tally not ready after restart: %v", err)
	}
	t.Log("restarted tally")

	rep := <-quota
	t.Logf("%d polls; at most %d GPUs running at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("quota exceeded: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all Jobs finished after the restart: %v", rep.Err)
	}
	waitFinishedAndLabelled(ctx, t, s.client, ns, n, 30*time.Second)

	for name, h := range rec.Histories() {
		if h.Unsuspends > 1 {
			t.Errorf("Job %s was un-suspended %d times (states %v)", name, h.Unsuspends, h.States)
		}
	}
	if g := rec.Gaps(); g > 0 {
		t.Logf("the Job watch re-listed %d times; un-suspensions in a gap are not counted", g)
	}
	admitted, err := framework.AdmittedEvents(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range admitted {
		if c > 1 {
			t.Errorf("Job %s has %d Admitted Events, want at most 1", name, c)
		}
	}
}

// count sorts the Jobs of ns into running, pending and finished.
func count(ctx context.Context, s *suite, ns string) (running, pending, finished int, err error) {
	jobs, err := framework.ListJobs(ctx, s.client, ns)
	if err != nil {
		return 0, 0, 0, err
	}
	running, pending, finished = sortJobs(jobs)
	return running, pending, finished, nil
}

// sortJobs sorts jobs into running, pending and finished.
func sortJobs(jobs []batchv1.Job) (running, pending, finished int) {
	for i := range jobs {
		switch j := &jobs[i]; {
		case framework.Finished(j):
			finished++
		case framework.Suspended(j):
			pending++
		default:
			running++
		}
	}
	return running, pending, finished
}

// runningWithoutPods counts the jobs that are admitted and not finished
// but have no active pod yet.
func runningWithoutPods(jobs []batchv1.Job) int {
	n := 0
	for i := range jobs {
		if j := &jobs[i]; !framework.Finished(j) && !framework.Suspended(j) && j.Status.Active == 0 {
			n++
		}
	}
	return n
}

// killTally kills the suite's tally with SIGKILL; when the test ends it is
// running again, for the tests after it.
func killTally(t *testing.T, s *suite) {
	t.Helper()
	t.Cleanup(func() {
		if !s.tally.Running() {
			if err := s.tally.Start(); err == nil {
				_ = s.tally.WaitReady(context.Background(), time.Minute)
			}
		}
	})
	if err := s.tally.Kill(); err != nil {
		t.Fatal(err)
	}
}
