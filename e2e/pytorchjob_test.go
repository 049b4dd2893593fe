package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/framework"
	"tally.dev/tally/e2e/perf/scenario"
)

// The PyTorchJobs of these tests run on the real training operator (see
// e2e/cluster/training-operator.sh), which creates their pods and Services
// once tally un-suspends them, and deletes them when tally suspends them
// again.

// The GPU training example's PyTorchJob
// (examples/gpu-training/pytorch-job.yaml: a master and three workers, 1
// GPU each), submitted unchanged to its LocalQueue team-a-queue, is
// queued, admitted into cluster-queue-a all at once and runs to
// completion on nodes of its flavor. Three 4-GPU PyTorchJobs in the
// 10-GPU queue: two run, and the third has no pod until one finishes. A
// PyTorchJob with an unknown queue-name is denied, naming the namespace's
// LocalQueues.
func TestGPUTrainingPyTorchJob(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue, localQueue, limit = "team-a", "cluster-queue-a", "team-a-queue", 10
	bindByLocalQueue(ctx, t, s, ns, localQueue)
	applyExamplePriorityClasses(ctx, t, s)
	rec := recordPyTorchJobs(ctx, t, s, ns)
	usage := watchUsage(ctx, t, s, map[string]string{ns: queue}, []framework.UsageLimit{{Name: "ClusterQueue " + queue, Queues: []string{queue}, Max: limit}})

	t.Run("an unknown queue-name is denied with the namespace's LocalQueues", func(t *testing.T) {
		pj := framework.NewPyTorchJob(ns, "typo").Label(framework.LabelKueueQueueName, "team-a-queu").Obj()
		err := s.client.Create(ctx, pj)
		want := `LocalQueue "team-a-queu" does not exist in namespace team-a; its LocalQueues: team-a-queue`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("create: %v; want a denial containing %q", err, want)
		}
	})

	example, err := framework.ReadObject(filepath.Join(s.env.Root, "examples", "gpu-training", "pytorch-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.Create(ctx, example); err != nil {
		t.Fatalf("creating the GPU training example's PyTorchJob: %v", err)
	}
	checkQueued(t, example, queue)
	done := waitPyTorchJobs(ctx, t, s.client, ns, []string{example.GetName()}, 2*time.Minute)[0]
	if got, want := done.GetAnnotations()[framework.AnnotationFlavors], "master=nvidia-gpu-flavor,worker=nvidia-gpu-flavor"; got != want {
		t.Errorf("%s=%q, want %q", framework.AnnotationFlavors, got, want)
	}
	// The operator may delete the workers once the master has succeeded
	// (cleanPodPolicy: Running): the pod watch saw them all.
	pods := rec.Pods(example.GetName())
	if len(pods) != 4 {
		t.Errorf("the GPU training example's PyTorchJob made pods %v, want 4 (1 master, 3 workers)", pods)
	}
	for pod, node := range pods {
		n := &corev1.Node{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			t.Fatalf("pod %s: node %q: %v", pod, node, err)
		}
		if n.Labels["kueue.x-k8s.io/default-flavor"] != "true" {
			t.Errorf("pod %s ran on node %s, not a node of the GPU training example's flavor nvidia-gpu-flavor", pod, n.Name)
		}
	}
	checkEvents(ctx, t, s.client, ns, example.GetName(), "Queued", "Admitted", "QuotaReleased")
	if h := rec.History(example.GetName()); h == nil || h.Unsuspends != 1 {
		t.Errorf("the GPU training example's PyTorchJob: history %+v, want exactly one admission", h)
	}

	// Three PyTorchJobs of 4 GPUs (a master and three workers) in the
	// 10-GPU queue; the last is created with suspend: false, as a user who
	// forgets it would, and is suspended by the webhook all the same.
	var names []string
	before, err := framework.ListPyTorchJobs(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b := framework.NewPyTorchJob(ns, fmt.Sprintf("train-%d", i)).Workers(3).Runtime(4*time.Second).
			Label(framework.LabelKueueQueueName, localQueue)
		if i == 2 {
			b.Unsuspended()
		}
		pj := b.Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
		checkQueued(t, pj, queue)
		names = append(names, pj.GetName())
	}
	rep := framework.WatchPodQuota(ctx, s.client, ns, limit, len(before)+len(names), 100*time.Millisecond, 2*time.Minute)
	t.Logf("%d polls; at most %d GPUs in pods at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("all-or-nothing admission within quota broken: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("the PyTorchJobs did not all finish: %v", rep.Err)
	}
	if !rep.SawWaiting || rep.MaxRunningGPUs < 8 {
		t.Errorf("saw waiting %v, at most %d GPUs in pods: want two PyTorchJobs running (8 GPUs) while the third waited", rep.SawWaiting, rep.MaxRunningGPUs)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, names, time.Minute)
	pending, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Pending")
	if err != nil {
		t.Fatal(err)
	}
	if waited := slices.Collect(maps.Keys(pending)); len(waited) == 0 {
		t.Errorf("no PyTorchJob has a Pending Event that says why it waited")
	}
	checkUsage(t, usage.Stop(), "ClusterQueue "+queue, limit, 8)
}

