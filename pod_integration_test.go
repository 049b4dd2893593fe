package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/ledger"
	"tally.dev/tally/queues"
	"tally.dev/tally/webhook"
)

// newPod is a pod that requests cpu, owned by controller (if set) as its
// controller would make it: a Job's keeps to the nodes its pod template
// does.
func newPod(ns, name, cpu string, controller metav1.Object, kind string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	if controller != nil {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: kind, Name: controller.GetName(), UID: controller.GetUID(), Controller: ptr.To(true)}}
	}
	if j, ok := controller.(*batchv1.Job); ok {
		p.Spec.NodeSelector = j.Spec.Template.Spec.NodeSelector
		p.Spec.Affinity = j.Spec.Template.Spec.Affinity.DeepCopy()
		p.Spec.Tolerations = j.Spec.Template.Spec.Tolerations
	}
	return p
}

// admittedJob creates a Job in ns of pods pods that ask for cpu each,
// and returns it once tally has admitted it.
func admittedJob(t *testing.T, ns, name, cpu string, pods int32) *batchv1.Job {
	t.Helper()
	job := newJob(ns, name, cpu)
	job.Spec.Parallelism, job.Spec.Completions = ptr.To(pods), ptr.To(pods)
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j := getJob(t, ns, name)
		return !ptr.Deref(j.Spec.Suspend, true), "Job " + name + " not admitted"
	})
	return getJob(t, ns, name)
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == queues.SchedulingGate })
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return p
}

// watchPods watches the pods of ns from now on. The function it returns
// yields each pod the watch shows, in the API server's order, for up to
// timeout.
func watchPods(t *testing.T, ns string) func(timeout time.Duration) iter.Seq[*corev1.Pod] {
	t.Helper()
	wc, err := client.NewWithWatch(envCfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watching the pods of %s: %v", ns, err)
	}
	t.Cleanup(w.Stop)
	return func(timeout time.Duration) iter.Seq[*corev1.Pod] {
		return func(yield func(*corev1.Pod) bool) {
			deadline := time.After(timeout)
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("the watch of the pods of %s closed", ns)
					}
					if p, ok := ev.Object.(*corev1.Pod); ok && !yield(p) {
						return
					}
				case <-deadline:
					return
				}
			}
		}
	}
}

