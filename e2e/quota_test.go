package e2e

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
)

// Twelve 1-GPU Jobs in a ClusterQueue of 10 GPUs: at no moment do the
// running Jobs hold more than 10 GPUs, two of them wait, and all finish.
func TestQuotaNeverExceeded(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 3*time.Minute)
	const ns, queue, limit, n = "e2e-quota", "e2e-quota", 10, 12
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	var jobs []*batchv1.Job
	for i := range n {
		jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("train-%02d", i)).GPUs(1).Runtime(3*time.Second).Obj())
	}
	if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
		t.Fatal(err)
	}

	rep := framework.WatchQuota(ctx, s.client, ns, limit, n, 100*time.Millisecond, 2*time.Minute)
	t.Logf("%d polls; at most %d GPUs running at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("quota exceeded: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all Jobs finished: %v", rep.Err)
	}
	if !rep.SawWaiting {
		t.Errorf("no poll saw a Job waiting while others ran: the queue never held anything back")
	}
	waitFinishedAndLabelled(ctx, t, s.client, ns, n, 30*time.Second)
}
