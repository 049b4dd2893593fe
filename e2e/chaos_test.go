package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
	"tally.dev/tally/e2e/perf/scenario"
)

// auditReport is what e2e/auditor writes (its Report).
type auditReport struct {
	States          int                       `json:"states"`
	Overcommits     []string                  `json:"overcommits"`
	OvercommitCount int                       `json:"overcommitCount"`
	Peak            map[string][2]int64       `json:"peak"`
	Jobs            map[string]*auditedJobRec `json:"jobs"`
}

type auditedJobRec struct {
	Queue     string      `json:"queue"`
	Admitted  []time.Time `json:"admitted"`
	Preempted []time.Time `json:"preempted"`
	Finished  time.Time   `json:"finished"`
	Deleted   time.Time   `json:"deleted"`
}

// The soak's mix (TestSoakNoThrash) runs for TALLY_CHAOS (make soak: 30
// minutes; unset, the test skips) against two tally replicas, while
// faults are injected, seeded by TALLY_CHAOS_SEED (logged):
//   - the leader is killed with SIGKILL every 5 to 20 s, and a dead
//     replica is started again a second later, as its Deployment would;
//   - the API server is restarted once, halfway;
//   - the config is reloaded every 30 s: a valid change (a spare
//     ClusterQueue added or removed) or an invalid one, which the webhook
//     must deny;
//   - every 45 s, the binding of namespace e2e-soak-b is removed and put
//     back 5 s later (no Job is created there meanwhile);
//   - every 7 s a Job is deleted: one that waits, one that runs, or one
//     being preempted, in turn.
//
// Beside the Jobs, PyTorchJobs (a master and one or two workers, a GPU
// each, low or medium priority) arrive every 4 to 12 s in a random queue,
// run by the real training operator.
//
// An auditor (e2e/auditor), a process of its own that knows nothing of
// tally's code, checks every change of Jobs, PyTorchJobs and pods against
// the config's quotas. Afterwards: it saw no overcommit; every workload
// finished or was deleted by the test; none was admitted twice without a
// preemption in between (by its Admitted Events); and after every kill a
// replica led again within the lease duration plus 5 s.
func TestChaosSoak(t *testing.T) {
	s := setup(t)
	dur := envDuration(t, "TALLY_CHAOS", 0)
	if dur == 0 {
		t.Skip("TALLY_CHAOS unset: the chaos soak runs with make soak")
	}
	seed := envSeed(t, "TALLY_CHAOS_SEED")
	t.Logf("chaos soak for %s with seed %d (TALLY_CHAOS, TALLY_CHAOS_SEED)", dur, seed)
	ctx := testContext(t, 2*dur+15*time.Minute)
	queues := []string{soakA, soakB, soakC}
	useQueues(ctx, t, s, queues, soakQueueDocs, priorityClassDocs)
	for _, q := range queues {
		if err := framework.BindNamespace(ctx, s.client, q, q); err != nil {
			t.Fatalf("binding namespace %s: %v", q, err)
		}
	}
	rs := replicas(ctx, t, s)
	audit := startAuditor(ctx, t, s, queues)

	rng := rand.New(rand.NewPCG(seed, seed^0xc4a05))
	var mu sync.Mutex
	paused := map[string]bool{}
	deleted := map[string]bool{}
	var recoveries []time.Duration
	var faults []string
	logFault := func(format string, args ...any) {
		msg := fmt.Sprintf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		mu.Lock()
		faults = append(faults, msg)
		mu.Unlock()
		t.Log(msg)
	}

	faultCtx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		chaos(faultCtx, t, s, rs, dur, rng, logFault, func(d time.Duration) {
			mu.Lock()
			recoveries = append(recoveries, d)
			mu.Unlock()
		}, func(ns string, p bool) {
			mu.Lock()
			paused[ns] = p
			mu.Unlock()
		}, func(key string) {
			mu.Lock()
			deleted[key] = true
			mu.Unlock()
		})
	}()
	isPaused := func(ns string) bool {
		mu.Lock()
		defer mu.Unlock()
		return paused[ns]
	}
	pytorchJobs := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		pytorchMix(faultCtx, t, s, queues, rand.New(rand.NewPCG(seed, seed^0x97)), isPaused, func(key string) {
			mu.Lock()
			pytorchJobs[key] = true
			mu.Unlock()
		})
	}()
	start := time.Now()
	jobs, _ := soakMix(ctx, t, s, dur, seed, isPaused)
	stopFaults()
	wg.Wait()
	t.Logf("created %d Jobs and %d PyTorchJobs in %s; waiting for them to finish", len(jobs), len(pytorchJobs), time.Since(start).Round(time.Second))

	// Every Job finishes, unless the test deleted it. While faults are
	// injected, no replica leads for about a third of the time (a kill
	// every 12.5 s on average, 5 s to take over), so the mix builds a
	// backlog in proportion to the duration: it drains at full speed
	// once they stop.
	drain := time.Now()
	err := framework.Poll(ctx, time.Second, 5*time.Minute+dur, func(ctx context.Context) (bool, string, error) {
		var open []string
		for _, q := range queues {
			list, err := framework.ListJobs(ctx, s.client, q)
			if err != nil {
				return false, err.Error(), nil
			}
			for i := range list {
				if !framework.Finished(&list[i]) {
					open = append(open, q+"/"+list[i].Name)
				}
			}
			pjs, err := framework.ListPyTorchJobs(ctx, s.client, q)
			if err != nil {
				return false, err.Error(), nil
			}
			for i := range pjs {
				if !framework.PyTorchJobFinished(&pjs[i]) {
					open = append(open, q+"/"+pjs[i].GetName())
				}
			}
		}
		return len(open) == 0, fmt.Sprintf("%d workloads not finished, e.g. %v", len(open), open[:min(5, len(open))]), nil
	})
	if err != nil {
		t.Errorf("not every Job finished: %v", err)
	} else {
		t.Logf("the backlog drained in %s once the faults stopped", time.Since(drain).Round(time.Second))
	}
	rep := audit.stop(t)
	mu.Lock()
	defer mu.Unlock()
	var lost []string
	admissions, preemptions := 0, 0
	keys := slices.Collect(maps.Keys(jobs))
	for key := range pytorchJobs {
		keys = append(keys, key)
	}
	for _, key := range keys {
		r := rep.Jobs[key]
		switch {
		case r == nil:
			lost = append(lost, key+" (never seen by the auditor)")
		case r.Finished.IsZero() && !deleted[key]:
			lost = append(lost, key)
		}
		if r != nil {
			admissions += len(r.Admitted)
			preemptions += len(r.Preempted)
		}
	}
	slices.Sort(lost)
	for _, l := range lost[:min(20, len(lost))] {
		t.Errorf("lost workload: %s did not finish and was not deleted by the test", l)
	}
	t.Logf("auditor: %d states checked, %d Jobs and %d PyTorchJobs, %d admissions, %d preemptions, %d overcommits; peaks %v",
		rep.States, len(jobs), len(pytorchJobs), admissions, preemptions, rep.OvercommitCount, rep.Peak)
	for _, o := range rep.Overcommits {
		t.Errorf("overcommit seen by the auditor: %s", o)
	}
	checkAdmittedOnce(ctx, t, s, queues, rep)
	kills := 0
	for _, f := range faults {
		if strings.Contains(f, "killed") {
			kills++
		}
	}
	limit := leaseDuration + 5*time.Second
	for i, d := range recoveries {
		if d > limit {
			t.Errorf("kill %d: no replica led again for %s (limit %s)", i, d.Round(time.Millisecond), limit)
		}
	}
	t.Logf("faults: %d kills of the leader (recovery p50 %s, max %s), %d in all:\n%s", kills,
		scenario.Percentile(recoveries, 50).Round(time.Millisecond), scenario.Percentile(recoveries, 100).Round(time.Millisecond),
		len(faults), strings.Join(faults, "\n"))
}

