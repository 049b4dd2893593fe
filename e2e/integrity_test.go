package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// integrityUser is the ordinary user of the attack table: edit in its
// namespace, and the same on PyTorchJobs and their scale, nothing else.
const integrityUser = "e2e-mallory"

// integrityGPUs is the quota of each attack's ClusterQueue.
const integrityGPUs = 2

// integrityQueue is a ClusterQueue of integrityGPUs GPUs and cpu CPUs
// that preempts lower priorities within itself.
func integrityQueue(name string, cpu int) string {
	return attackQueue(name, cpu, framework.ResourceGPU, integrityGPUs)
}

// attackQueue is a ClusterQueue of n of resource res (beside cpu CPUs,
// 16 if 0, and 64Gi) on the GPU nodes, that preempts lower priorities
// within itself.
func attackQueue(name string, cpu int, res corev1.ResourceName, n int) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: %s
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory, %s]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: %d}
      - {name: memory, nominalQuota: 64Gi}
      - {name: %s, nominalQuota: %d}
`, name, res, cmp.Or(cpu, 16), res, n)
}

// attack is one row of the table: a namespace of its own (of the row's
// name, bound to the ClusterQueue of the same name), where the user runs
// what the row does. Throughout, the GPUs that the namespace's live pods
// ask for must stay within its queue's quota; check, if set, asserts the
// row's own invariant at the end, from the pods as well.
type attack struct {
	name string
	// cpu is the CPU quota of its queue, 16 if 0.
	cpu   int
	run   func(ctx context.Context, t *testing.T, r *attackRun)
	check func(t *testing.T, r *attackRun)
	// tolerate is how long the row's pods may exceed its quota at a
	// time (PodAudit.Tolerate); none if 0.
	tolerate time.Duration
	// noGPUs: its queue covers cpu and memory only, and its namespace's
	// pods may hold no GPU.
	noGPUs bool
}

// attackRun is what a row works with: the admin's client, the user's,
// its namespace and the pod audit.
type attackRun struct {
	s     *suite
	user  client.WithWatch
	ns    string
	audit *framework.PodAudit
}

// Quota integrity, tried by an ordinary user: a RoleBinding to edit in a
// bound namespace (and the same rights on PyTorchJobs), acting through
// impersonation. Each row checks what the pods do, not what tally says.
func TestIntegrityAttacks(t *testing.T) {
	s := setup(t)
	// A cold build of KubeRay's operator, for the RayJob row, takes some
	// minutes.
	if err := s.env.BuildTool(testContext(t, 30*time.Minute), framework.RayOperator); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 15*time.Minute)
	rows := []attack{
		{name: "e2e-int-limits", run: attackLimitsOnly},
		{name: "e2e-int-label", run: attackOtherQueue},
		{name: "e2e-int-prio", run: attackPriority, check: func(t *testing.T, r *attackRun) {
			if n, ok := r.audit.PodsOf(r.ns, "low"), r.audit.SucceededOf(r.ns, "low"); n != 1 || ok != 1 {
				t.Errorf("Job low had %d pods, %d of them succeeded; want one that ran to its end: a Job with a hand-set priority preempted it", n, ok)
			}
		}},
		{name: "e2e-int-wpc", run: attackUnknownClass},
		{name: "e2e-int-owner", run: attackFalseOwner("an unserved kind", schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"})},
		{name: "e2e-int-owner2", run: attackFalseOwner("a served kind", framework.PyTorchJobGVK)},
		{name: "e2e-int-scale", run: attackScale},
		{name: "e2e-int-ghost", run: attackGhostPod},
		{name: "e2e-int-finished", run: attackFinishedOwner},
		{name: "e2e-int-defaults", run: attackLimitRange},
		{name: "e2e-int-pod", run: attackBarePods},
		{name: "e2e-int-deploy", run: attackDeployment},
		{name: "e2e-int-sidecar", run: attackSidecar, cpu: sidecarQuota},
		{name: "e2e-int-runtime", run: attackRuntimeClass, cpu: runtimeQuota},
		{name: "e2e-int-restart", run: attackGhostAfterRestart},
		{name: "e2e-int-ray", run: attackRayClamp, cpu: rayQuota},
		{name: "e2e-int-resize", run: attackResize, cpu: resizeQuota},
		{name: "e2e-int-forged", run: attackForgedState},
		{name: "e2e-int-release", run: attackReleasedPod},
		{name: "e2e-int-burst", run: attackPodBurst, tolerate: burstTolerance},
		{name: "e2e-int-replace", run: attackTerminatingPod},
		{name: "e2e-int-replace-pod", run: attackTerminatingDeploymentPod},
		{name: "e2e-int-place", run: attackPlacement, check: checkPlacement},
		{name: "e2e-int-uncovered", run: attackUncovered, noGPUs: true},
	}
	var names []string
	var docs []string
	for _, r := range rows {
		names = append(names, r.name)
		if r.noGPUs {
			docs = append(docs, cpuOnlyQueue(r.name))
			continue
		}
		docs = append(docs, integrityQueue(r.name, r.cpu))
	}
	// RayJob's CRD before the config that brings the queues: tally watches
	// a kind whose CRD came since its last config load from the next one.
	if err := s.cluster.InstallRayCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	useQueues(ctx, t, s, names, append(docs, priorityClassDocs)...)
	user, err := framework.NewUserClient(s.cluster.Kubeconfig, integrityUser)
	if err != nil {
		t.Fatal(err)
	}
	limits := map[string]int64{}
	for _, r := range rows {
		if err := framework.BindNamespace(ctx, s.client, r.name, r.name); err != nil {
			t.Fatalf("binding namespace %s: %v", r.name, err)
		}
		grantEdit(ctx, t, s, r.name, integrityUser)
		limits[r.name] = integrityGPUs
		if r.noGPUs {
			limits[r.name] = 0
		}
	}
	runAttacks(ctx, t, s, user, framework.ResourceGPU, limits, rows)
}

// runAttacks runs each row as a subtest, in its namespace (bound and
// granted to the user already), while an audit of the pods keeps the
// resource the namespaces' live pods ask for within limits.
func runAttacks(ctx context.Context, t *testing.T, s *suite, user client.WithWatch, res corev1.ResourceName, limits map[string]int64, rows []attack) {
	audit, err := framework.AuditPods(ctx, s.client, res, limits)
	if err != nil {
		t.Fatal(err)
	}
	runAudited(ctx, t, s, user, audit, limits, rows)
}

// runAudited is runAttacks with the audit given.
func runAudited(ctx context.Context, t *testing.T, s *suite, user client.WithWatch, audit *framework.PodAudit, limits map[string]int64, rows []attack) {
	res := audit.Resource()
	t.Cleanup(func() { audit.Stop() })
	for _, row := range rows {
		if row.tolerate > 0 {
			audit.Tolerate(row.name, row.tolerate)
		}
		t.Run(row.name, func(t *testing.T) {
			r := &attackRun{s: s, user: user, ns: row.name, audit: audit}
			// The pods are judged even when the row stops early.
			t.Cleanup(func() {
				rep := audit.Report()
				for _, v := range rep.Violations {
					if strings.Contains(v, "namespace "+row.name+" ") {
						t.Errorf("quota broken: %s", v)
					}
				}
				for _, b := range rep.Brief {
					if strings.Contains(b, "namespace "+row.name+" ") {
						t.Logf("over the quota within the %s tolerated: %s", row.tolerate, b)
					}
				}
				if rep.Gaps > 0 {
					t.Logf("the pod watch re-listed %d times; states in between were not checked", rep.Gaps)
				}
				t.Logf("at most %d %s in the pods of %s (quota %d)", rep.Max[row.name], res, row.name, limits[row.name])
				if row.tolerate == 0 && rep.Max[row.name] > limits[row.name] {
					// Violations holds the first few of all rows only.
					t.Errorf("quota broken: the pods of %s asked for %d %s at once, more than its quota of %d", row.name, rep.Max[row.name], res, limits[row.name])
				}
				if row.check != nil {
					row.check(t, r)
				}
			})
			row.run(ctx, t, r)
		})
	}
}

// grantEdit binds user to the ClusterRole edit in ns, and to the same
// rights on PyTorchJobs and their scale, which edit does not cover.
func grantEdit(ctx context.Context, t *testing.T, s *suite, ns, user string) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-kubeflow-edit"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"kubeflow.org"}, Resources: []string{"pytorchjobs", "pytorchjobs/scale"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	for _, obj := range []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-kubeflow-edit"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-edit"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}},
	} {
		if err := s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("granting %s edit in %s: %v", user, ns, err)
		}
	}
}

// userCreate creates obj as the user, retrying while the RoleBindings
// just made are not yet in force.
func userCreate(ctx context.Context, t *testing.T, r *attackRun, obj client.Object) error {
	t.Helper()
	var err error
	_ = framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		err = r.user.Create(ctx, obj.DeepCopyObject().(client.Object))
		return !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource"), fmt.Sprint(err), nil
	})
	return err
}

// waitJobsDone waits until every named Job of r's namespace has finished
// or is gone.
func waitJobsDone(ctx context.Context, t *testing.T, r *attackRun, timeout time.Duration, names ...string) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			j := &batchv1.Job{}
			err := r.s.client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: n}, j)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil || !framework.Finished(j) {
				return false, fmt.Sprintf("Job %s not finished (%v)", n, err), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitPodsRunning waits until n pods of r's namespace run.
func waitPodsRunning(ctx context.Context, t *testing.T, r *attackRun, n int) {
	t.Helper()
	waitNsPods(ctx, t, r, fmt.Sprintf("%d pods running", n), func(pods []corev1.Pod) bool {
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running >= n
	})
}

// filler is a Job of the user's that takes the whole quota for d.
func filler(t *testing.T, ctx context.Context, r *attackRun, d time.Duration) {
	t.Helper()
	j := framework.NewJob(r.ns, "filler").GPUs(integrityGPUs).Runtime(d).Obj()
	if err := userCreate(ctx, t, r, j); err != nil {
		t.Fatalf("creating the filler: %v", err)
	}
	waitPodsRunning(ctx, t, r, 1)
}

// limitsOnly is a Job whose pods ask for GPUs by limits alone.
func limitsOnly(ns, name string, gpus int, d time.Duration) *batchv1.Job {
	j := framework.NewJob(ns, name).GPUs(gpus).Runtime(d).Obj()
	delete(j.Spec.Template.Spec.Containers[0].Resources.Requests, framework.ResourceGPU)
	return j
}

// Two Jobs that ask for the whole quota each, by limits alone, as GPUs
// usually are: they run one after the other.
func attackLimitsOnly(ctx context.Context, t *testing.T, r *attackRun) {
	for _, name := range []string{"limits-a", "limits-b"} {
		if err := userCreate(ctx, t, r, limitsOnly(r.ns, name, integrityGPUs, 3*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, "limits-a", "limits-b")
}

// A Job labelled with another team's ClusterQueue, while the user's own
// is full: denied, listing the queues the namespace may use.
func attackOtherQueue(ctx context.Context, t *testing.T, r *attackRun) {
	filler(t, ctx, r, 8*time.Second)
	j := framework.NewJob(r.ns, "elsewhere").GPUs(integrityGPUs).Runtime(2*time.Second).
		Label(framework.LabelQueue, "e2e-quota").Obj()
	err := userCreate(ctx, t, r, j)
	want := fmt.Sprintf(`namespace %s may not use ClusterQueue "e2e-quota"; it may use: %s`, r.ns, r.ns)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating a Job in another team's queue: %v; want a denial containing %q", err, want)
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, "filler", "elsewhere")
}

// From a namespace tally does not manage, where the user may create Jobs
// too, Jobs that carry tally's state label and name the row's
// ClusterQueue, as if tally had queued them there (pending) or admitted
// them (admitted), and a gated bare pod labelled as a single-pod workload
// queued there: tally would admit the first and the pod into the queue
// and charge the second to it, and the team's own Job would wait. All
// are denied; the team's Job, which takes the whole quota, runs to its
// end.
func attackForgedState(ctx context.Context, t *testing.T, r *attackRun) {
	const forgedDenial = "tally: metadata.labels[tally.dev/state]: only tally sets this label"
	other := r.ns + "-elsewhere"
	if err := framework.CreateNamespace(ctx, r.s.client, other, ""); err != nil {
		t.Fatal(err)
	}
	grantEdit(ctx, t, r.s, other, integrityUser)
	for _, state := range []string{framework.StatePending, framework.StateAdmitted} {
		j := framework.NewJob(other, "forged-"+state).GPUs(integrityGPUs).Runtime(30*time.Second).
			Label(framework.LabelState, state).Label(framework.LabelQueue, r.ns).Obj()
		j.Spec.Suspend = ptr.To(state == framework.StatePending)
		err := userCreate(ctx, t, &attackRun{s: r.s, user: r.user, ns: other}, j)
		if err == nil || !strings.Contains(err.Error(), forgedDenial) {
			t.Errorf("creating a Job labelled %s in ClusterQueue %s from unbound namespace %s: %v; want a denial containing %q", state, r.ns, other, err, forgedDenial)
		}
	}
	pod := barePod(other, "forged-pod", integrityGPUs, 30*time.Second)
	pod.Labels = map[string]string{"tally.dev/workload": "pod", framework.LabelState: framework.StatePending, framework.LabelQueue: r.ns}
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "tally.dev/admission"}}
	if err := userCreate(ctx, t, &attackRun{s: r.s, user: r.user, ns: other}, pod); err == nil || !strings.Contains(err.Error(), forgedDenial) {
		t.Errorf("creating a gated pod labelled %v from unbound namespace %s: %v; want a denial containing %q", pod.Labels, other, err, forgedDenial)
	}
	own := framework.NewJob(r.ns, "own").GPUs(integrityGPUs).Runtime(2 * time.Second).Obj()
	if err := userCreate(ctx, t, r, own); err != nil {
		t.Fatal(err)
	}
	waitJobsDone(ctx, t, r, time.Minute, "own")
	if n, ok := r.audit.PodsOf(r.ns, "own"), r.audit.SucceededOf(r.ns, "own"); n != 1 || ok != 1 {
		t.Errorf("Job own had %d pods, %d of them succeeded; want one that ran to its end", n, ok)
	}
}

// A Job whose pod template sets a numeric priority above the running
// low-priority Job's: it is queued at priority 0 and preempts nothing.
// Its own pods are refused by the API server's priority admission, so it
// never runs; the row waits for the low Job to finish.
func attackPriority(ctx context.Context, t *testing.T, r *attackRun) {
	low := framework.NewJob(r.ns, "low").GPUs(integrityGPUs).Runtime(8*time.Second).Label(framework.LabelPriorityClass, "e2e-low").Obj()
	if err := userCreate(ctx, t, r, low); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(ctx, t, r, 1)
	forged := framework.NewJob(r.ns, "forged").GPUs(integrityGPUs).Runtime(2 * time.Second).Obj()
	forged.Spec.Template.Spec.Priority = ptr.To[int32](2000000000)
	if err := userCreate(ctx, t, r, forged); err != nil {
		t.Fatal(err)
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, "low")
	if err := r.s.client.Delete(ctx, forged, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Job forged: %v", err)
	}
}

// A Job that names a WorkloadPriorityClass that does not exist: denied,
// listing the known ones.
func attackUnknownClass(ctx context.Context, t *testing.T, r *attackRun) {
	j := framework.NewJob(r.ns, "unknown-class").GPUs(1).Runtime(time.Second).Label(framework.LabelKueuePriority, "e2e-urgent").Obj()
	err := userCreate(ctx, t, r, j)
	want := `WorkloadPriorityClass "e2e-urgent" not found; known: `
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "e2e-high") {
		t.Errorf("creating a Job of an unknown WorkloadPriorityClass: %v; want a denial containing %q and listing e2e-high", err, want)
	}
	waitJobsDone(ctx, t, r, time.Minute, "unknown-class")
}

// A Job that names, as its controller owner, a workload of a registered
// kind that does not exist (a name and UID made up), while the user's
// queue is full: it is queued as a Job of its own and waits. Of a served
// kind, the garbage collector may delete it first, which keeps quota too.
func attackFalseOwner(what string, gvk schema.GroupVersionKind) func(ctx context.Context, t *testing.T, r *attackRun) {
	return func(ctx context.Context, t *testing.T, r *attackRun) {
		_, err := r.s.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		served := err == nil
		if !served && !meta.IsNoMatchError(err) {
			t.Fatalf("looking up %s: %v", gvk, err)
		}
		t.Logf("%s: %s, served now: %v", what, gvk.Kind, served)
		filler(t, ctx, r, 8*time.Second)
		j := framework.NewJob(r.ns, "owned").GPUs(integrityGPUs).Runtime(2 * time.Second).Obj()
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: "made-up",
			UID: types.UID("00000000-0000-0000-0000-00000000beef"), Controller: ptr.To(true)}}
		if err := userCreate(ctx, t, r, j); err != nil {
			t.Fatal(err)
		}
		waitJobsDone(ctx, t, r, 2*time.Minute, "filler", "owned")
	}
}

// A running PyTorchJob (a master and a worker, a GPU each) that its user
// scales up through /scale and whose worker template they ask more GPUs
// of: both are denied, saying to delete and re-create it.
func attackScale(ctx context.Context, t *testing.T, r *attackRun) {
	pj := framework.NewPyTorchJob(r.ns, "train").Workers(1).GPUs(1).Runtime(10 * time.Second).Obj()
	if err := userCreate(ctx, t, r, pj); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(ctx, t, r, 2)
	err := r.user.SubResource("scale").Patch(ctx, pj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))
	want := "only tally may scale up an admitted PyTorchJob in a managed namespace"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("scaling up a running PyTorchJob: %v; want a denial containing %q", err, want)
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(framework.PyTorchJobGVK)
	if err := r.user.Get(ctx, client.ObjectKeyFromObject(pj), cur); err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(cur.Object, "spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatalf("PyTorchJob train has no worker containers: %v", cur.Object["spec"])
	}
	_ = unstructured.SetNestedField(containers[0].(map[string]any), "2", "resources", "limits", framework.ResourceGPU)
	_ = unstructured.SetNestedField(containers[0].(map[string]any), "2", "resources", "requests", framework.ResourceGPU)
	// A merge patch, with no resourceVersion to conflict with the
	// operator's status writes.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{"Worker": map[string]any{
		"template": map[string]any{"spec": map[string]any{"containers": containers}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.user.Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch))
	want = "only tally may raise the resources of a running PyTorchJob's pods"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("raising the GPUs of a running PyTorchJob's workers: %v; want a denial containing %q", err, want)
	}
	waitPyTorchJobs(ctx, t, r.s.client, r.ns, []string{"train"}, 2*time.Minute)
}

// A bare pod of the user's (a CPU only, so outside the quota) labelled
// tally.dev/workload with the UID of their finished Job, which took the
// whole quota: the Job's quota is free all the same, and the next Job
// that takes the whole quota runs while the pod lives.
func attackGhostPod(ctx context.Context, t *testing.T, r *attackRun) {
	first := framework.NewJob(r.ns, "first").GPUs(integrityGPUs).Runtime(time.Second).Obj()
	if err := userCreate(ctx, t, r, first); err != nil {
		t.Fatal(err)
	}
	waitJobsDone(ctx, t, r, time.Minute, "first")
	done := &batchv1.Job{}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(first), done); err != nil {
		t.Fatal(err)
	}
	ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "ghost",
		Labels: map[string]string{"tally.dev/workload": string(done.UID)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/e2e:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	if err := userCreate(ctx, t, r, ghost); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(ctx, t, r, 1)
	second := framework.NewJob(r.ns, "second").GPUs(integrityGPUs).Runtime(time.Second).Obj()
	if err := userCreate(ctx, t, r, second); err != nil {
		t.Fatal(err)
	}
	waitJobsDone(ctx, t, r, time.Minute, "second")
	if r.audit.PodsOf(r.ns, "second") == 0 {
		t.Errorf("Job second finished without a pod")
	}
	p := &corev1.Pod{}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(ghost), p); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the ghost pod did not run throughout: %v %s", err, p.Status.Phase)
	}
	if err := r.s.client.Delete(ctx, ghost); err != nil {
		t.Errorf("deleting the ghost pod: %v", err)
	}
}

// A pod of the user's dressed as a pod of their Job that has finished and
// been labelled so, which takes it out of tally's watch: the Job as its
// controller, the Job's pod labels, the whole quota and the GPU nodes. The
// gate holds it, as it holds a pod of any workload that is not admitted:
// it is never bound, and the Job the user queues next runs in the quota.
func attackFinishedOwner(ctx context.Context, t *testing.T, r *attackRun) {
	first := framework.NewJob(r.ns, "first").GPUs(integrityGPUs).Runtime(time.Second).Obj()
	if err := userCreate(ctx, t, r, first); err != nil {
		t.Fatal(err)
	}
	waitFinishedAndLabelled(ctx, t, r.s.client, r.ns, 1, time.Minute)
	done := &batchv1.Job{}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(first), done); err != nil {
		t.Fatal(err)
	}
	late := ownedPod(r.ns, "late", done)
	late.Labels = done.Spec.Template.Labels
	if err := userCreate(ctx, t, r, late); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.s.client.Delete(context.Background(), late) })
	waitNsPods(ctx, t, r, "pod late is held by the gate", func(pods []corev1.Pod) bool {
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == late.Name && podGated(&p) })
	})
	second := framework.NewJob(r.ns, "second").GPUs(integrityGPUs).Runtime(time.Second).Obj()
	if err := userCreate(ctx, t, r, second); err != nil {
		t.Fatal(err)
	}
	waitJobsDone(ctx, t, r, time.Minute, "second")
	if n := r.audit.SucceededOf(r.ns, "second"); n == 0 {
		t.Errorf("Job second finished with no pod that succeeded")
	}
	p := &corev1.Pod{}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(late), p); err != nil {
		t.Fatalf("pod late: %v", err)
	}
	if p.Spec.NodeName != "" || !podGated(p) {
		t.Errorf("pod late, naming finished Job first as its controller, was let through: node %q, phase %s, gated %v", p.Spec.NodeName, p.Status.Phase, podGated(p))
	}
}

// Two Jobs whose containers ask for nothing, in a namespace whose admin
// set a LimitRange that gives each container 2 GPUs by default: their pods
// ask for the whole quota each, and run one after the other.
func attackLimitRange(ctx context.Context, t *testing.T, r *attackRun) {
	gpus := corev1.ResourceList{framework.ResourceGPU: resource.MustParse(fmt.Sprint(integrityGPUs))}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "gpu-defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: gpus, DefaultRequest: gpus}}}}
	if err := r.s.client.Create(ctx, lr); err != nil {
		t.Fatalf("creating the LimitRange: %v", err)
	}
	t.Cleanup(func() { _ = r.s.client.Delete(context.Background(), lr) })
	for _, name := range []string{"bare-a", "bare-b"} {
		j := framework.NewJob(r.ns, name).Runtime(3 * time.Second).Obj()
		if err := userCreate(ctx, t, r, j); err != nil {
			t.Fatal(err)
		}
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, "bare-a", "bare-b")
	if r.audit.PodsOf(r.ns, "bare-a") == 0 || r.audit.PodsOf(r.ns, "bare-b") == 0 {
		t.Errorf("the Jobs finished without pods: bare-a %d, bare-b %d", r.audit.PodsOf(r.ns, "bare-a"), r.audit.PodsOf(r.ns, "bare-b"))
	}
}

// barePod is a pod of the user's own, with no owner, that asks for gpus
// GPUs by limits alone and runs for d (forever if 0). It tolerates the
// GPU nodes' taint, as a user who knows it would write.
func barePod(ns, name string, gpus int, d time.Duration) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "registry.example/e2e:v1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{framework.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}},
			Tolerations: []corev1.Toleration{{Key: "kueue.x-k8s.io/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	if d > 0 {
		p.Annotations = map[string]string{framework.AnnotationRuntime: d.String()}
	}
	return p
}

// podGated says whether tally's scheduling gate holds p.
func podGated(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == "tally.dev/admission" {
			return true
		}
	}
	return false
}

// podEvents lists the reasons of the Events on pod name of r's namespace.
func podEvents(ctx context.Context, r *attackRun, name string) (map[string]bool, error) {
	evs := &corev1.EventList{}
	if err := r.s.client.List(ctx, evs, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name {
			out[e.Reason] = true
		}
	}
	return out, nil
}

// Three bare pods that ask for a GPU each, by limits, in a queue of two:
// two run, the third waits behind tally's scheduling gate, with a Pending
// Event; once the user deletes one that runs, the third is admitted and
// runs, with an Admitted Event.
func attackBarePods(ctx context.Context, t *testing.T, r *attackRun) {
	names := []string{"bare-1", "bare-2", "bare-3"}
	for _, n := range names {
		if err := userCreate(ctx, t, r, barePod(r.ns, n, 1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	// waitPods waits until want pods run and the others wait gated, and
	// returns the names of those that run and of those that wait.
	waitPods := func(want int) (running, waiting []string) {
		err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			running, waiting = nil, nil
			for _, n := range names {
				p := &corev1.Pod{}
				err := r.s.client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: n}, p)
				switch {
				case apierrors.IsNotFound(err) || err == nil && p.DeletionTimestamp != nil:
				case err != nil:
					return false, err.Error(), nil
				case p.Status.Phase == corev1.PodRunning:
					running = append(running, n)
				case podGated(p) && p.Spec.NodeName == "":
					waiting = append(waiting, n)
				}
			}
			return len(running) == want && len(running)+len(waiting) == len(names),
				fmt.Sprintf("running %v, gated %v", running, waiting), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return running, waiting
	}
	running, waiting := waitPods(integrityGPUs)
	if len(waiting) != 1 {
		t.Fatalf("running %v, gated %v; want one gated", running, waiting)
	}
	reasons, err := podEvents(ctx, r, waiting[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reasons["Pending"] {
		t.Errorf("the gated pod %s has no Pending Event (it has %v)", waiting[0], reasons)
	}
	// The user may update their pods, but not take tally's gate off.
	p := &corev1.Pod{}
	if err := r.user.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: waiting[0]}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if err := r.user.Update(ctx, p); err == nil || !strings.Contains(err.Error(), "only tally removes it") {
		t.Errorf("the user taking the scheduling gate off pod %s: %v; want a denial", p.Name, err)
	}
	gone := running[0]
	if err := r.user.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: gone}}); err != nil {
		t.Fatalf("deleting pod %s as the user: %v", gone, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == gone })
	waitPods(integrityGPUs)
	if reasons, err = podEvents(ctx, r, waiting[0]); err != nil || !reasons["Admitted"] {
		t.Errorf("pod %s runs with no Admitted Event (it has %v, %v)", waiting[0], reasons, err)
	}
	for _, n := range names {
		if err := r.s.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: n}}); err != nil {
			t.Errorf("deleting pod %s: %v", n, err)
		}
	}
}

// A Deployment of three replicas of a GPU each, in a queue of two: two
// pods run, the third waits behind the scheduling gate, with a Pending
// Event that says why.
func attackDeployment(ctx context.Context, t *testing.T, r *attackRun) {
	labels := userDeployment(ctx, t, r, "web", 3, 1)
	var gated string
	err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := r.s.client.List(ctx, pods, client.InNamespace(r.ns), client.MatchingLabels(labels)); err != nil {
			return false, err.Error(), nil
		}
		running, waiting := 0, 0
		for _, p := range pods.Items {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Status.Phase == corev1.PodRunning:
				running++
			case podGated(&p) && p.Spec.NodeName == "":
				waiting++
				gated = p.Name
			}
		}
		if gated != "" {
			reasons, err := podEvents(ctx, r, gated)
			if err != nil || !reasons["Pending"] {
				return false, fmt.Sprintf("%d running, %d gated; %s has no Pending Event yet (%v)", running, waiting, gated, reasons), nil
			}
		}
		return running == integrityGPUs && waiting == 1, fmt.Sprintf("%d running, %d gated", running, waiting), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s waits behind the scheduling gate while two run", gated)
}

// sidecarQuota is the CPU quota of the sidecar row's queue.
const sidecarQuota = 4

// Two Jobs of two pods of 1 CPU each, in a queue of 4 CPUs, in a
// namespace where another mutating webhook (a service mesh's, say) adds
// to every pod a sidecar that asks 1 CPU more. Both are admitted at their
// templates' size; their pods, grown by the sidecar, wait behind the
// scheduling gate while tally requeues each Job with 1 CPU of pod
// overhead; then they run one after the other, at their real size, and
// finish. Read from the pods: never more than 4 CPUs in use.
func attackSidecar(ctx context.Context, t *testing.T, r *attackRun) {
	sidecar := corev1.Container{Name: "mesh-proxy", Image: "registry.example/proxy:v1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	inj, err := framework.InjectSidecar(ctx, r.s.client, r.ns, sidecar)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := inj.Stop(context.Background()); err != nil {
			t.Errorf("removing the sidecar injector: %v", err)
		}
	}()
	cpu, err := framework.AuditPods(ctx, r.s.client, corev1.ResourceCPU, map[string]int64{r.ns: sidecarQuota})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"meshed-a", "meshed-b"}
	for _, n := range names {
		j := framework.NewJob(r.ns, n).Request("cpu", "1").Parallelism(2).Runtime(3 * time.Second).Obj()
		if err := userCreate(ctx, t, r, j); err != nil {
			t.Fatal(err)
		}
	}
	waitJobsDone(ctx, t, r, 3*time.Minute, names...)
	rep := cpu.Stop()
	for _, v := range rep.Violations {
		t.Errorf("CPU quota broken: %s", v)
	}
	t.Logf("at most %d CPUs in the pods of %s (quota %d); the injector grew %d pods", rep.Max[r.ns], r.ns, sidecarQuota, inj.Injected())
	if inj.Injected() == 0 {
		t.Error("the injector grew no pod")
	}
	for _, n := range names {
		if ok := r.audit.SucceededOf(r.ns, n); ok < 2 {
			t.Errorf("Job %s finished with %d pods succeeded, want 2", n, ok)
		}
		j := &batchv1.Job{}
		if err := r.s.client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: n}, j); err != nil {
			t.Fatal(err)
		}
		if got := j.Annotations["tally.dev/pod-overhead"]; got != "cpu=1" {
			t.Errorf("Job %s records pod overhead %q, want cpu=1", n, got)
		}
	}
}

// runtimeQuota is the CPU quota of the RuntimeClass row's queue.
const runtimeQuota = 2

// Two Jobs of a CPU each whose pods name a RuntimeClass with a pod
// overhead of one CPU (the admin's): each pod asks for two, the whole
// quota, and the Jobs run one after the other. Read from the pods (the
// overhead counted, as the scheduler counts it): never more than 2 CPUs.
func attackRuntimeClass(ctx context.Context, t *testing.T, r *attackRun) {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-cpu-overhead"}, Handler: "runc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	if err := r.s.client.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the RuntimeClass: %v", err)
	}
	t.Cleanup(func() { _ = r.s.client.Delete(context.Background(), rc) })
	cpu, err := framework.AuditPods(ctx, r.s.client, corev1.ResourceCPU, map[string]int64{r.ns: runtimeQuota})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"overhead-a", "overhead-b"}
	for _, n := range names {
		j := framework.NewJob(r.ns, n).Request("cpu", "1").Runtime(3 * time.Second).Obj()
		j.Spec.Template.Spec.RuntimeClassName = ptr.To(rc.Name)
		if err := userCreate(ctx, t, r, j); err != nil {
			t.Fatal(err)
		}
	}
	waitJobsDone(ctx, t, r, 2*time.Minute, names...)
	rep := cpu.Stop()
	for _, v := range rep.Violations {
		t.Errorf("CPU quota broken: %s", v)
	}
	t.Logf("at most %d CPUs in the pods of %s, overhead included (quota %d)", rep.Max[r.ns], r.ns, runtimeQuota)
	for _, n := range names {
		if r.audit.SucceededOf(r.ns, n) == 0 {
			t.Errorf("Job %s finished with no pod that succeeded", n)
		}
	}
}

// A pod of the user's that claims, by label, a workload that does not
// exist, and, by the annotations tally's admission writes on its pods,
// a GPU in another team's ClusterQueue; then tally restarts. The pod is
// queued on its own in the user's queue, and after the restart the other
// team's Job that takes their whole quota runs.
func attackGhostAfterRestart(ctx context.Context, t *testing.T, r *attackRun) {
	const other = "e2e-int-label"
	ghost := barePod(r.ns, "ghost", 1, 0)
	ghost.Labels = map[string]string{"tally.dev/workload": "00000000-0000-0000-0000-00000000dead"}
	ghost.Annotations = map[string]string{"tally.dev/cluster-queue": other, "tally.dev/flavors": "main=nvidia-gpu-flavor"}
	if err := userCreate(ctx, t, r, ghost); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(ctx, t, r, 1)
	killTally(t, r.s)
	if err := r.s.tally.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.s.tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("tally not ready after the restart: %v", err)
	}
	j := framework.NewJob(other, "after-restart").GPUs(integrityGPUs).Runtime(time.Second).Obj()
	if err := r.s.client.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		cur := &batchv1.Job{}
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(j), cur); err != nil {
			return false, err.Error(), nil
		}
		return framework.Finished(cur), "the other team's Job has not finished", nil
	})
	if err != nil {
		t.Errorf("after the restart, the ghost pod holds the other team's quota: %v", err)
	}
	if err := r.s.client.Delete(ctx, ghost); err != nil {
		t.Errorf("deleting the ghost pod: %v", err)
	}
}

// rayQuota is the CPU quota of the RayJob row's queue.
const rayQuota = 4

// A RayJob (head, submitter and a worker group of a CPU each) whose group
// says replicas 1 but minReplicas 2, so KubeRay starts two workers, and a
// Job of a CPU beside it, in a queue of 4 CPUs: the RayJob is charged for
// the workers KubeRay starts (4 CPUs in all), and the Job waits until it
// ends. Read from the pods: never more than 4 CPUs in use.
func attackRayClamp(ctx context.Context, t *testing.T, r *attackRun) {
	o, err := framework.NewRayOperator(ctx, r.s.cluster, filepath.Dir(r.s.cluster.Kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	startOperator(ctx, t, o, 2*time.Minute)
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: integrityUser}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "e2e-ray-edit"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	for _, obj := range []client.Object{role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "e2e-ray-edit"}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}} {
		if err := r.s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cpu, err := framework.AuditPods(ctx, r.s.client, corev1.ResourceCPU, map[string]int64{r.ns: rayQuota})
	if err != nil {
		t.Fatal(err)
	}
	rj := framework.OperatorJob{Namespace: r.ns, Name: "clamp", Workers: 1, Runtime: 3 * time.Second}.RayJob()
	groups, _, _ := unstructured.NestedSlice(rj.Object, "spec", "rayClusterSpec", "workerGroupSpecs")
	groups[0].(map[string]any)["minReplicas"] = int64(2)
	groups[0].(map[string]any)["maxReplicas"] = int64(2)
	if err := unstructured.SetNestedSlice(rj.Object, groups, "spec", "rayClusterSpec", "workerGroupSpecs"); err != nil {
		t.Fatal(err)
	}
	if err := userCreate(ctx, t, r, rj); err != nil {
		t.Fatal(err)
	}
	// Deleted while its operator runs, which removes its finalizer.
	t.Cleanup(func() { _ = r.s.client.Delete(context.Background(), rj) })
	beside := framework.NewJob(r.ns, "beside").Request("cpu", "1").Runtime(20 * time.Second).Obj()
	if err := userCreate(ctx, t, r, beside); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll(ctx, 500*time.Millisecond, 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(framework.RayJobGVK)
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(rj), u); err != nil {
			return false, err.Error(), nil
		}
		j := &batchv1.Job{}
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(beside), j); err != nil {
			return false, err.Error(), nil
		}
		st := framework.RayJobDeploymentStatus(u)
		return (st == "Failed" || st == "Complete") && framework.Finished(j), fmt.Sprintf("RayJob %s, Job beside finished %v", st, framework.Finished(j)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := cpu.Stop()
	for _, v := range rep.Violations {
		t.Errorf("CPU quota broken: %s", v)
	}
	t.Logf("at most %d CPUs in the pods of %s (quota %d)", rep.Max[r.ns], r.ns, rayQuota)
	if n := r.audit.PodsOf(r.ns, "beside"); n == 0 {
		t.Error("Job beside finished without a pod")
	}
}

// resizeQuota is the CPU quota of the resize row's queue.
const resizeQuota = 2

// A bare pod of a CPU, admitted and running in a queue of 2 CPUs, that
// its user grows to 4 CPUs in place through pods/resize (granted to them
// here, as edit may not): denied, and the pod keeps asking for one.
func attackResize(ctx context.Context, t *testing.T, r *attackRun) {
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: integrityUser}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "e2e-resize"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods/resize"}, Verbs: []string{"get", "update", "patch"}}}}
	for _, obj := range []client.Object{role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "e2e-resize"}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}} {
		if err := r.s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cpu, err := framework.AuditPods(ctx, r.s.client, corev1.ResourceCPU, map[string]int64{r.ns: resizeQuota})
	if err != nil {
		t.Fatal(err)
	}
	one := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "grow"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/e2e:v1",
			Resources: corev1.ResourceRequirements{Requests: one, Limits: one}}}}}
	if err := userCreate(ctx, t, r, p); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(ctx, t, r, 1)
	var denial error
	err = framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		cur := &corev1.Pod{}
		if err := r.user.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return false, err.Error(), nil
		}
		four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		cur.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: four, Limits: four}
		denial = r.user.SubResource("resize").Update(ctx, cur)
		// A conflict with the kubelet's status writes is tried again.
		return !apierrors.IsConflict(denial), fmt.Sprint(denial), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if denial == nil || !strings.Contains(denial.Error(), "raising cpu from 1 to 4 is denied") {
		t.Errorf("growing a running pod through pods/resize: %v; want a denial", denial)
	}
	rep := cpu.Stop()
	for _, v := range rep.Violations {
		t.Errorf("CPU quota broken: %s", v)
	}
	if err := r.s.client.Delete(ctx, p); err != nil {
		t.Errorf("deleting pod grow: %v", err)
	}
}

// A pod of the user's that names their admitted Job as its controller
// while the Job has no pod yet (podlessJob) but lacks the Job's selector
// labels: the gate lets it run as the Job's pod, and the Job controller
// then releases it (takes its owner reference off). Once the
// ServiceAccount is there, the Job controller makes the Job's own pod.
// tally still counts the released pod for the Job while it runs, so the
// GPUs in the namespace's pods stay within the quota throughout: the
// Job's own pod waits behind the gate as the Job's, and runs once the
// released pod ends, so the Job finishes.
func attackReleasedPod(ctx context.Context, t *testing.T, r *attackRun) {
	j := podlessJob(ctx, t, r, "held")
	p := ownedPod(r.ns, "released", j)
	if err := userCreate(ctx, t, r, p); err != nil {
		t.Fatal(err)
	}
	waitNsPods(ctx, t, r, "pod released runs without an owner", func(pods []corev1.Pod) bool {
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool {
			return p.Name == "released" && p.Status.Phase == corev1.PodRunning && metav1.GetControllerOf(&p) == nil
		})
	})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: j.Spec.Template.Spec.ServiceAccountName}}
	if err := userCreate(ctx, t, r, sa); err != nil {
		t.Fatal(err)
	}
	waitNsPods(ctx, t, r, "the Job's own pod is made, and pod released ends", func(pods []corev1.Pod) bool {
		own := slices.ContainsFunc(pods, func(p corev1.Pod) bool { return metav1.IsControlledBy(&p, j) })
		ended := slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == "released" && p.Status.Phase == corev1.PodSucceeded })
		return own && ended
	})
	waitJobsDone(ctx, t, r, 2*time.Minute, j.Name)
	if err := r.s.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Job held: %v", err)
	}
}

// burstTolerance is how long row e2e-int-burst lets its namespace's pods
// exceed the quota: the ledger's 5 s grace before it deletes a pod
// beyond its workload's count, and time to see the pod and delete it.
const burstTolerance = 10 * time.Second

// Six pods of the user's admitted Job, each asking for the whole quota,
// created at once while the Job has no pod yet (podlessJob): the gate
// lets one run as the Job's pod and holds the others as the Job's. The
// gate judges each pod before it exists, so creates judged at the same
// moment can both pass; the ledger then deletes the newer ones, once they
// have stayed beyond the Job's count for 5 s. So the namespace's pods may
// exceed the quota for that long, never longer (burstTolerance), and one
// pod at most runs once they settle.
func attackPodBurst(ctx context.Context, t *testing.T, r *attackRun) {
	j := podlessJob(ctx, t, r, "burst")
	names := []string{"burst-1", "burst-2", "burst-3", "burst-4", "burst-5", "burst-6"}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = r.user.Create(ctx, ownedPod(r.ns, n, j)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("creating pod %s: %v", names[i], err)
		}
	}
	waitNsPods(ctx, t, r, "one pod runs, the others wait gated", func(pods []corev1.Pod) bool {
		running, gated := 0, 0
		for _, p := range pods {
			switch {
			case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			case podGated(&p):
				gated++
			case p.Spec.NodeName != "":
				running++
			}
		}
		return running <= 1 && running+gated >= len(names)-burstDeleted(pods, names)
	})
	if err := r.s.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Job burst: %v", err)
	}
	for _, n := range names {
		if err := r.s.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: n}}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod %s: %v", n, err)
		}
	}
}

// burstDeleted counts the named pods that are no longer among pods.
func burstDeleted(pods []corev1.Pod, names []string) int {
	gone := 0
	for _, n := range names {
		if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == n }) {
			gone++
		}
	}
	return gone
}

// podlessJob creates, as the user, a Job named name that asks for the
// whole quota and whose pods wait for a ServiceAccount that does not
// exist yet (named after the Job), and waits until tally admits it: an
// admitted Job that the Job controller cannot make pods for.
func podlessJob(ctx context.Context, t *testing.T, r *attackRun, name string) *batchv1.Job {
	t.Helper()
	j := framework.NewJob(r.ns, name).GPUs(integrityGPUs).Runtime(20 * time.Second).Obj()
	j.Spec.Template.Spec.ServiceAccountName = name + "-later"
	if err := userCreate(ctx, t, r, j); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
			return false, err.Error(), nil
		}
		return j.Labels[framework.LabelState] == framework.StateAdmitted, fmt.Sprintf("Job %s is %q", name, j.Labels[framework.LabelState]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// ownedPod is a pod of ns that names Job j as its controller, without
// j's selector labels, and asks for the whole quota for 20 s, on the
// nodes of the flavor j was admitted in, as j's own pods are.
func ownedPod(ns, name string, j *batchv1.Job) *corev1.Pod {
	p := barePod(ns, name, integrityGPUs, 20*time.Second)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}
	p.Spec.NodeSelector = map[string]string{gpuFlavorLabel: "true"}
	return p
}

// gpuFlavorLabel is the node label of the GPU training example's flavor
// nvidia-gpu-flavor, which the GPU nodes carry.
const gpuFlavorLabel = "kueue.x-k8s.io/default-flavor"

// cpuOnlyQueue is a ClusterQueue that covers cpu and memory, not GPUs
// (which other queues cover), on the GPU nodes' flavor.
func cpuOnlyQueue(name string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: %s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: memory, nominalQuota: 64Gi}
`, name)
}