// TestIntegrationPodGate runs the pod gate on the real API server: pods of
// an admitted Job pass; one more than it was admitted with waits behind
// the scheduling gate as the Job's and runs when one of the Job's pods
// ends; a bare pod is queued on its own behind the gate and admitted by
// removing it; a larger one sends its Job back to its queue at its size;
// and a user may not take the gate off.
func TestIntegrationPodGate(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podgate"
	bindManaged(t, ns, "pods") // 2 CPUs, its own
	job := admittedJob(t, ns, "two", "500m", 2)

	// The Job's two pods, as the job controller makes them: let through,
	// labelled with its UID.
	for _, name := range []string{"two-a", "two-b"} {
		p := newPod(ns, name, "500m", job, "Job")
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatalf("creating pod %s of Job two: %v", name, err)
		}
		if gated(p) || p.Labels[queues.LabelWorkload] != string(job.UID) {
			t.Fatalf("pod %s of admitted Job two: gates %v, labels %v; want no gate and %s=%s", name, p.Spec.SchedulingGates, p.Labels, queues.LabelWorkload, job.UID)
		}
	}
	// A third pod that names the Job as its controller: one more than it
	// was admitted with, so it waits as the Job's, though the queue has
	// 1 CPU left: the quota it would run on is the Job's. Once one of the
	// Job's pods succeeds, it takes its place: the namespace's pod watch
	// shows it lose the gate after, never before.
	order := watchPods(t, ns)
	extra := newPod(ns, "two-c", "500m", job, "Job")
	if err := k8s.Create(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if !gated(extra) || extra.Labels[queues.LabelWorkload] != string(job.UID) {
		t.Fatalf("a third pod of Job two: gates %v, labels %v; want it gated as Job two's", extra.Spec.SchedulingGates, extra.Labels)
	}
	done := getPod(t, ns, "two-a")
	done.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	succeeded, ran := false, false
	for p := range order(10 * time.Second) {
		if p.Name == "two-a" && p.Status.Phase == corev1.PodSucceeded {
			succeeded = true
		}
		if ran = p.Name == "two-c" && !gated(p); ran {
			if !succeeded || p.Labels[queues.LabelWorkload] != string(job.UID) {
				t.Fatalf("pod two-c lost the gate while Job two ran its 2 pods (two-a had succeeded: %v), labels %v", succeeded, p.Labels)
			}
			break
		}
	}
	if !ran {
		t.Fatalf("pod two-c still gated 10s after two-a succeeded: %v", getPod(t, ns, "two-c").Spec.SchedulingGates)
	}
	// A bare pod that asks for more than is left (1.5 CPUs of 1): it
	// waits, with a Pending Event.
	bare := newPod(ns, "bare", "1500m", nil, "")
	if err := k8s.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		list := &corev1.EventList{}
		_ = k8s.List(ctx, list, client.InNamespace(ns))
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "bare" && e.Reason == "Pending" {
				return true, ""
			}
		}
		return false, "no Pending Event on pod bare"
	})
	if p := getPod(t, ns, "bare"); !gated(p) {
		t.Fatalf("pod bare runs without quota: gates %v", p.Spec.SchedulingGates)
	}

	// A user who may update pods may not take the gate off, nor relabel.
	alice := impersonate(t, "alice-pods", ns)
	p := getPod(t, ns, "bare")
	p.Spec.SchedulingGates = nil
	err := alice.Update(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "only tally removes it") {
		t.Errorf("a user taking tally's gate off: %v; want a denial", err)
	}
	p = getPod(t, ns, "bare")
	p.Labels[queues.LabelWorkload] = string(job.UID)
	if err := alice.Update(ctx, p); err == nil || !strings.Contains(err.Error(), "only tally may change it") {
		t.Errorf("a user relabelling a queued pod: %v; want a denial", err)
	}

	// A pod of the Job larger than it was admitted with (a sidecar of
	// 250m): the queue has room for 250m more on each of the Job's two
	// pods, so the Job is charged for it in place, and the pod runs.
	if err := k8s.Delete(ctx, getPod(t, ns, "two-b"), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	withSidecar := func(name, cpu string) *corev1.Pod {
		p := newPod(ns, name, "500m", job, "Job")
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}})
		return p
	}
	big := withSidecar("two-d", "250m")
	if err := k8s.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	if !gated(big) || big.Labels[queues.LabelWorkload] != string(job.UID) {
		t.Fatalf("a larger pod of Job two: gates %v, labels %v; want it gated as Job two's", big.Spec.SchedulingGates, big.Labels)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j, p := getJob(t, ns, "two"), getPod(t, ns, "two-d")
		return !ptr.Deref(j.Spec.Suspend, true) && j.Annotations[queues.AnnotationPodOverhead] == "cpu=250m" && !gated(p),
			fmt.Sprintf("Job two: suspend %v, annotations %v; pod two-d gates %v", ptr.Deref(j.Spec.Suspend, false), j.Annotations, p.Spec.SchedulingGates)
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "two", "PodOverhead", "charged as pod overhead cpu=250m")
	})
	// A pod larger still (a sidecar of 1250m, 1 CPU beyond the recorded
	// overhead): 2 CPUs more do not fit, so the Job goes back to its
	// queue with the new overhead, and says why.
	if err := k8s.Delete(ctx, getPod(t, ns, "two-d"), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	huge := withSidecar("two-e", "1250m")
	if err := k8s.Create(ctx, huge); err != nil {
		t.Fatal(err)
	}
	requeuedWithOverhead(t, ns, "two", "two-e", "cpu=1250m", "Evicted", "pod overhead cpu=1250m")
}