// In a ClusterQueue of 8 GPUs that preempts lower priorities, two 4-GPU
// PyTorchJobs of the GPU training example's batch-low class run. A
// research-high one arrives: exactly one low one is preempted, the
// training operator removes its pods, and only then do the high one's
// pods start; the victim runs again once the quota comes back. Pods never
// use more than 8 GPUs.
func TestPyTorchJobPreemption(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue, localQueue, limit = "e2e-pytorch-preempt", "e2e-pytorch-preempt", "training", 8
	useQueues(ctx, t, s, []string{queue}, pytorchQueueDocs(queue, true))
	bindByLocalQueue(ctx, t, s, ns, localQueue)
	applyExamplePriorityClasses(ctx, t, s)
	rec := recordPyTorchJobs(ctx, t, s, ns)
	usage := watchUsage(ctx, t, s, map[string]string{ns: queue}, []framework.UsageLimit{{Name: "ClusterQueue " + queue, Queues: []string{queue}, Max: limit}})

	low := []string{"low-0", "low-1"}
	for _, name := range low {
		pj := framework.NewPyTorchJob(ns, name).Workers(3).Runtime(20*time.Second).PriorityClass("batch-low").
			Label(framework.LabelKueueQueueName, localQueue).Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
	}
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		running := 0
		for _, name := range low {
			n, err := runningPods(ctx, s.client, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			running += n
		}
		return running == 8, fmt.Sprintf("%d pods of the low PyTorchJobs running", running), nil
	})
	if err != nil {
		t.Fatalf("the low PyTorchJobs did not start: %v", err)
	}

	high := framework.NewPyTorchJob(ns, "high").Workers(3).Runtime(3*time.Second).PriorityClass("research-high").
		Label(framework.LabelKueueQueueName, localQueue).Obj()
	if err := s.client.Create(ctx, high); err != nil {
		t.Fatal(err)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, []string{high.GetName()}, 2*time.Minute)

	var victims []string
	for _, o := range rec.Observations() {
		if o.Kind == framework.Resuspended && !slices.Contains(victims, o.Job) {
			victims = append(victims, o.Job)
		}
	}
	preempted, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Preempted")
	if err != nil {
		t.Fatal(err)
	}
	if len(preempted) != 1 || len(victims) != 1 || len(preempted[victims[0]]) == 0 || !strings.HasPrefix(victims[0], "low-") {
		t.Fatalf("suspended again: %v; Preempted Events on %v: want exactly one low PyTorchJob preempted", victims, slices.Sorted(maps.Keys(preempted)))
	}
	msg := preempted[victims[0]][0].Message
	if p, err := framework.ParsePreempted(msg); err != nil || p.Preemptor != ns+"/high" || p.PreemptorPriority != 1000 || p.VictimPriority != 100 {
		t.Errorf("Preempted Event on %s: %q (%+v, %v); want preempted by %s/high, 1000 > 100", victims[0], msg, p, err, ns)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, low, 2*time.Minute)
	if h := rec.History(victims[0]); h == nil || h.Unsuspends != 2 {
		t.Errorf("victim %s: history %+v, want admitted twice (before and after its preemption)", victims[0], h)
	}
	checkUsage(t, usage.Stop(), "ClusterQueue "+queue, limit, limit)
}

