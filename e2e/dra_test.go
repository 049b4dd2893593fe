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

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// kwok's nodes run no DRA driver. The suite stands in for one as a
// cluster admin would see it: it publishes ResourceSlices for a made-up
// driver, gpu.example.com, of draDevicesPerNode devices on each GPU node
// (and fpgaDevicesPerNode of another, fpga.example.com), and creates the
// DeviceClasses that select them. The kube-scheduler allocates the
// claims against those slices, as it would against a real driver's.
const (
	draDriver          = "gpu.example.com"
	fpgaDriver         = "fpga.example.com"
	draDevicesPerNode  = 8
	fpgaDevicesPerNode = 4
	// draClass is mapped to draResource; fpgaClass is mapped to
	// nothing; extClass backs draResource as an extended resource
	// (spec.extendedResourceName), for pods that request it.
	draClass    = "gpu.example.com"
	fpgaClass   = "fpga.example.com"
	extClass    = "ext-gpu.example.com"
	draResource = corev1.ResourceName("example.com/gpu")
	// nvidiaClass is the DeviceClass of NVIDIA's DRA driver, which
	// examples/dra names; here it selects the made-up driver's devices.
	nvidiaClass = "gpu.nvidia.com"
	// draQuota is each row's quota of draResource.
	draQuota = 2
)

// draConfig maps draClass to draResource.
const draConfig = `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
`

// publishDevices creates the DeviceClasses and the ResourceSlices of the
// GPU nodes, and removes them when the test ends.
func publishDevices(ctx context.Context, t *testing.T, s *suite) {
	t.Helper()
	class := func(name, driver string, extended *string) *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors:            []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}},
			ExtendedResourceName: extended}}
	}
	objs := []client.Object{class(draClass, draDriver, nil), class(fpgaClass, fpgaDriver, nil), class(extClass, draDriver, ptr.To(string(draResource))),
		class(nvidiaClass, draDriver, nil)}
	for _, node := range []string{"gpu-node-1", "gpu-node-2"} {
		for driver, n := range map[string]int{draDriver: draDevicesPerNode, fpgaDriver: fpgaDevicesPerNode} {
			slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + strings.ReplaceAll(driver, ".", "-")},
				Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
					Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
			for i := range n {
				slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", i)})
			}
			objs = append(objs, slice)
		}
	}
	for _, o := range objs {
		if err := s.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("publishing %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			if err := s.client.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Errorf("removing %T %s: %v", o, o.GetName(), err)
			}
		}
	})
}

// claimTemplate is a ResourceClaimTemplate of ns whose claims ask for
// count devices of DeviceClass class.
func claimTemplate(ns, name, class string, count int64) *resourcev1.ResourceClaimTemplate {
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	t.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "dev",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}}
	return t
}

// claiming gives spec's pods a claim: made from template, or, with
// direct, the ResourceClaim of that name.
func claiming(spec *corev1.PodSpec, name string, direct bool) {
	c := corev1.PodResourceClaim{Name: "dev", ResourceClaimTemplateName: ptr.To(name)}
	if direct {
		c = corev1.PodResourceClaim{Name: "dev", ResourceClaimName: ptr.To(name)}
	}
	spec.ResourceClaims = append(spec.ResourceClaims, c)
	spec.Containers[0].Resources.Claims = append(spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "dev"})
}

// claimingJob is a Job of pods pods at once, each claiming from template,
// that run for d.
func claimingJob(ns, name, template string, pods int32, d time.Duration) *batchv1.Job {
	j := framework.NewJob(ns, name).Parallelism(pods).Runtime(d).Obj()
	claiming(&j.Spec.Template.Spec, template, false)
	return j
}