// requeuedWithOverhead waits until Job name of ns is suspended with pod
// overhead overhead, and has an Event of reason that says says; its pod
// stays gated.
func requeuedWithOverhead(t *testing.T, ns, name, pod, overhead, reason, says string) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		j := getJob(t, ns, name)
		return ptr.Deref(j.Spec.Suspend, false) && j.Annotations[queues.AnnotationPodOverhead] == overhead,
			fmt.Sprintf("Job %s: suspend %v, annotations %v", name, ptr.Deref(j.Spec.Suspend, false), j.Annotations)
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, name, reason, says)
	})
	if p := getPod(t, ns, pod); !gated(p) {
		t.Errorf("pod %s runs: gates %v", pod, p.Spec.SchedulingGates)
	}
}

// TestIntegrationPodGateBurst makes a Job's pods one right after
// another, faster than the gate's cache sees them: the pods beyond the
// Job's count wait as the Job's behind the scheduling gate, never let
// through. The invariant is read from the pods.
func TestIntegrationPodGateBurst(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podburst"
	bindManaged(t, ns, "accel") // 100 CPUs
	job := admittedJob(t, ns, "three", "100m", 3)
	const made = 9
	for i := range made {
		p := newPod(ns, fmt.Sprintf("three-%d", i), "100m", job, "Job")
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
		ran := !gated(p) && p.Labels[queues.LabelWorkload] == string(job.UID)
		if want := i < 3; ran != want {
			t.Errorf("pod %d of Job three (admitted with 3): let through as the Job's %v, want %v (gates %v, labels %v)",
				i, ran, want, p.Spec.SchedulingGates, p.Labels)
		}
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var asJob, held int
	for _, p := range pods.Items {
		switch {
		case p.Labels[queues.LabelWorkload] != string(job.UID):
			t.Errorf("pod %s is not Job three's: labels %v", p.Name, p.Labels)
		case gated(&p):
			held++
		default:
			asJob++
		}
	}
	if len(pods.Items) != made || asJob != 3 || held != made-3 {
		t.Errorf("of %d pods, %d run as Job three's and %d wait; want %d, 3 and %d", len(pods.Items), asJob, held, made, made-3)
	}
}

// runningAs counts the pods of ns that run as the workload with uid:
// labelled with it, not held by tally's gate, not being deleted.
func runningAs(t *testing.T, ns string, uid string) (n int, names []string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{queues.LabelWorkload: uid}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !gated(&p) && p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return len(names), names
}

// TestIntegrationExcessPodDeleted shrinks a running Job below the pods
// it runs: the ledger deletes the newest pod beyond its new count once
// it has stayed beyond it for a grace period, and says so on the Job.
// Released, the pods have their owner references taken off, as the Job
// controller does to pods that name it as controller without its
// selector's labels: tally still counts them for the Job, and judges
// them so.
func TestIntegrationExcessPodDeleted(t *testing.T) {
	needCluster(t)
	for _, released := range []bool{false, true} {
		t.Run(fmt.Sprintf("released=%v", released), func(t *testing.T) {
			ctx := context.Background()
			ns := "podexcess"
			if released {
				ns = "podexcess-released"
			}
			bindManaged(t, ns, "accel")
			job := admittedJob(t, ns, "two", "100m", 2)
			for _, name := range []string{"two-a", "two-b"} {
				if err := k8s.Create(ctx, newPod(ns, name, "100m", job, "Job")); err != nil {
					t.Fatal(err)
				}
			}
			if n, names := runningAs(t, ns, string(job.UID)); n != 2 {
				t.Fatalf("pods running as Job two: %v; want two-a and two-b", names)
			}
			if released {
				for _, name := range []string{"two-a", "two-b"} {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
					if err := k8s.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))); err != nil {
						t.Fatalf("releasing pod %s: %v", name, err)
					}
				}
			}
			job.Spec.Parallelism = ptr.To[int32](1)
			if err := k8s.Update(ctx, job); err != nil {
				t.Fatalf("shrinking Job two: %v", err)
			}
			eventually(t, 20*time.Second, func() (bool, string) {
				n, names := runningAs(t, ns, string(job.UID))
				return n == 1 && names[0] == "two-a", fmt.Sprintf("pods running as Job two: %v; want two-a alone", names)
			})
			eventually(t, 10*time.Second, func() (bool, string) {
				return hasEvent(t, ns, "two", "ExcessPod", "Deleted pod two-b")
			})
		})
	}
}