// chaos injects the faults of TestChaosSoak until ctx ends.
func chaos(ctx context.Context, t *testing.T, s *suite, rs [2]*framework.Tally, dur time.Duration, rng *rand.Rand,
	logf func(string, ...any), recovered func(time.Duration), pause func(string, bool), deleted func(string)) {
	start := time.Now()
	nextKill := start.Add(5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second))))
	restartAt := start.Add(dur / 2)
	nextReload, nextUnbind, nextDelete := start.Add(30*time.Second), start.Add(45*time.Second), start.Add(7*time.Second)
	reloads, deletes := 0, 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		// A dead replica is started again after a second.
		for _, r := range rs {
			if !r.Running() {
				if err := r.Start(); err != nil {
					logf("starting %s: %v", r.Name, err)
				}
			}
		}
		switch {
		case now.After(nextKill):
			nextKill = now.Add(5*time.Second + time.Duration(rng.Int64N(int64(15*time.Second))))
			l := -1
			for i, r := range rs {
				if ok, _ := r.Leads(); ok && r.Running() {
					l = i
				}
			}
			if l < 0 {
				logf("no replica leads; kill skipped")
				continue
			}
			_ = rs[l].Kill()
			killed := time.Now()
			logf("killed the leader %s", rs[l].Name)
			<-time.After(time.Second)
			if !rs[l].Running() {
				if err := rs[l].Start(); err != nil {
					logf("starting %s: %v", rs[l].Name, err)
				}
			}
			err := framework.Poll(ctx, 50*time.Millisecond, leaseDuration+30*time.Second, func(context.Context) (bool, string, error) {
				for _, r := range rs {
					if ok, _ := r.Leads(); ok && r.Running() {
						return true, "", nil
					}
				}
				return false, "no replica leads", nil
			})
			if err == nil {
				recovered(time.Since(killed))
			} else if ctx.Err() == nil {
				recovered(time.Since(killed))
				logf("no replica led again after killing %s: %v", rs[l].Name, err)
			}
		case now.After(restartAt):
			restartAt = now.Add(1000 * time.Hour)
			if err := s.cluster.RestartAPIServer(); err != nil {
				t.Errorf("restarting the API server: %v", err)
				continue
			}
			logf("restarted the API server")
		case now.After(nextReload):
			nextReload = now.Add(30 * time.Second)
			reloads++
			cfg := s.config + "---\n" + soakQueueDocs + "---\n" + priorityClassDocs
			switch reloads % 3 {
			case 1:
				cfg += "---\n" + failoverQueueDocs("e2e-chaos-spare")
				logf("config reload: a spare ClusterQueue added")
			case 2:
				logf("config reload: the spare ClusterQueue removed")
			case 0:
				cfg += "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: e2e-chaos-bad}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: no-such-flavor\n      resources:\n      - {name: cpu, nominalQuota: -1}\n"
				if err := framework.ApplyConfig(ctx, s.client, tallyNamespace, cfg); err == nil {
					logf("config reload: an invalid config was accepted by the API server (tally's webhook down?); the next reload replaces it")
				} else {
					logf("config reload: an invalid config, denied: %.200s", err.Error())
				}
				continue
			}
			if err := framework.ApplyConfig(ctx, s.client, tallyNamespace, cfg); err != nil {
				logf("config reload failed: %v", err)
			}
		case now.After(nextUnbind):
			nextUnbind = now.Add(45 * time.Second)
			pause(soakB, true)
			if err := setBinding(ctx, s, soakB, ""); err != nil {
				logf("unbinding %s: %v", soakB, err)
			} else {
				logf("namespace %s unbound", soakB)
			}
			<-time.After(5 * time.Second)
			if err := setBinding(ctx, s, soakB, soakB); err != nil {
				logf("binding %s again: %v", soakB, err)
			} else if err := framework.WaitManaged(ctx, s.client, soakB, nil); err != nil {
				logf("namespace %s not managed again: %v", soakB, err)
			} else {
				logf("namespace %s bound again", soakB)
			}
			pause(soakB, false)
		case now.After(nextDelete):
			nextDelete = now.Add(7 * time.Second)
			kind := []string{"waiting", "running", "being preempted"}[deletes%3]
			deletes++
			if key, ok := deleteOne(ctx, s, kind); ok {
				deleted(key)
				logf("deleted %s Job %s", kind, key)
			}
		}
	}
}