// A running Job's pod that the user holds with a finalizer (kwok
// deletes pods at once: the finalizer stands in for a long grace period
// or a process that ignores SIGTERM) and then deletes. The Job
// controller replaces a pod as soon as it is being deleted (the default
// podReplacementPolicy, TerminatingOrFailed), but the pod being deleted
// still holds its GPUs: the replacement waits behind the scheduling gate
// until it is gone, then runs, and the Job finishes.
func attackTerminatingPod(ctx context.Context, t *testing.T, r *attackRun) {
	j := framework.NewJob(r.ns, "replaced").GPUs(integrityGPUs).Runtime(20 * time.Second).Obj()
	if err := userCreate(ctx, t, r, j); err != nil {
		t.Fatal(err)
	}
	release, _ := holdAndReplace(ctx, t, r)
	release()
	waitJobsDone(ctx, t, r, 2*time.Minute, j.Name)
}

// The same with a Deployment of one replica: its replacement is a
// single-pod workload of its own, which waits in the queue while the
// pod being deleted holds the quota, and runs once it is gone.
func attackTerminatingDeploymentPod(ctx context.Context, t *testing.T, r *attackRun) {
	userDeployment(ctx, t, r, "held", 1, integrityGPUs)
	release, replacement := holdAndReplace(ctx, t, r)
	// The ledger has judged it: it waits for quota.
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		reasons, err := podEvents(ctx, r, replacement)
		return err == nil && reasons["Pending"], fmt.Sprintf("pod %s: Events %v (%v)", replacement, reasons, err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := (&corev1.Pod{}); r.s.client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: replacement}, p) != nil || !podGated(p) || p.Spec.NodeName != "" {
		t.Errorf("replacement %s runs while the pod it replaces holds the quota (node %q, gates %v)", replacement, p.Spec.NodeName, p.Spec.SchedulingGates)
	}
	release()
	waitPodsRunning(ctx, t, r, 1)
}