// TestIntegrationConcurrentPodsAsUser has a user make many pods of their
// admitted Job at once, each naming it as controller: however many the
// gate lets through while the others are in flight, no more than the
// Job's count run as the Job's once the ledger has seen them. Read from
// the pods.
func TestIntegrationConcurrentPodsAsUser(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podrace"
	bindManaged(t, ns, "accel")
	job := admittedJob(t, ns, "one", "100m", 1)
	alice := impersonate(t, "alice-race", ns)
	const made = 8
	errs := make(chan error, made)
	for i := range made {
		go func() { errs <- alice.Create(ctx, newPod(ns, fmt.Sprintf("one-%d", i), "100m", job, "Job")) }()
	}
	for range made {
		if err := <-errs; err != nil {
			t.Errorf("alice creating a pod: %v", err)
		}
	}
	n, names := runningAs(t, ns, string(job.UID))
	t.Logf("the gate let %d of %d pods made at once run as Job one: %v", n, made, names)
	eventually(t, 20*time.Second, func() (bool, string) {
		n, names := runningAs(t, ns, string(job.UID))
		return n <= 1, fmt.Sprintf("pods running as Job one (admitted with 1): %v", names)
	})
}

// inProcessGate starts, in the test's process, a cache like tally's on
// the real API server, whose pod informer selects pods by podSelector
// (nil: tally's own selector), and returns a function that makes a pod
// gate reading it, as tally's does, with no pods let through yet.
func inProcessGate(tb testing.TB, ctx context.Context, podSelector labels.Selector) func() *webhook.PodGate {
	tb.Helper()
	byObject := ledger.CacheOptions(tallyNS, false, false)
	if podSelector != nil {
		for obj, o := range byObject {
			if _, ok := obj.(*corev1.Pod); ok {
				o.Label = podSelector
				byObject[obj] = o
			}
		}
	}
	c, err := cache.New(envCfg, cache.Options{Scheme: k8s.Scheme(), ByObject: byObject})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, webhook.PodWorkloadIndex, webhook.IndexPodWorkload); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	cached, err := client.New(envCfg, client.Options{Scheme: k8s.Scheme(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		tb.Fatal(err)
	}
	cfg, _, errs := queues.Parse([]byte(testConfig))
	if len(errs) > 0 {
		tb.Fatal(errs)
	}
	decoder := admission.NewDecoder(k8s.Scheme())
	jobs := &webhook.JobMutator{Store: queues.NewStore(cfg), Namespaces: c, APIReader: k8s, Namespace: tallyNS, Decoder: decoder}
	return func() *webhook.PodGate {
		return &webhook.PodGate{Jobs: jobs, Reader: cached, APIReader: k8s, Decoder: decoder}
	}
}

// podRequest is the AdmissionRequest that creates p.
func podRequest(tb testing.TB, p *corev1.Pod) admission.Request {
	tb.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "test", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
		Namespace: p.Namespace, Object: runtime.RawExtension{Raw: raw}}}
}