// setBinding sets (queue non-empty) or removes namespace ns's
// tally.dev/cluster-queue annotation.
func setBinding(ctx context.Context, s *suite, ns, queue string) error {
	n := &corev1.Namespace{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return err
	}
	if queue == "" {
		delete(n.Annotations, framework.AnnotationQueue)
	} else {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[framework.AnnotationQueue] = queue
	}
	return s.client.Update(ctx, n)
}

// deleteOne deletes a Job of the soak that is waiting (suspended, never
// run), running (un-suspended, unfinished), or being preempted (suspended
// with pods left), and returns its key.
func deleteOne(ctx context.Context, s *suite, kind string) (string, bool) {
	for _, q := range []string{soakC, soakA, soakB} {
		list, err := framework.ListJobs(ctx, s.client, q)
		if err != nil {
			return "", false
		}
		for i := range list {
			j := &list[i]
			if framework.Finished(j) {
				continue
			}
			match := false
			switch kind {
			case "waiting":
				match = framework.Suspended(j) && j.Status.StartTime == nil
			case "running":
				match = !framework.Suspended(j) && j.Status.Active > 0
			default:
				match = framework.Suspended(j) && (j.Status.Active > 0 || j.Status.Terminating != nil && *j.Status.Terminating > 0)
			}
			if !match {
				continue
			}
			if err := s.client.Delete(ctx, j, client.PropagationPolicy("Background")); err != nil {
				continue
			}
			return q + "/" + j.Name, true
		}
	}
	return "", false
}