// userDeployment creates, as the user, Deployment name of replicas pods
// that ask for gpus GPUs each, deleted (with its pods) when the test
// ends, and returns its pods' labels.
func userDeployment(ctx context.Context, t *testing.T, r *attackRun, name string, replicas int32, gpus int) map[string]string {
	t.Helper()
	labels := map[string]string{"app": name}
	tmpl := barePod(r.ns, "", gpus, 0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}}}
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if err := userCreate(ctx, t, r, d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.s.client.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			t.Errorf("deleting Deployment %s: %v", name, err)
		}
	})
	return labels
}

// holdAndReplace waits for the one pod of r's namespace to run, gives it
// a finalizer and deletes it, as the user; then waits for its controller
// to replace it and checks that the replacement is held behind the
// scheduling gate, unbound, while the pod being deleted still runs. It
// returns the function that takes the finalizer off (also called at the
// test's end), and the replacement's name.
func holdAndReplace(ctx context.Context, t *testing.T, r *attackRun) (func(), string) {
	t.Helper()
	const hold = "e2e.tally.dev/hold"
	var first corev1.Pod
	waitNsPods(ctx, t, r, "a pod runs", func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				first = p
				return true
			}
		}
		return false
	})
	patch := []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, hold))
	if err := r.user.Patch(ctx, &first, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("adding a finalizer to pod %s as the user: %v", first.Name, err)
	}
	release := func() {
		p := &corev1.Pod{}
		if err := r.s.client.Get(context.Background(), client.ObjectKeyFromObject(&first), p); err != nil {
			return
		}
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == hold })
		_ = r.s.client.Update(context.Background(), p)
	}
	t.Cleanup(release)
	if err := r.user.Delete(ctx, &first); err != nil {
		t.Fatalf("deleting pod %s as the user: %v", first.Name, err)
	}
	var replacement corev1.Pod
	waitNsPods(ctx, t, r, "a replacement beside the pod being deleted", func(pods []corev1.Pod) bool {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name != first.Name && p.DeletionTimestamp == nil })
		if i >= 0 {
			replacement = pods[i]
		}
		return i >= 0
	})
	if !podGated(&replacement) || replacement.Spec.NodeName != "" {
		t.Errorf("replacement %s is not held while pod %s, being deleted, holds the quota (node %q, gates %v)",
			replacement.Name, first.Name, replacement.Spec.NodeName, replacement.Spec.SchedulingGates)
	}
	return release, replacement.Name
}