// Quota integrity with devices from Dynamic Resource Allocation, tried by
// an ordinary user (edit in the row's namespace, which may create
// ResourceClaims and ResourceClaimTemplates). Throughout, the devices
// allocated to a namespace's live pods (read from their ResourceClaims'
// status.allocation), plus their requests of example.com/gpu, stay within
// its queue's quota of 2.
func TestDRAAttacks(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 10*time.Minute)
	publishDevices(ctx, t, s)
	rows := []attack{
		{name: "e2e-dra-job", run: draJobs, check: devicesUsed},
		{name: "e2e-dra-pod", run: draPods, check: devicesUsed},
		{name: "e2e-dra-template", run: draTemplateReplaced, check: devicesUsed},
		{name: "e2e-dra-unmapped", run: draUnmapped},
		{name: "e2e-dra-shared", run: draShared},
		{name: "e2e-dra-all", run: draAll},
		{name: "e2e-dra-first", run: draFirstAvailable, check: devicesUsed},
		{name: "e2e-dra-webhook", run: draInjected, check: devicesUsed},
		{name: "e2e-dra-extended", run: draExtended, check: devicesUsed},
	}
	var names []string
	docs := []string{draConfig}
	limits := map[string]int64{}
	for _, r := range rows {
		names = append(names, r.name)
		docs = append(docs, attackQueue(r.name, 0, draResource, draQuota))
		limits[r.name] = draQuota
	}
	useQueues(ctx, t, s, names, docs...)
	user, err := framework.NewUserClient(s.cluster.Kubeconfig, integrityUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := framework.BindNamespace(ctx, s.client, r.name, r.name); err != nil {
			t.Fatalf("binding namespace %s: %v", r.name, err)
		}
		grantEdit(ctx, t, s, r.name, integrityUser)
	}
	audit, err := framework.AuditPodsAndClaims(ctx, s.client, draResource, limits)
	if err != nil {
		t.Fatal(err)
	}
	runAudited(ctx, t, s, user, audit, limits, rows)
}

// devicesUsed checks that the row's pods did get devices: a row whose
// claims were never allocated would pass its audit for nothing.
func devicesUsed(t *testing.T, r *attackRun) {
	if got := r.audit.Report().Max[r.ns]; got == 0 {
		t.Errorf("no device was ever allocated to the pods of %s", r.ns)
	}
}

// userCreateAll creates objs as the user.
func userCreateAll(ctx context.Context, t *testing.T, r *attackRun, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := userCreate(ctx, t, r, o); err != nil {
			t.Fatalf("creating %T %s as the user: %v", o, o.GetName(), err)
		}
	}
}

// waitInadmissible waits until Job name of r's namespace has an
// Inadmissible Event that says says, and checks that it never ran.
func waitInadmissible(ctx context.Context, t *testing.T, r *attackRun, name, says string) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs := &corev1.EventList{}
		if err := r.s.client.List(ctx, evs, client.InNamespace(r.ns)); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == "Inadmissible" && strings.Contains(e.Message, says) {
				return true, "", nil
			}
			if e.InvolvedObject.Name == name {
				seen = append(seen, e.Reason+": "+e.Message)
			}
		}
		return false, fmt.Sprintf("Job %s has no Inadmissible Event saying %q; it has %q", name, says, seen), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.audit.PodsOf(r.ns, name); n != 0 {
		t.Errorf("Job %s made %d pods, want none: it must never run", name, n)
	}
}

// Two Jobs of two pods that claim a device each through a template, in a
// queue of 2: they run one after the other, and both finish.
func draJobs(ctx context.Context, t *testing.T, r *attackRun) {
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "one", draClass, 1),
		claimingJob(r.ns, "train-a", "one", 2, 3*time.Second), claimingJob(r.ns, "train-b", "one", 2, 3*time.Second))
	waitJobsDone(ctx, t, r, 2*time.Minute, "train-a", "train-b")
	checkAllocated(ctx, t, r)
}

// checkAllocated checks, from the cluster, that the ResourceClaims the
// pods of r's namespace used were allocated by the scheduler: some are
// left, or the pods' statuses name them.
func checkAllocated(ctx context.Context, t *testing.T, r *attackRun) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := r.s.client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, p := range pods.Items {
		named += len(p.Status.ResourceClaimStatuses)
	}
	if named == 0 {
		t.Errorf("no pod of %s has a ResourceClaim made from its template", r.ns)
	}
}