// checkAdmittedOnce checks, by their Admitted Events, that no Job or
// PyTorchJob was admitted more often than it was preempted plus once.
func checkAdmittedOnce(ctx context.Context, t *testing.T, s *suite, queues []string, rep auditReport) {
	t.Helper()
	for _, q := range queues {
		admitted, err := framework.JobEvents(ctx, s.client, q, framework.ReasonAdmitted)
		if err != nil {
			t.Fatal(err)
		}
		pytorch, err := framework.WorkloadEvents(ctx, s.client, q, framework.PyTorchJobGVK.Kind, framework.ReasonAdmitted)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(admitted, pytorch)
		for name, es := range admitted {
			n := 0
			for i := range es {
				n += framework.EventCount(&es[i])
			}
			r := rep.Jobs[q+"/"+name]
			if r == nil {
				continue
			}
			if n > len(r.Preempted)+1 {
				t.Errorf("Job %s/%s has %d Admitted Events but was preempted %d times: admitted twice without an eviction", q, name, n, len(r.Preempted))
			}
		}
	}
}

// auditor is the e2e/auditor process of a test.
type auditor struct {
	proc *framework.Process
	out  string
}

// startAuditor builds e2e/auditor (-trimpath, as make builds, so that it
// shares their compiled dependencies) and runs it on the namespaces,
// against the soak's queues.
func startAuditor(ctx context.Context, t *testing.T, s *suite, namespaces []string) *auditor {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "auditor")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./e2e/auditor")
	build.Dir = s.env.Root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the auditor: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "queues.yaml")
	if err := os.WriteFile(config, []byte(soakQueueDocs), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &auditor{out: filepath.Join(dir, "audit.json")}
	args := []string{"--kubeconfig", s.cluster.Kubeconfig, "--config", config, "--namespaces", strings.Join(namespaces, ","), "--pytorchjobs", "--out", a.out}
	a.proc = &framework.Process{Name: "auditor", Path: bin, Args: func() []string { return args }, Log: filepath.Join(dir, "auditor.log")}
	if err := a.proc.Start(); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(a.proc.Log)
		if !a.proc.Running() {
			return false, "", fmt.Errorf("the auditor exited: %s", b)
		}
		return err == nil && strings.Contains(string(b), "auditor: watching"), "the auditor has not synced", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.proc.Kill() })
	return a
}

// stop ends the auditor and reads its report.
func (a *auditor) stop(t *testing.T) auditReport {
	t.Helper()
	if err := a.proc.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	var rep auditReport
	b, err := os.ReadFile(a.out)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		log, _ := os.ReadFile(a.proc.Log)
		t.Fatalf("the auditor's report: %v\n%s", err, log)
	}
	return rep
}

// pytorchMix creates PyTorchJobs of a master and one or two workers, a GPU
// each, low or medium priority, every 4 to 12 s in a random one of
// queues (not in a paused one), until ctx ends; created is told each key.
func pytorchMix(ctx context.Context, t *testing.T, s *suite, queues []string, rng *rand.Rand, paused func(string) bool, created func(string)) {
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(4*time.Second + time.Duration(rng.Int64N(int64(8*time.Second)))):
		}
		q := queues[rng.IntN(len(queues))]
		if paused(q) {
			continue
		}
		class := []string{"e2e-low", "e2e-medium"}[rng.IntN(2)]
		name := fmt.Sprintf("pt-%s-%03d", strings.TrimPrefix(class, "e2e-"), i)
		pj := framework.NewPyTorchJob(q, name).Workers(1+rng.Int64N(2)).GPUs(1).
			Runtime(3*time.Second+time.Duration(rng.IntN(3))*time.Second).Label(framework.LabelPriorityClass, class).Obj()
		// A create can fail while faults are injected: retry it for a
		// while.
		err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			err := s.client.Create(ctx, pj.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err == nil, fmt.Sprint(err), nil
		})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("creating PyTorchJob %s/%s: %v", q, name, err)
			}
			return
		}
		created(q + "/" + name)
	}
}
