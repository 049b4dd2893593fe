package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
	"tally.dev/tally/e2e/perf/scenario"
)

// The replicas' leader election, shorter than the defaults (15 s, 10 s,
// 2 s) so that the tests take many turns.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// failoverKills is how many times TestFailover kills the leader.
const failoverKills = 10

// failoverQueueDocs is a ClusterQueue name of 4 GPUs.
func failoverQueueDocs(name string) string { return gpuQueueDoc(name, 4, "Never") }

// replicas stops the suite's tally and runs two tally replicas with leader
// election in its place, serving the webhooks through one Proxy as a
// Service would, with one shared CA. When the test ends they stop and the
// suite's tally starts again.
func replicas(ctx context.Context, t *testing.T, s *suite, extraArgs ...string) [2]*framework.Tally {
	t.Helper()
	dir := t.TempDir()
	var rs [2]*framework.Tally
	for i := range rs {
		r, err := framework.NewTally(s.env.Bin, s.tally.Kubeconfig, filepath.Join(dir, fmt.Sprintf("replica-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		r.Name = fmt.Sprintf("tally replica %d", i)
		r.CertDir = filepath.Join(dir, "certs")
		r.ExtraArgs = append([]string{"--leader-elect",
			"--leader-elect-lease-duration", leaseDuration.String(),
			"--leader-elect-renew-deadline", renewDeadline.String(),
			"--leader-elect-retry-period", retryPeriod.String()}, extraArgs...)
		rs[i] = r
	}
	proxy, err := framework.StartProxy(fmt.Sprintf("127.0.0.1:%d", rs[0].WebhookPort), fmt.Sprintf("127.0.0.1:%d", rs[1].WebhookPort))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		r.WebhookURL = "https://" + proxy.Addr
	}
	if err := s.tally.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			if err := r.Stop(10 * time.Second); err != nil {
				t.Errorf("stopping %s: %v", r.Name, err)
			}
			if t.Failed() {
				printTail(r.Log, 40)
			}
		}
		proxy.Close()
		if err := s.tally.Start(); err != nil {
			t.Errorf("restarting the suite's tally: %v", err)
			return
		}
		if err := s.tally.WaitReady(context.Background(), time.Minute); err != nil {
			t.Errorf("the suite's tally is not ready again: %v", err)
		}
	})
	// One after the other: the first makes the CA the second reads.
	for _, r := range rs {
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		if err := r.WaitReady(ctx, time.Minute); err != nil {
			t.Fatalf("%s not ready: %v", r.Name, err)
		}
	}
	return rs
}

// leader waits until exactly one replica leads and returns its index.
func leader(ctx context.Context, t *testing.T, rs [2]*framework.Tally, timeout time.Duration) int {
	t.Helper()
	which := -1
	err := framework.Poll(ctx, 100*time.Millisecond, timeout, func(context.Context) (bool, string, error) {
		var leads []int
		for i, r := range rs {
			if !r.Running() {
				continue
			}
			ok, err := r.Leads()
			if err != nil {
				return false, err.Error(), nil
			}
			if ok {
				leads = append(leads, i)
			}
		}
		if len(leads) == 1 {
			which = leads[0]
		}
		return len(leads) == 1, fmt.Sprintf("replicas leading: %v", leads), nil
	})
	if err != nil {
		t.Fatalf("no single leader: %v", err)
	}
	return which
}