// claimingPod is a bare pod that claims a device from template and runs
// for d (0: until it is deleted).
func claimingPod(ns, name, template string, d time.Duration) *corev1.Pod {
	p := barePod(ns, name, 0, d)
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	claiming(&p.Spec, template, false)
	return p
}

// Three bare pods, then a Deployment of three replicas, each pod
// claiming a device through a template, in a queue of 2: two bare pods
// run and the third waits behind the scheduling gate until the user
// deletes one that runs; once the bare pods are gone, two of the
// Deployment's pods run and the third waits.
func draPods(ctx context.Context, t *testing.T, r *attackRun) {
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "one", draClass, 1))
	for i := range 3 {
		userCreateAll(ctx, t, r, claimingPod(r.ns, fmt.Sprintf("bare-%d", i), "one", 0))
	}
	// runGate waits until running pods of app (none: the bare pods) run
	// and gated ones wait, and returns the name of one that runs.
	runGate := func(app string, running, gated int) string {
		var one string
		waitNsPods(ctx, t, r, fmt.Sprintf("%d pods running and %d gated", running, gated), func(pods []corev1.Pod) bool {
			run, wait := 0, 0
			for _, p := range pods {
				switch {
				case p.Labels["app"] != app || p.DeletionTimestamp != nil:
				case p.Status.Phase == corev1.PodRunning:
					run++
					one = p.Name
				case podGated(&p) && p.Spec.NodeName == "":
					wait++
				}
			}
			return run == running && wait == gated
		})
		return one
	}
	gone := runGate("", 2, 1)
	if err := r.user.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: gone}}); err != nil {
		t.Fatalf("deleting pod %s as the user: %v", gone, err)
	}
	runGate("", 2, 0)
	checkAllocated(ctx, t, r)
	for i := range 3 {
		err := r.s.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: fmt.Sprintf("bare-%d", i)}})
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	waitNsPods(ctx, t, r, "the bare pods gone", func(pods []corev1.Pod) bool { return len(pods) == 0 })

	tmpl := claimingPod(r.ns, "", "one", 0)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	labels := map[string]string{"app": "serve"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "serve"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	userCreateAll(ctx, t, r, d)
	defer func() {
		if err := r.s.client.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Errorf("deleting Deployment serve: %v", err)
		}
	}()
	runGate("serve", 2, 1)
}

// A Job waits behind another that holds the quota; its template is
// deleted and made again asking for 3 devices: it can no longer be
// admitted, and never runs. The template of a Job that runs cannot be
// deleted: its next pods' claims, made from it, would get more than the
// Job was charged for.
func draTemplateReplaced(ctx context.Context, t *testing.T, r *attackRun) {
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "hold", draClass, 2), claimingJob(r.ns, "holder", "hold", 1, 8*time.Second))
	waitPodsRunning(ctx, t, r, 1)
	err := r.user.Delete(ctx, claimTemplate(r.ns, "hold", draClass, 2))
	if want := "is in use by"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("deleting the template of running Job holder as the user: %v; want a denial saying %q", err, want)
	}
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "grow", draClass, 1), claimingJob(r.ns, "waiter", "grow", 1, time.Second))
	replaceTemplate(ctx, t, r, claimTemplate(r.ns, "grow", draClass, 3))
	waitInadmissible(ctx, t, r, "waiter", "example.com/gpu")
	waitJobsDone(ctx, t, r, time.Minute, "holder")
}

// replaceTemplate deletes the ResourceClaimTemplate of t's name, as the
// user, and creates t in its place.
func replaceTemplate(ctx context.Context, t *testing.T, r *attackRun, tpl *resourcev1.ResourceClaimTemplate) {
	t.Helper()
	if err := r.user.Delete(ctx, tpl.DeepCopy()); err != nil {
		t.Fatalf("deleting ResourceClaimTemplate %s as the user: %v", tpl.Name, err)
	}
	err := framework.Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err := r.user.Create(ctx, tpl.DeepCopy())
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A Job whose claim asks for 3 devices of a class no mapping names is
// inadmissible, with an Event that names the class.
func draUnmapped(ctx context.Context, t *testing.T, r *attackRun) {
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "fpgas", fpgaClass, 3), claimingJob(r.ns, "fpga", "fpgas", 1, time.Second))
	waitInadmissible(ctx, t, r, "fpga", `DeviceClass "fpga.example.com" is not mapped to a resource`)
}