// Pods that name the user's admitted Job as their controller and fit its
// pod set, but keep to other nodes than its flavor's: the CPU nodes of
// flavor cpu-flavor, where the Job's queue has no quota, by nodeSelector,
// and a CPU node by spec.nodeName, which skips the scheduler. Both are
// denied. So is a bare pod that names a GPU node: the gate queues it
// behind its scheduling gate, and the API server refuses a gated pod a
// node. checkPlacement reads from the pods that none ran off the flavor.
func attackPlacement(ctx context.Context, t *testing.T, r *attackRun) {
	j := podlessJob(ctx, t, r, "placed")
	offFlavor := barePod(r.ns, "off-flavor", 0, 30*time.Second)
	offFlavor.Spec.NodeSelector = map[string]string{"node-type": "cpu"}
	named := barePod(r.ns, "named", 0, 30*time.Second)
	named.Spec.NodeName = "cpu-node-1"
	for _, p := range []*corev1.Pod{offFlavor, named} {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}
		err := userCreate(ctx, t, r, p)
		if err == nil || !strings.Contains(err.Error(), "nvidia-gpu-flavor") {
			t.Errorf("creating pod %s (nodeSelector %v, nodeName %q) of admitted Job %s: %v; want a denial naming flavor nvidia-gpu-flavor",
				p.Name, p.Spec.NodeSelector, p.Spec.NodeName, j.Name, err)
		}
	}
	bound := barePod(r.ns, "bound", integrityGPUs, 30*time.Second)
	bound.Spec.NodeName = "gpu-node-1"
	if err := userCreate(ctx, t, r, bound); err == nil {
		t.Errorf("a bare pod that names node gpu-node-1 was created: it would skip the queue")
	}
	if err := r.s.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Job %s: %v", j.Name, err)
	}
}