// TestIntegrationPodGateStaleCache judges a Job's pods with a gate whose
// cache never sees a pod, as a cache that lags the API server does not
// yet: once the gate has let one through, it counts the Job's pods on
// the API server, and the pod one beyond the Job's count waits behind
// the scheduling gate.
func TestIntegrationPodGateStaleCache(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "podstale"
	bindManaged(t, ns, "accel")
	job := admittedJob(t, ns, "one", "100m", 1)
	gate := inProcessGate(t, ctx, labels.SelectorFromSet(labels.Set{"tally.dev/test-no-pod": "true"}))()
	ran := func(name string) (bool, admission.Response) {
		resp := gate.Handle(ctx, podRequest(t, newPod(ns, name, "100m", job, "Job")))
		if !resp.Allowed {
			t.Fatalf("pod %s: denied: %v", name, resp.Result)
		}
		return !patches(t, resp, "/spec/schedulingGates"), resp
	}
	if ok, resp := ran("one-a"); !ok {
		t.Fatalf("the first pod of admitted Job one is held: %s", resp.Patch)
	}
	// The pod the gate let through is made (through tally's own gate).
	if err := k8s.Create(ctx, newPod(ns, "one-a", "100m", job, "Job")); err != nil {
		t.Fatal(err)
	}
	ok, resp := ran("one-b")
	if ok {
		t.Errorf("a second pod of Job one (admitted with 1) runs as the Job's while the cache has not seen the first: %s", resp.Patch)
	}
	want := "tally: Job podstale/one already runs as many pods as it was admitted with; this pod waits behind the scheduling gate tally.dev/admission until one of them ends"
	if !slices.Contains(resp.Warnings, want) {
		t.Errorf("warnings for a second pod of Job one: %q; want %q", resp.Warnings, want)
	}
}

// impersonate returns a client acting as user, who may do anything to
// pods in ns.
func impersonate(t *testing.T, user, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(envCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer sees a RoleBinding a moment after it is made.
	eventually(t, 10*time.Second, func() (bool, string) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Resource: "pods"}}}
		if err := c.Create(ctx, review); err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, user + " may not update pods yet"
	})
	return c
}

// BenchmarkPodGate measures the pod gate's handler in process, on the
// real API server and a cache like tally's, reporting the median and
// 99th percentile latency of single requests: a pod of an admitted Job
// that runs 50 pods (the common case: its owner and pods read from the
// cache, and the pods fitted to the Job's pod set), and a bare pod,
// queued on its own.
func BenchmarkPodGate(b *testing.B) {
	if k8s == nil {
		b.Skip("KUBEBUILDER_ASSETS not set")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "podbench"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{queues.AnnotationNamespaceQueue: "accel"}}}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err == nil && n.Labels[queues.LabelManaged] == "true" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("namespace podbench was not labelled managed")
		}
	}
	job := newJob(ns, "wide", "1")
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](60), ptr.To[int32](60)
	if err := k8s.Create(ctx, job); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ptr.Deref(job.Spec.Suspend, true) {
		if time.Now().After(deadline) {
			b.Fatal("Job wide was not admitted")
		}
		time.Sleep(50 * time.Millisecond)
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(job), job)
	}
	for i := range 50 {
		if err := k8s.Create(ctx, newPod(ns, fmt.Sprintf("wide-%d", i), "1", job, "Job")); err != nil {
			b.Fatal(err)
		}
	}
	// The same, in a namespace whose queue charges devices, each pod
	// claiming one through a template.
	claimed := benchClaimingJob(b, ctx)
	newGate := inProcessGate(b, ctx, nil)
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		gated bool
		// burst: the gate let a pod of the Job through a moment ago, so
		// it counts the Job's pods on the API server, not in its cache.
		burst bool
	}{
		{"pod-of-admitted-job", newPod(ns, "wide-next", "1", job, "Job"), false, false},
		{"pod-of-admitted-job-burst", newPod(ns, "wide-next", "1", job, "Job"), false, true},
		{"bare-pod", newPod(ns, "bare", "1", nil, ""), true, false},
		{"pod-of-admitted-job-claims", claimingPod("podbenchdra", "wide-next", "one-gpu", claimed), false, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := podRequest(b, tc.pod)
			// The first request waits for the cache to fill.
			gate := newGate()
			if resp := gate.Handle(ctx, req); !resp.Allowed {
				b.Fatal(resp.Result.Message)
			}
			b.ReportAllocs()
			lat := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				if !tc.burst {
					// A gate that has let no pod through counts in its
					// cache; making it is not measured.
					b.StopTimer()
					gate = newGate()
					b.StartTimer()
				}
				start := time.Now()
				resp := gate.Handle(ctx, req)
				lat = append(lat, time.Since(start))
				if !resp.Allowed {
					b.Fatal(resp.Result.Message)
				}
				if patched := patches(b, resp, "/spec/schedulingGates"); patched != tc.gated {
					b.Fatalf("gated %v, want %v: %s", patched, tc.gated, resp.Patch)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// benchClaimingJob makes, in namespace podbenchdra (of queue drabench),
// a ResourceClaimTemplate of one device and an admitted Job of 60 pods
// that claim one each, 50 of which exist, as BenchmarkPodGate does
// without claims, and returns the Job.
func benchClaimingJob(b *testing.B, ctx context.Context) *batchv1.Job {
	const ns = "podbenchdra"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{queues.AnnotationNamespaceQueue: "drabench"}}}); err != nil {
		b.Fatal(err)
	}
	tpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-gpu"}}
	tpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 1}}}
	if err := k8s.Create(ctx, tpl); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	job := newJob(ns, "wide", "100m")
	job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](60), ptr.To[int32](60)
	job.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	job.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	for {
		// The namespace is managed once tally has labelled it.
		err := k8s.Create(ctx, job)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for ptr.Deref(job.Spec.Suspend, true) || job.Labels[queues.LabelQueue] == "" {
		if time.Now().After(deadline) {
			b.Fatalf("Job %s/wide was not queued and admitted", ns)
		}
		time.Sleep(50 * time.Millisecond)
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(job), job)
	}
	for i := range 50 {
		if err := k8s.Create(ctx, claimingPod(ns, fmt.Sprintf("wide-%d", i), "one-gpu", job)); err != nil {
			b.Fatal(err)
		}
	}
	return job
}