// Two tally replicas share one lease. The leader is killed with SIGKILL
// failoverKills times while Jobs wait for quota. Each time, a Job created
// at once goes through the other replica's webhook; the other replica
// takes the lease over and admits what waited; and the killed one comes
// back as the follower. Across all hand-overs the quota is never exceeded
// (checked at every Job and pod change) and no Job is admitted twice.
func TestFailover(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 10*time.Minute)
	const ns, queue, limit = "e2e-failover", "e2e-failover", 4
	useQueues(ctx, t, s, []string{queue}, failoverQueueDocs(queue))
	rs := replicas(ctx, t, s)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, _ := observe(ctx, t, s, ns)
	usage := watchUsage(ctx, t, s, map[string]string{ns: queue}, []framework.UsageLimit{{Name: "ClusterQueue " + queue, Queues: []string{queue}, Max: limit}})

	var takeovers, firsts, creates []time.Duration
	var retried int
	var err error
	total := 0
	for kill := range failoverKills {
		// Six 1-GPU Jobs: four run, two wait.
		var jobs []*batchv1.Job
		for i := range 6 {
			jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("k%02d-%d", kill, i)).GPUs(1).Runtime(3*time.Second).Obj())
		}
		if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
			t.Fatal(err)
		}
		total += len(jobs)
		err = framework.Poll(ctx, 50*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
			running, pending, _, err := count(ctx, s, ns)
			return err == nil && running == limit && pending > 0, fmt.Sprintf("%d running, %d pending (err %v)", running, pending, err), nil
		})
		if err != nil {
			t.Fatalf("kill %d: the queue never filled: %v", kill, err)
		}
		l := leader(ctx, t, rs, 30*time.Second)
		if err := rs[l].Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()

		// The webhook answers through the other replica at once. A
		// request the API server sent on a connection it had open to the
		// killed replica fails, as it would through a Service: the
		// client's retry goes through the other.
		probe := framework.NewJob(ns, fmt.Sprintf("k%02d-after", kill)).GPUs(1).Runtime(time.Second).Obj()
		err := framework.CreateJobs(ctx, s.client, probe)
		if err != nil && deadBackend(err) {
			t.Logf("kill %d: the first create after the kill went to the dead replica's connection (%v); retrying", kill, err)
			retried++
			err = framework.CreateJobs(ctx, s.client, probe)
		}
		if err != nil {
			t.Fatalf("kill %d: creating a Job with the leader dead: %v", kill, err)
		}
		creates = append(creates, time.Since(killed))
		total++
		if !framework.Suspended(probe) || probe.Labels[framework.LabelState] != framework.StatePending {
			t.Errorf("kill %d: a Job created with the leader dead: suspend=%s labels=%v, want queued by the other replica's webhook",
				kill, ptrString(probe.Spec.Suspend), probe.Labels)
		}

		// The other replica takes the lease over and admits what waited.
		// It took the lease after the start of the last read that saw it
		// not lead (notYet), and may admit before a read sees it lead
		// (acquired): an admission counts from notYet on. The killed
		// leader admits nothing after the kill.
		var acquired time.Time
		notYet := killed
		err = framework.Poll(ctx, 20*time.Millisecond, leaseDuration+5*time.Second, func(context.Context) (bool, string, error) {
			start := time.Now()
			ok, err := rs[1-l].Leads()
			acquired = time.Now()
			if err != nil || !ok {
				notYet = start
			}
			return err == nil && ok, fmt.Sprintf("%s leads: %v (err %v)", rs[1-l].Name, ok, err), nil
		})
		if err != nil {
			t.Fatalf("kill %d: the other replica did not take the lease over within the lease duration plus 5s: %v", kill, err)
		}
		takeovers = append(takeovers, acquired.Sub(killed))
		err = framework.Poll(ctx, 20*time.Millisecond, 10*time.Second, func(context.Context) (bool, string, error) {
			for _, o := range rec.Observations() {
				if o.Kind == framework.Unsuspended && o.At.After(notYet) {
					firsts = append(firsts, o.At.Sub(killed))
					return true, "", nil
				}
			}
			return false, "no admission since the new leader took over", nil
		})
		if err != nil {
			t.Fatalf("kill %d: the new leader admitted nothing: %v", kill, err)
		}
		if err := rs[l].Start(); err != nil {
			t.Fatal(err)
		}
		if err := rs[l].WaitReady(ctx, time.Minute); err != nil {
			t.Fatalf("kill %d: %s not ready after its restart: %v", kill, rs[l].Name, err)
		}
	}
	waitFinishedAndLabelled(ctx, t, s.client, ns, total, 2*time.Minute)
	for name, h := range rec.Histories() {
		if h.Unsuspends != 1 {
			t.Errorf("Job %s was un-suspended %d times (states %v), want once", name, h.Unsuspends, h.States)
		}
	}
	admitted, err := framework.AdmittedEvents(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range admitted {
		if c > 1 {
			t.Errorf("Job %s has %d Admitted Events, want 1", name, c)
		}
	}
	checkUsage(t, usage.Stop(), "ClusterQueue "+queue, limit, limit)
	ms := func(d []time.Duration, p float64) time.Duration {
		return scenario.Percentile(d, p).Round(time.Millisecond)
	}
	t.Logf("%d kills of the leader (lease %s, renew deadline %s, retry %s): kill -> the other replica holds the lease p50 %s, max %s; kill -> its first admission p50 %s, max %s; kill -> a Job created through the other replica's webhook p50 %s, max %s (%d creates retried after hitting the dead replica)",
		len(takeovers), leaseDuration, renewDeadline, retryPeriod, ms(takeovers, 50), ms(takeovers, 100), ms(firsts, 50), ms(firsts, 100), ms(creates, 50), ms(creates, 100), retried)
}

