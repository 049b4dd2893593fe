package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// kindsConfig is loaded with the suite's config by TestKindsQueued: a
// 4-CPU ClusterQueue on the CPU nodes, and a priority that preempts.
var kindsConfig = cpuQueue("e2e-kinds", 4, "preemption: {withinClusterQueue: LowerPriority}") + `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: e2e-kinds-high
value: 1000
`

// JobSets, MPIJobs and RayJobs, each on its real operator, queued by tally
// in a 4-CPU queue: a workload of 3 pods (1 CPU each) created un-suspended
// is suspended by the webhook and admitted all at once onto the CPU
// flavor's nodes; the Jobs its operator makes for it are not queued on
// their own; a 2-CPU batch/v1 Job of a higher priority preempts it, its
// pods go and the Job runs; it is admitted again once the Job is done, runs
// to its end (a RayJob ends Failed on kwok: its operator cannot reach the
// Ray dashboard) and frees its quota, which a 4-CPU Job then takes. Pods
// in the namespace never hold more than 4 CPUs at once. The CRDs are
// installed while tally runs: the config reload that brings the queue
// makes it watch them.
func TestKindsQueued(t *testing.T) {
	s := setup(t)
	build := testContext(t, 30*time.Minute)
	for _, name := range []string{framework.JobSetController, framework.MPIOperator, framework.RayOperator} {
		if err := s.env.BuildTool(build, name); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t, 15*time.Minute)
	const ns, queue = "e2e-kinds", "e2e-kinds"
	for _, install := range []func(context.Context) error{s.cluster.InstallJobSetCRD, s.cluster.InstallMPIJobCRD, s.cluster.InstallRayCRDs} {
		if err := install(ctx); err != nil {
			t.Fatal(err)
		}
	}
	useQueues(ctx, t, s, []string{queue}, kindsConfig)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	peak := watchCPU(ctx, t, s, ns, 4)
	dir := filepath.Dir(s.cluster.Kubeconfig)

	patches := func(resource string) func() {
		before := apiPatches(ctx, t, s, resource)
		return func() {
			t.Logf("%s: %d PATCH requests on the workload (2 admissions, 1 preemption; the rest are tally's state labels and its restore of the candidate flavors after the preemption)",
				resource, apiPatches(ctx, t, s, resource)-before)
		}
	}
	t.Run("JobSet", func(t *testing.T) {
		defer patches("jobsets")()
		o, err := framework.NewJobSetController(ctx, s.cluster, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := framework.RemoveJobSetWebhooks(context.Background(), s.client); err != nil {
				t.Errorf("removing JobSet's webhooks: %v", err)
			}
		})
		startOperator(ctx, t, o, 2*time.Minute)
		js := framework.OperatorJob{Namespace: ns, Name: "js", Workers: 3, Runtime: 20 * time.Second}.JobSet()
		queuedKind(ctx, t, s, js, queue, "workers=cpu-flavor", 3, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Completed") == "True"
		})
	})
	t.Run("MPIJob", func(t *testing.T) {
		defer patches("mpijobs")()
		o, err := framework.NewMPIOperator(ctx, s.cluster, dir)
		if err != nil {
			t.Fatal(err)
		}
		startOperator(ctx, t, o, 2*time.Minute)
		mj := framework.OperatorJob{Namespace: ns, Name: "mj", Workers: 2, Runtime: 20 * time.Second}.MPIJob()
		queuedKind(ctx, t, s, mj, queue, "launcher=cpu-flavor,worker=cpu-flavor", 3, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Succeeded") == "True"
		})
	})
	t.Run("RayJob", func(t *testing.T) {
		defer patches("rayjobs")()
		o, err := framework.NewRayOperator(ctx, s.cluster, dir)
		if err != nil {
			t.Fatal(err)
		}
		startOperator(ctx, t, o, 2*time.Minute)
		rj := framework.OperatorJob{Namespace: ns, Name: "rj", Workers: 1, Runtime: 3 * time.Second}.RayJob()
		// The submitter starts once the cluster is up: the head and the
		// worker come first.
		queuedKind(ctx, t, s, rj, queue, "head=cpu-flavor,workers=cpu-flavor,submitter=cpu-flavor", 2, func(u *unstructured.Unstructured) bool {
			return framework.RayJobDeploymentStatus(u) == "Failed"
		})
	})
	t.Logf("at most %d CPUs in the namespace's pods at once", peak())
}