// A ResourceClaim of 2 devices the user made, named directly by two
// Jobs, beside a Job that claims the whole quota through a template: the
// two are inadmissible, the third runs.
func draShared(ctx context.Context, t *testing.T, r *attackRun) {
	shared := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "shared"}}
	shared.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draClass, Count: 2}}}
	userCreateAll(ctx, t, r, shared, claimTemplate(r.ns, "two", draClass, 2), claimingJob(r.ns, "quota", "two", 1, 5*time.Second))
	for _, name := range []string{"share-a", "share-b"} {
		j := framework.NewJob(r.ns, name).Runtime(5 * time.Second).Obj()
		claiming(&j.Spec.Template.Spec, "shared", true)
		userCreateAll(ctx, t, r, j)
	}
	waitInadmissible(ctx, t, r, "share-a", `name ResourceClaim "shared" directly`)
	waitInadmissible(ctx, t, r, "share-b", `name ResourceClaim "shared" directly`)
	waitJobsDone(ctx, t, r, time.Minute, "quota")
}

// A Job whose claim asks for every device of the class (allocationMode
// All) is inadmissible.
func draAll(ctx context.Context, t *testing.T, r *attackRun) {
	all := claimTemplate(r.ns, "all", draClass, 0)
	all.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	userCreateAll(ctx, t, r, all, claimingJob(r.ns, "greedy", "all", 1, time.Second))
	waitInadmissible(ctx, t, r, "greedy", "allocationMode: All asks for every matching device")
}

// Two Jobs of one pod whose claim asks first for 2 devices, else for 1
// (firstAvailable): each is charged 2, the most it may get, and they run
// one after the other.
func draFirstAvailable(ctx context.Context, t *testing.T, r *attackRun) {
	first := claimTemplate(r.ns, "first", draClass, 0)
	first.Spec.Spec.Devices.Requests[0] = resourcev1.DeviceRequest{Name: "dev", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "two", DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
		{Name: "one", DeviceClassName: draClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
	}}
	userCreateAll(ctx, t, r, first, claimingJob(r.ns, "first-a", "first", 1, 3*time.Second), claimingJob(r.ns, "first-b", "first", 1, 3*time.Second))
	waitJobsDone(ctx, t, r, 2*time.Minute, "first-a", "first-b")
}