// TestIntegrationNeverFitsWithDefaults checks the creation-time verdict
// on a Job that asks for nothing in a namespace whose LimitRange gives
// each container more CPU than its queue has: it is labelled
// inadmissible at once, with a warning.
func TestIntegrationNeverFitsWithDefaults(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "defaults-never"
	bindManaged(t, ns, "small") // 2 CPUs
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}
	if err := k8s.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, DefaultRequest: cpu, Default: cpu}}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j := newJob(ns, "probe", "1")
		j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		if err := k8s.Create(ctx, j, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return j.Labels[queues.LabelState] == string(queues.StateInadmissible), "a Job that gets 5 CPUs by default is labelled " + j.Labels[queues.LabelState]
	})
}

// patches says whether resp's JSON patch has an op at path.
func patches(t testing.TB, resp admission.Response, path string) bool {
	t.Helper()
	if len(resp.Patch) == 0 {
		return false
	}
	var ops []struct{ Path string }
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("the response's patch %q: %v", resp.Patch, err)
	}
	return slices.ContainsFunc(ops, func(op struct{ Path string }) bool { return op.Path == path })
}

// TestIntegrationPodPlacement: a pod that names an admitted Job as its
// controller runs only on the nodes of the flavor the Job was admitted
// in. One that names a node, or keeps to other nodes, is denied; one
// that keeps to them, as the Job's pod template does, passes.
func TestIntegrationPodPlacement(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podplace"
	bindManaged(t, ns, "podplace") // 2 CPUs on flavor on-demand (tier: on-demand)
	job := admittedJob(t, ns, "one", "500m", 1)

	named := newPod(ns, "named", "500m", job, "Job")
	named.Spec.NodeName = "node-elsewhere"
	if err := k8s.Create(ctx, named); err == nil || !strings.Contains(err.Error(), "spec.nodeName") {
		t.Errorf("a pod of Job one that names its node: %v; want a denial on spec.nodeName", err)
	}
	for name, sel := range map[string]map[string]string{"spot": {"tier": "spot"}, "anywhere": nil} {
		p := newPod(ns, name, "500m", job, "Job")
		p.Spec.Affinity, p.Spec.NodeSelector = nil, sel
		if err := k8s.Create(ctx, p); err == nil || !strings.Contains(err.Error(), "must run on the nodes of flavor on-demand") {
			t.Errorf("a pod of Job one with nodeSelector %v: %v; want a denial naming flavor on-demand", sel, err)
		}
	}
	kept := newPod(ns, "kept", "500m", job, "Job")
	kept.Spec.Affinity, kept.Spec.NodeSelector = nil, map[string]string{"tier": "on-demand"}
	if err := k8s.Create(ctx, kept); err != nil {
		t.Fatalf("a pod of Job one on its flavor's nodes by nodeSelector: %v", err)
	}
	if gated(kept) {
		t.Errorf("pod kept, the Job's only pod, on its flavor's nodes, is gated: %v", kept.Spec.SchedulingGates)
	}
}

