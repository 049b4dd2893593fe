package e2e

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
	"tally.dev/tally/e2e/perf/scenario"
)

// handoffJobs is how many Jobs go through the one-slot queue.
const handoffJobs = 100

// How long a GPU freed by a finished Job stays idle: in a ClusterQueue with
// room for one Job, the time from a watch seeing one Job Complete to it
// seeing the next one un-suspended, over handoffJobs Jobs. It covers tally's
// reaction and its write; the job controller's and kwok's share is outside.
// The numbers are logged, not asserted.
func TestHandoffLatency(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 6*time.Minute)
	const ns, queue = "e2e-handoff", "e2e-handoff"
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, err := framework.Record(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	var jobs []*batchv1.Job
	for i := range handoffJobs {
		jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("step-%03d", i)).GPUs(1).Runtime(100*time.Millisecond).Obj())
	}
	start := time.Now()
	if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
		t.Fatal(err)
	}

	rep := framework.WatchQuota(ctx, s.client, ns, 1, handoffJobs, 100*time.Millisecond, 5*time.Minute)
	wall := time.Since(start)
	for _, v := range rep.Violations {
		t.Errorf("quota exceeded: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all Jobs finished: %v", rep.Err)
	}
	lat := framework.HandoffLatencies(rec.Observations(), framework.Unsuspended)
	if len(lat) < handoffJobs-1 {
		t.Logf("only %d hand-offs observed of %d (watch re-lists: %d)", len(lat), handoffJobs-1, rec.Gaps())
	}
	t.Logf("%d Jobs through a 1-GPU queue in %s (%.2f s per Job)", handoffJobs, wall.Round(time.Millisecond), wall.Seconds()/handoffJobs)
	t.Logf("completion -> next admission over %d hand-offs: p50 %s, p90 %s, p99 %s, max %s",
		len(lat), scenario.Percentile(lat, 50).Round(time.Millisecond), scenario.Percentile(lat, 90).Round(time.Millisecond),
		scenario.Percentile(lat, 99).Round(time.Millisecond), scenario.Percentile(lat, 100).Round(time.Millisecond))
}