// The leader is stopped with SIGSTOP, as a partition or a stall would
// leave it, while Jobs wait; the other replica takes the lease over and
// admits them. Resumed after its lease has expired, the old leader writes
// nothing: its renewal is too old for the ledger to write (Lease.Held),
// and leader election then stops it. The quota is never exceeded.
func TestPausedLeaderWritesNothing(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue, limit = "e2e-paused", "e2e-paused", 4
	useQueues(ctx, t, s, []string{queue}, failoverQueueDocs(queue))
	// At debug level, each replica logs every write it sends.
	rs := replicas(ctx, t, s, "--zap-log-level=debug")
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, _ := observe(ctx, t, s, ns)
	usage := watchUsage(ctx, t, s, map[string]string{ns: queue}, []framework.UsageLimit{{Name: "ClusterQueue " + queue, Queues: []string{queue}, Max: limit}})

	old := leader(ctx, t, rs, 30*time.Second)
	other := 1 - old
	// Four Jobs run for a while, eight wait. The old leader is paused
	// just as the first ones finish, with passes to make.
	var jobs []*batchv1.Job
	for i := range 12 {
		jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("job-%02d", i)).GPUs(1).Runtime(2*time.Second).Obj())
	}
	if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, 20*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		_, _, finished, err := count(ctx, s, ns)
		return err == nil && finished > 0, fmt.Sprintf("%d finished (err %v)", finished, err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs[old].Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Logf("paused %s", rs[old].Name)
	resumed := false
	defer func() {
		if !resumed {
			_ = rs[old].Resume()
		}
	}()
	err = framework.Poll(ctx, 50*time.Millisecond, leaseDuration+10*time.Second, func(context.Context) (bool, string, error) {
		ok, err := rs[other].Leads()
		return err == nil && ok, fmt.Sprintf("%s leads: %v (err %v)", rs[other].Name, ok, err), nil
	})
	if err != nil {
		t.Fatalf("the other replica did not take over: %v", err)
	}
	t.Logf("%s took over %s after the pause", rs[other].Name, time.Since(paused).Round(time.Millisecond))
	// The other replica holds the lease now: the old leader's has expired.
	size := logSize(t, rs[old].Log)
	if err := rs[old].Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	resumedAt := time.Now()
	t.Logf("resumed %s after %s", rs[old].Name, time.Since(paused).Round(time.Millisecond))
	waitFinishedAndLabelled(ctx, t, s.client, ns, len(jobs), 2*time.Minute)

	// A write sent before the pause may be answered after it; none may be
	// sent after. A line stamped before the resume (its ts is to the
	// second, and the pause lasts seconds) was logged as the pause came,
	// its write sent before it, and reached the log after.
	after := logSince(t, rs[old].Log, size)
	for _, line := range strings.Split(after, "\n") {
		if !strings.Contains(line, `"leader write"`) {
			continue
		}
		var entry struct {
			TS time.Time `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err == nil && entry.TS.Before(resumedAt.Truncate(time.Second)) {
			t.Logf("a write logged as the pause came, at %s: %s", entry.TS.Format(time.RFC3339), line)
			continue
		}
		t.Errorf("the old leader wrote after it was resumed: %s", line)
	}
	t.Logf("after it was resumed, the old leader refused %d admission writes decided before the pause and skipped %d passes",
		strings.Count(after, `"admission not written"`), strings.Count(after, `"no admission pass"`))
	// Leader election finds the lease lost at its next renewal, and tally
	// exits.
	err = framework.Poll(ctx, 100*time.Millisecond, renewDeadline+10*time.Second, func(context.Context) (bool, string, error) {
		return !rs[old].Running(), "still running", nil
	})
	if err != nil {
		t.Errorf("the old leader did not stop after it was resumed: %v", err)
	}
	for name, h := range rec.Histories() {
		if h.Unsuspends != 1 {
			t.Errorf("Job %s was un-suspended %d times (states %v), want once", name, h.Unsuspends, h.States)
		}
	}
	checkUsage(t, usage.Stop(), "ClusterQueue "+queue, limit, limit)
}

func logSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// logSince returns what was appended to the log at path after offset.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}

// deadBackend says whether a create failed because the API server called
// the webhook on a connection to a replica that was killed.
func deadBackend(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") &&
		(strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
			strings.Contains(msg, "client connection force closed"))
}