// tally is killed with SIGKILL while PyTorchJobs run and wait, and some
// finish while it is down. Restarted, it rebuilds its ledger: every
// PyTorchJob finishes, no pod of a waiting one is created, the pods never
// use more than the quota, and none is admitted twice.
func TestPyTorchJobRestart(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, localQueue, limit, n = "e2e-pytorch-restart", "training", 8, 6
	useQueues(ctx, t, s, []string{ns}, pytorchQueueDocs(ns, false))
	bindByLocalQueue(ctx, t, s, ns, localQueue)
	rec := recordPyTorchJobs(ctx, t, s, ns)
	var names []string
	for i := range n {
		pj := framework.NewPyTorchJob(ns, fmt.Sprintf("batch-%d", i)).Workers(3).Runtime(3*time.Second).
			Label(framework.LabelKueueQueueName, localQueue).Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
		names = append(names, pj.GetName())
	}
	quota := make(chan framework.PodQuotaReport, 1)
	go func() {
		quota <- framework.WatchPodQuota(ctx, s.client, ns, limit, n, 100*time.Millisecond, 3*time.Minute)
	}()
	count := func(ctx context.Context) (running, pending, finished int, err error) {
		pjs, err := framework.ListPyTorchJobs(ctx, s.client, ns)
		for i := range pjs {
			switch u := &pjs[i]; {
			case framework.PyTorchJobFinished(u):
				finished++
			case framework.PyTorchJobSuspended(u):
				pending++
			default:
				running++
			}
		}
		return running, pending, finished, err
	}
	// tally is killed once two PyTorchJobs run with all their pods (a
	// master and 3 workers each): pods are not created while tally, which
	// gates them, is down, so one without its pods could not finish.
	var finishedAtKill int
	err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		running, pending, finished, err := count(ctx)
		finishedAtKill = finished
		var pods corev1.PodList
		if err == nil {
			err = s.client.List(ctx, &pods, client.InNamespace(ns))
		}
		runningPods := 0
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning && pods.Items[i].DeletionTimestamp == nil {
				runningPods++
			}
		}
		return err == nil && running == 2 && runningPods == 2*4 && pending > 0,
			fmt.Sprintf("%d running (%d pods running), %d pending, %d finished (err %v)", running, runningPods, pending, finished, err), nil
	})
	if err != nil {
		t.Fatalf("the queue never filled: %v", err)
	}
	killTally(t, s)
	err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		_, _, finished, err := count(ctx)
		return err == nil && finished > finishedAtKill, fmt.Sprintf("%d finished (err %v)", finished, err), nil
	})
	if err != nil {
		t.Fatalf("no PyTorchJob finished while tally was down: %v", err)
	}
	if err := s.tally.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("tally not ready after restart: %v", err)
	}
	rep := <-quota
	t.Logf("%d polls; at most %d GPUs in pods at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("after the restart: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all PyTorchJobs finished after the restart: %v", rep.Err)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, names, time.Minute)
	for name, h := range rec.Histories() {
		if h.Unsuspends != 1 {
			t.Errorf("PyTorchJob %s was un-suspended %d times (states %v), want once", name, h.Unsuspends, h.States)
		}
	}
	admitted, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, framework.ReasonAdmitted)
	if err != nil {
		t.Fatal(err)
	}
	for name, es := range admitted {
		if len(es) > 1 || framework.EventCount(&es[0]) > 1 {
			t.Errorf("PyTorchJob %s has %d Admitted Events, want 1", name, len(es))
		}
	}
}

// handoffPyTorchJobs is how many PyTorchJobs go through the one-slot
// queue of TestPyTorchJobHandoff.
const handoffPyTorchJobs = 31

// How long GPUs freed by a finished PyTorchJob stay idle: in a ClusterQueue
// that holds one 8-GPU PyTorchJob (a master and three workers, 2 GPUs each)
// at a time, the time from a watch seeing one PyTorchJob Succeeded to it
// seeing the first pod of the next. It covers tally's reaction and write
// and the training operator's pod creation. The numbers are logged, not
// asserted.
func TestPyTorchJobHandoff(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 6*time.Minute)
	const ns, localQueue, limit = "e2e-pytorch-handoff", "training", 8
	useQueues(ctx, t, s, []string{ns}, pytorchQueueDocs(ns, false))
	bindByLocalQueue(ctx, t, s, ns, localQueue)
	rec := recordPyTorchJobs(ctx, t, s, ns)
	start := time.Now()
	for i := range handoffPyTorchJobs {
		pj := framework.NewPyTorchJob(ns, fmt.Sprintf("step-%02d", i)).Workers(3).GPUs(2).Runtime(100*time.Millisecond).
			Label(framework.LabelKueueQueueName, localQueue).Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
	}
	rep := framework.WatchPodQuota(ctx, s.client, ns, limit, handoffPyTorchJobs, 100*time.Millisecond, 5*time.Minute)
	wall := time.Since(start)
	for _, v := range rep.Violations {
		t.Errorf("%s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all PyTorchJobs finished: %v", rep.Err)
	}
	lat := framework.HandoffLatencies(rec.Observations(), framework.PodsCreated)
	if len(lat) < handoffPyTorchJobs-1 {
		t.Errorf("only %d hand-offs observed of %d (watch re-lists: %d)", len(lat), handoffPyTorchJobs-1, rec.Gaps())
	}
	t.Logf("%d PyTorchJobs through an 8-GPU queue in %s (%.2f s each)", handoffPyTorchJobs, wall.Round(time.Millisecond), wall.Seconds()/handoffPyTorchJobs)
	t.Logf("Succeeded -> the next PyTorchJob's first pod over %d hand-offs: p50 %s, p90 %s, p99 %s, max %s",
		len(lat), scenario.Percentile(lat, 50).Round(time.Millisecond), scenario.Percentile(lat, 90).Round(time.Millisecond),
		scenario.Percentile(lat, 99).Round(time.Millisecond), scenario.Percentile(lat, 100).Round(time.Millisecond))
}