// Another mutating webhook adds to every pod of the namespace a sidecar
// with a claim of one device. Two Jobs of one pod that claim a device
// each, in a queue of 2, are admitted at their templates' size; their
// pods, which claim 2 devices, wait behind the scheduling gate while
// tally requeues each Job at that size; they run one after the other.
func draInjected(ctx context.Context, t *testing.T, r *attackRun) {
	userCreateAll(ctx, t, r, claimTemplate(r.ns, "one", draClass, 1))
	sidecar := corev1.Container{Name: "monitor", Image: "registry.example/monitor:v1", Resources: corev1.ResourceRequirements{
		Claims: []corev1.ResourceClaim{{Name: "monitor"}}}}
	inj, err := framework.InjectSidecar(ctx, r.s.client, r.ns, sidecar,
		corev1.PodResourceClaim{Name: "monitor", ResourceClaimTemplateName: ptr.To("one")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := inj.Stop(context.Background()); err != nil {
			t.Errorf("removing the injector: %v", err)
		}
	}()
	userCreateAll(ctx, t, r, claimingJob(r.ns, "inj-a", "one", 1, 3*time.Second), claimingJob(r.ns, "inj-b", "one", 1, 3*time.Second))
	waitJobsDone(ctx, t, r, 2*time.Minute, "inj-a", "inj-b")
	if inj.Injected() == 0 {
		t.Error("the injector changed no pod")
	}
}

// Two Jobs of two pods that request example.com/gpu, which a DeviceClass
// backs (spec.extendedResourceName): the scheduler makes each pod a claim
// of one device. Each Job is charged its requests, once: the claims the
// scheduler made are not charged again, so each fits the queue of 2, and
// they run one after the other.
func draExtended(ctx context.Context, t *testing.T, r *attackRun) {
	for _, name := range []string{"ext-a", "ext-b"} {
		j := framework.NewJob(r.ns, name).Parallelism(2).Runtime(3*time.Second).Request(string(draResource), "1").Obj()
		c := &j.Spec.Template.Spec.Containers[0]
		c.Resources.Limits = corev1.ResourceList{draResource: c.Resources.Requests[draResource]}
		userCreateAll(ctx, t, r, j)
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, "ext-a", "ext-b")
	pods := &corev1.PodList{}
	if err := r.s.client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, p := range pods.Items {
		if p.Status.ExtendedResourceClaimStatus != nil {
			made++
		}
	}
	if made == 0 {
		t.Error("no pod got a claim the scheduler made for its extended resource: the DeviceClass did not back it")
	}
}

// The GPU example through DRA (examples/dra, run as its README says): a
// PyTorchJob whose master and three workers each claim a GPU from a
// template, in a queue of 4, is admitted whole; a research-high one of a
// master and a worker preempts it, runs and finishes; then it runs again
// and finishes. Read from the pods' ResourceClaims: never more than 4
// devices at once, and 4 at some point.
func TestPyTorchJobDRA(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	publishDevices(ctx, t, s)
	const ns, queue, localQueue, limit = "team-dra", "dra-queue", "training", 4
	dir := filepath.Join(s.env.Root, "examples", "dra")
	docs, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	useQueues(ctx, t, s, []string{queue}, string(docs))
	bindByLocalQueue(ctx, t, s, ns, localQueue)
	applyExamplePriorityClasses(ctx, t, s)
	rec := recordPyTorchJobs(ctx, t, s, ns)
	audit, err := framework.AuditPodsAndClaims(ctx, s.client, draResource, map[string]int64{ns: limit})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resource-claim-template.yaml", "pytorch-job.yaml"} {
		obj, err := framework.ReadObject(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetKind() == framework.PyTorchJobGVK.Kind {
			// On kwok, its pods run for 10s.
			for _, role := range []string{"Master", "Worker"} {
				if err := unstructured.SetNestedField(obj.Object, "10s", "spec", "pytorchReplicaSpecs", role, "template", "metadata", "annotations", framework.AnnotationRuntime); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", f, err)
		}
	}
	const low = "pytorch-dra-mnist"
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		n, err := runningPods(ctx, s.client, ns, low)
		return n == 4, fmt.Sprintf("%d pods of %s running (%v)", n, low, err), nil
	})
	if err != nil {
		t.Fatalf("the example's PyTorchJob did not start whole: %v", err)
	}
	high := framework.NewPyTorchJob(ns, "high").Workers(1).Runtime(3*time.Second).PriorityClass("research-high").
		ClaimFrom("one-gpu").Label(framework.LabelKueueQueueName, localQueue).Obj()
	if err := s.client.Create(ctx, high); err != nil {
		t.Fatal(err)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, []string{"high"}, 2*time.Minute)
	preempted, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Preempted")
	if err != nil {
		t.Fatal(err)
	}
	if len(preempted[low]) == 0 {
		t.Errorf("no Preempted Event on %s (Events on %v)", low, slices.Sorted(maps.Keys(preempted)))
	}
	waitPyTorchJobs(ctx, t, s.client, ns, []string{low}, 2*time.Minute)
	if h := rec.History(low); h == nil || h.Unsuspends != 2 {
		t.Errorf("%s: history %+v, want admitted twice (before and after its preemption)", low, h)
	}
	rep := audit.Stop()
	for _, v := range rep.Violations {
		t.Errorf("quota broken: %s", v)
	}
	if rep.Max[ns] != limit {
		t.Errorf("at most %d devices allocated to the pods of %s at once, want %d: the example's 4 pods together", rep.Max[ns], ns, limit)
	}
}