// checkPlacement: every pod of the namespace that was bound is on a node
// of the flavor nvidia-gpu-flavor, the only one its queue has quota in.
func checkPlacement(t *testing.T, r *attackRun) {
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := r.s.client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		n := &corev1.Node{}
		if err := r.s.client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
			t.Errorf("reading node %s of pod %s: %v", p.Spec.NodeName, p.Name, err)
			continue
		}
		if n.Labels[gpuFlavorLabel] != "true" {
			t.Errorf("pod %s runs on node %s, outside flavor nvidia-gpu-flavor (labels %v)", p.Name, n.Name, n.Labels)
		}
	}
}

// In a queue that covers cpu and memory only, a pod that names the
// user's admitted Job (of CPU alone) as its controller, keeps to its
// flavor's nodes, and asks for a whole node's 8 GPUs, which another
// queue's quota counts: held behind the scheduling gate, as a bare pod
// asking for them would be; the Job goes back to its queue at that size,
// where it can never fit, and says so. The namespace's pods never hold a
// GPU.
func attackUncovered(ctx context.Context, t *testing.T, r *attackRun) {
	j := framework.NewJob(r.ns, "cpu-only").Runtime(20 * time.Second).Obj()
	j.Spec.Template.Spec.ServiceAccountName = "cpu-only-later"
	if err := userCreate(ctx, t, r, j); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
			return false, err.Error(), nil
		}
		return j.Labels[framework.LabelState] == framework.StateAdmitted, fmt.Sprintf("Job %s is %q", j.Name, j.Labels[framework.LabelState]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p := ownedPod(r.ns, "all-gpus", j)
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")},
	}
	if err := userCreate(ctx, t, r, p); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
			return false, err.Error(), nil
		}
		return framework.Suspended(j) && j.Labels[framework.LabelState] == framework.StateInadmissible,
			fmt.Sprintf("Job %s: suspended %v, state %q", j.Name, framework.Suspended(j), j.Labels[framework.LabelState]), nil
	})
	if err != nil {
		t.Error(err)
	}
	held := &corev1.Pod{}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(p), held); err != nil {
		t.Fatal(err)
	}
	if !podGated(held) || held.Spec.NodeName != "" {
		t.Errorf("pod %s, asking for 8 GPUs its Job was not admitted with, runs (node %q, gates %v)", p.Name, held.Spec.NodeName, held.Spec.SchedulingGates)
	}
	if err := r.s.client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Job %s: %v", j.Name, err)
	}
}

// waitNsPods waits until cond holds of the pods of r's namespace.
func waitNsPods(ctx context.Context, t *testing.T, r *attackRun, what string, cond func(pods []corev1.Pod) bool) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := r.s.client.List(ctx, pods, client.InNamespace(r.ns)); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, fmt.Sprintf("%s (%s, node %q, owners %d, gates %d)", p.Name, p.Status.Phase, p.Spec.NodeName, len(p.OwnerReferences), len(p.Spec.SchedulingGates)))
		}
		return cond(pods.Items), fmt.Sprintf("%s: pods %v", what, seen), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