// pytorchQueueDocs is a ClusterQueue name of 8 GPUs, which preempts lower
// priorities within itself if preempt, and the LocalQueue "training" of
// namespace name that points to it.
func pytorchQueueDocs(name string, preempt bool) string {
	policy := "Never"
	if preempt {
		policy = "LowerPriority"
	}
	return gpuQueueDoc(name, 8, policy) + fmt.Sprintf(`---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  name: training
  namespace: %[1]s
spec:
  clusterQueue: %[1]s
`, name)
}

// gpuQueueDoc is a ClusterQueue name of gpus GPUs (and 64 CPUs, 256Gi) in
// the GPU flavor, with withinClusterQueue preemption policy.
func gpuQueueDoc(name string, gpus int, withinClusterQueue string) string {
	return fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: %s
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: %s
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: %d}
`, name, withinClusterQueue, gpus)
}

// bindByLocalQueue creates namespace ns, which a LocalQueue of the config
// names, and waits until tally manages it.
func bindByLocalQueue(ctx context.Context, t *testing.T, s *suite, ns, localQueue string) {
	t.Helper()
	if err := framework.CreateNamespace(ctx, s.client, ns, ""); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := framework.WaitManaged(ctx, s.client, ns, map[string]string{framework.LabelKueueQueueName: localQueue}); err != nil {
		t.Fatalf("namespace %s, named by LocalQueue %s, is not managed: %v", ns, localQueue, err)
	}
}

// applyExamplePriorityClasses creates the PriorityClasses of
// examples/gpu-training/priority-classes.yaml, unless they exist.
func applyExamplePriorityClasses(ctx context.Context, t *testing.T, s *suite) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.env.Root, "examples", "gpu-training", "priority-classes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		pc := &schedulingv1.PriorityClass{}
		if err := yaml.Unmarshal([]byte(doc), pc); err != nil {
			t.Fatalf("priority-classes.yaml: %v", err)
		}
		if err := s.client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
		}
	}
}

func recordPyTorchJobs(ctx context.Context, t *testing.T, s *suite, ns string) *framework.Recorder {
	t.Helper()
	rec, err := framework.RecordPyTorchJobs(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Stop() })
	return rec
}

// checkQueued checks a PyTorchJob as its create returned it: suspended,
// pending, in queue.
func checkQueued(t *testing.T, pj *unstructured.Unstructured, queue string) {
	t.Helper()
	if l := pj.GetLabels(); !framework.PyTorchJobSuspended(pj) || l[framework.LabelState] != framework.StatePending || l[framework.LabelQueue] != queue {
		t.Errorf("PyTorchJob %s as created: suspend=%v labels=%v; want suspended, pending, in %s", pj.GetName(), framework.PyTorchJobSuspended(pj), l, queue)
	}
}

// waitPyTorchJobs waits until the named PyTorchJobs of ns have Succeeded
// and carry tally.dev/state=finished, and returns them.
func waitPyTorchJobs(ctx context.Context, t *testing.T, c client.Reader, ns string, names []string, timeout time.Duration) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, len(names))
	err := framework.Poll(ctx, 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		for i, name := range names {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(framework.PyTorchJobGVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
				return false, err.Error(), nil
			}
			if !framework.PyTorchJobCondition(u, "Succeeded") || u.GetLabels()[framework.LabelState] != framework.StateFinished {
				return false, fmt.Sprintf("%s: conditions %s, %s=%q", name, framework.PyTorchJobConditions(u), framework.LabelState, u.GetLabels()[framework.LabelState]), nil
			}
			out[i] = u
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("waiting for PyTorchJobs %v of %s to succeed: %v", names, ns, err)
	}
	return out
}

// runningPods counts the Running pods of PyTorchJob name.
func runningPods(ctx context.Context, c client.Reader, ns, name string) (int, error) {
	var l corev1.PodList
	if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range l.Items {
		if framework.Owner(&p, framework.PyTorchJobGVK.Kind) == name && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// checkEvents checks that PyTorchJob name has an Event of each reason.
func checkEvents(ctx context.Context, t *testing.T, c client.Reader, ns, name string, reasons ...string) {
	t.Helper()
	// Events are written asynchronously, and QuotaReleased only once the
	// ledger has seen the finish the caller waited for: wait for each.
	for _, r := range reasons {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			es, err := framework.WorkloadEvents(ctx, c, ns, framework.PyTorchJobGVK.Kind, r)
			return len(es[name]) > 0, err
		})
		if err != nil {
			t.Errorf("PyTorchJob %s has no %s Event: %v", name, r, err)
		}
	}
}