// queuedKind runs the scenario of TestKindsQueued for workload w, whose
// admission records flavors and makes at least pods pods (1 CPU each),
// and which has ended when done says so.
func queuedKind(ctx context.Context, t *testing.T, s *suite, w *unstructured.Unstructured, queue, flavors string, pods int, done func(*unstructured.Unstructured) bool) {
	t.Helper()
	gvk, ns, name := w.GroupVersionKind(), w.GetNamespace(), w.GetName()
	if err := s.client.Create(ctx, w); err != nil {
		t.Fatalf("creating %s %s: %v", gvk.Kind, name, err)
	}
	suspended, _, _ := unstructured.NestedBool(w.Object, framework.SuspendPath(gvk)...)
	if l := w.GetLabels(); !suspended || l[framework.LabelState] != framework.StatePending || l[framework.LabelQueue] != queue {
		t.Errorf("%s %s as created: suspend=%v labels=%v; want suspended, pending, in %s", gvk.Kind, name, suspended, l, queue)
	}
	get := func(ctx context.Context) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	}
	waitFor := func(what string, timeout time.Duration, cond func(*unstructured.Unstructured, []corev1.Pod) bool) *unstructured.Unstructured {
		t.Helper()
		var last *unstructured.Unstructured
		err := framework.Poll(ctx, 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
			u, err := get(ctx)
			if err != nil {
				return false, "", err
			}
			live, err := workloadPods(ctx, s.client, ns, string(u.GetUID()))
			if err != nil {
				return false, "", err
			}
			last = u
			return cond(u, live), fmt.Sprintf("%s: state %q, %d live pods, conditions %s", what, u.GetLabels()[framework.LabelState], len(live), framework.Conditions(u)), nil
		})
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, name, err)
		}
		return last
	}

	admitted := func(u *unstructured.Unstructured, live []corev1.Pod) bool {
		return u.GetLabels()[framework.LabelState] == "admitted" && len(live) >= pods && allRunning(live)
	}
	u := waitFor("admitted, its pods running", 2*time.Minute, admitted)
	if got := u.GetAnnotations()[framework.AnnotationFlavors]; got != flavors {
		t.Errorf("%s=%q, want %q", framework.AnnotationFlavors, got, flavors)
	}
	live, _ := workloadPods(ctx, s.client, ns, string(u.GetUID()))
	for _, p := range live {
		if p.Spec.NodeName == "" {
			continue // made since (a RayJob's submitter), not scheduled yet
		}
		node := &corev1.Node{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatalf("pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		if node.Labels["node-type"] != "cpu" {
			t.Errorf("pod %s runs on %s, not a node of cpu-flavor", p.Name, node.Name)
		}
	}

	// A higher-priority Job of another kind takes 2 of the 4 CPUs.
	high := framework.NewJob(ns, "preemptor-"+name).Request("cpu", "1").Parallelism(2).Runtime(3*time.Second).
		Label(framework.LabelPriorityClass, "e2e-kinds-high").Obj()
	if err := s.client.Create(ctx, high); err != nil {
		t.Fatal(err)
	}
	waitFor("preempted, its pods gone", time.Minute, func(u *unstructured.Unstructured, live []corev1.Pod) bool {
		s, _, _ := unstructured.NestedBool(u.Object, framework.SuspendPath(gvk)...)
		return s && len(live) == 0
	})
	waitJobFinished(ctx, t, s, ns, high.Name)
	waitFor("admitted again, its pods running", 2*time.Minute, admitted)
	u = waitFor("finished, its pods gone", 4*time.Minute, func(u *unstructured.Unstructured, live []corev1.Pod) bool {
		return done(u) && u.GetLabels()[framework.LabelState] == "finished" && len(live) == 0
	})
	for _, reason := range []string{"Queued", "Admitted", "Preempted", "QuotaReleased"} {
		if err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			es, err := framework.WorkloadEvents(ctx, s.client, ns, gvk.Kind, reason)
			return len(es[name]) > 0, "no " + reason + " Event", err
		}); err != nil {
			t.Errorf("%s %s: %v", gvk.Kind, name, err)
		}
	}
	admissions, err := framework.WorkloadEvents(ctx, s.client, ns, gvk.Kind, "Admitted")
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(admissions[name]); n != 2 {
		t.Errorf("%s %s was admitted %d times, want 2 (before and after its preemption)", gvk.Kind, name, n)
	}

	// The Jobs its operator made are parts of it, not queued.
	jobs := &batchv1.JobList{}
	if err := s.client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		for _, ref := range j.OwnerReferences {
			if ref.UID == u.GetUID() && (j.Labels[framework.LabelState] != "" || j.Labels[framework.LabelQueue] != "") {
				t.Errorf("Job %s, made by %s %s, is queued on its own: labels %v", j.Name, gvk.Kind, name, j.Labels)
			}
		}
	}

	// Its quota is free: a 4-CPU Job runs.
	all := framework.NewJob(ns, "after-"+name).Request("cpu", "1").Parallelism(4).Runtime(2 * time.Second).Obj()
	if err := s.client.Create(ctx, all); err != nil {
		t.Fatal(err)
	}
	waitJobFinished(ctx, t, s, ns, all.Name)
}