// TestIntegrationPodReplacementWaits: a replacement made while the pod
// it replaces is being deleted (a finalizer stands in for a long grace
// period) waits behind the gate until that pod is gone, then runs.
func TestIntegrationPodReplacementWaits(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podreplace"
	bindManaged(t, ns, "podreplace") // 2 CPUs
	job := admittedJob(t, ns, "one", "500m", 1)
	const hold = "tally.dev/test-hold"
	first := newPod(ns, "one-a", "500m", job, "Job")
	first.Finalizers = []string{hold}
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if gated(first) {
		t.Fatalf("pod one-a, the Job's first, is gated: %v", first.Spec.SchedulingGates)
	}
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	replacement := newPod(ns, "one-b", "500m", job, "Job")
	if err := k8s.Create(ctx, replacement); err != nil {
		t.Fatal(err)
	}
	if !gated(replacement) {
		t.Fatalf("pod one-b runs beside one-a, which is being deleted but holds its CPU: the Job was admitted with one pod")
	}
	p := getPod(t, ns, "one-a")
	p.Finalizers = nil
	if err := k8s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return !gated(getPod(t, ns, "one-b")), "pod one-b still gated after one-a is gone"
	})
}

// TestIntegrationPodUncoveredResource: a pod of an admitted Job that
// asks for GPUs, which the Job's queue (cpu only) does not cover and
// another queue does, waits; the Job goes back to its queue at that
// size, where it can never fit, and says so.
func TestIntegrationPodUncoveredResource(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "poduncovered"
	bindManaged(t, ns, "poduncovered") // 2 CPUs; queue accel covers GPUs
	job := admittedJob(t, ns, "one", "500m", 1)
	greedy := newPod(ns, "one-gpus", "500m", job, "Job")
	greedy.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	if err := k8s.Create(ctx, greedy); err != nil {
		t.Fatal(err)
	}
	if !gated(greedy) {
		t.Fatalf("pod one-gpus, which asks for 8 GPUs that Job one was not admitted with, runs")
	}
	requeuedWithOverhead(t, ns, "one", "one-gpus", "nvidia.com/gpu=8", "Inadmissible", "does not cover")
}

// TestIntegrationMisplacedHeldPodDeleted: pods made while a Job waits
// are held as its own; once it is admitted, one that could run off the
// flavor it was admitted in is deleted, with a MisplacedPod Event, and
// the one beside it that keeps to the flavor runs.
func TestIntegrationMisplacedHeldPodDeleted(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "podmisplaced"
	bindManaged(t, ns, "podmisplaced") // 2 CPUs
	fill := admittedJob(t, ns, "fill", "2", 1)
	later := newJob(ns, "later", "500m")
	if err := k8s.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	early := newPod(ns, "early", "500m", later, "Job")
	early.Spec.Affinity, early.Spec.NodeSelector = nil, nil
	kept := newPod(ns, "kept", "500m", later, "Job")
	kept.Spec.Affinity, kept.Spec.NodeSelector = nil, map[string]string{"tier": "on-demand"}
	for _, p := range []*corev1.Pod{early, kept} {
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if !gated(p) {
			t.Fatalf("pod %s of Job later, which waits, is not gated", p.Name)
		}
	}
	if err := k8s.Delete(ctx, fill, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		gone := &corev1.Pod{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "early"}, gone)
		return apierrors.IsNotFound(err) && !gated(getPod(t, ns, "kept")),
			fmt.Sprintf("pod early: %v (gates %v); pod kept: gates %v", err, gone.Spec.SchedulingGates, getPod(t, ns, "kept").Spec.SchedulingGates)
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "later", "MisplacedPod", "Deleted pod early")
	})
}