// workloadPods lists the pods of namespace ns that tally's admission of
// workload uid labelled and that have not terminated.
func workloadPods(ctx context.Context, c client.Reader, ns, uid string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"tally.dev/workload": uid}); err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	return live, nil
}

func allRunning(pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			return false
		}
	}
	return true
}

func countEvents(es []corev1.Event) int {
	n := 0
	for i := range es {
		n += framework.EventCount(&es[i])
	}
	return n
}

// waitJobFinished waits until Job ns/name has completed, and returns it.
func waitJobFinished(ctx context.Context, t *testing.T, s *suite, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return false, "", err
		}
		return framework.Completed(j), fmt.Sprintf("Job %s: state %q, suspended %v", name, j.Labels[framework.LabelState], framework.Suspended(j)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// watchCPU polls the CPU requests of the live pods of namespace ns until
// the test ends and fails it if they ever exceed limit; it returns a
// function that reads the peak.
func watchCPU(ctx context.Context, t *testing.T, s *suite, ns string, limit int64) func() int64 {
	ctx, cancel := context.WithCancel(ctx)
	var peak atomic.Int64
	var over []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods := &corev1.PodList{}
			if err := s.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				continue
			}
			cpus, names := int64(0), []string{}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Spec.NodeName == "" {
					continue
				}
				cpus += framework.PodRequest(&p.Spec, corev1.ResourceCPU)
				names = append(names, p.Name)
			}
			if cpus > peak.Load() {
				peak.Store(cpus)
			}
			if cpus > limit && len(over) < 5 {
				over = append(over, fmt.Sprintf("%d CPUs in %s", cpus, strings.Join(names, ", ")))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, o := range over {
			t.Errorf("more than %d CPUs in the pods of %s at once: %s", limit, ns, o)
		}
	})
	return peak.Load
}

// apiPatches reads from the API server's metrics how many PATCH requests
// it has served on resource (not its subresources, such as status).
func apiPatches(ctx context.Context, t *testing.T, s *suite, resource string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `verb="PATCH"`) ||
			!strings.Contains(line, `resource="`+resource+`"`) || !strings.Contains(line, `subresource=""`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			n += int(v)
		}
	}
	return n
}

// cpuQueue is a ClusterQueue document of cpus CPUs on the CPU nodes
// (cpu-flavor), its spec with the extra line, if any.
func cpuQueue(name string, cpus int, extra string) string {
	if extra != "" {
		extra = "\n  " + extra
	}
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: %s
spec:
  namespaceSelector: {}%s
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: cpu-flavor
      resources:
      - {name: cpu, nominalQuota: %d}
      - {name: memory, nominalQuota: 64Gi}
      - {name: nvidia.com/gpu, nominalQuota: 0}
`, name, extra, cpus)
}

// admissionOrder sorts Jobs of one priority as the ledger admits them:
// by creation time (which has a resolution of one second), then by UID.
func admissionOrder(jobs []*batchv1.Job) []string {
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(string(a.UID), string(b.UID))
	})
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	return names
}
