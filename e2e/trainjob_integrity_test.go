package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// trainJobQuota is the CPU quota of each TrainJob row's ClusterQueue
// (the CPU flavor only); the runtime's pods ask for 1 CPU each.
const trainJobQuota = 2

// trainJobRuntime is the ClusterTrainingRuntime of the TrainJob rows.
const trainJobRuntime = "e2e-int-torch"

// Quota integrity of TrainJobs (Kubeflow Trainer v2, on its real
// controller and JobSet's), tried by the ordinary user of
// TestIntegrityAttacks with the rights Kubeflow's own
// kubeflow-trainer-edit role gives on TrainJobs (the Kubernetes edit role
// gives none; neither lets a user write a TrainingRuntime). Each row's
// queue has 2 CPUs of the CPU flavor; the CPUs the namespace's live pods
// ask for must stay within it, and the pods of an admitted TrainJob must
// run on the CPU flavor's nodes.
func TestTrainJobIntegrity(t *testing.T) {
	s := setup(t)
	build := testContext(t, 30*time.Minute)
	for _, name := range []string{framework.JobSetController, framework.TrainerController} {
		if err := s.env.BuildTool(build, name); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t, 12*time.Minute)
	for _, install := range []func(context.Context) error{s.cluster.InstallJobSetCRD, s.cluster.InstallTrainerCRDs} {
		if err := install(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows := []attack{
		{name: "e2e-tj-nodes", run: attackTrainJobNodes},
		{name: "e2e-tj-move", run: attackTrainJobMove},
		{name: "e2e-tj-move-queued", run: attackTrainJobMoveQueued},
		{name: "e2e-tj-resume", run: attackTrainJobResume},
	}
	var names, docs []string
	for _, r := range rows {
		names = append(names, r.name)
		docs = append(docs, cpuQueue(r.name, trainJobQuota, ""))
	}
	useQueues(ctx, t, s, names, docs...)
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
		grantTrainJobs(ctx, t, s, r.name, integrityUser)
		limits[r.name] = trainJobQuota
	}

	dir := filepath.Dir(s.cluster.Kubeconfig)
	js, err := framework.NewJobSetController(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := framework.NewTrainerController(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Both fail closed; without their controllers they would refuse
		// every JobSet and TrainJob.
		if err := framework.RemoveJobSetWebhooks(context.Background(), s.client); err != nil {
			t.Errorf("removing JobSet's webhooks: %v", err)
		}
		if err := framework.RemoveTrainerWebhooks(context.Background(), s.client); err != nil {
			t.Errorf("removing the Trainer's webhooks: %v", err)
		}
	})
	startOperator(ctx, t, js, 2*time.Minute)
	startOperator(ctx, t, tr, 2*time.Minute)
	rt := framework.OperatorJob{Name: trainJobRuntime, Workers: 1, Runtime: 15 * time.Second}.TorchRuntime()
	if err := s.client.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.client.Delete(context.Background(), rt); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", rt.GetName(), err)
		}
	})
	if err := framework.WaitTrainerSeesRuntime(ctx, s.client, trainJobRuntime); err != nil {
		t.Fatal(err)
	}
	runAttacks(ctx, t, s, user, corev1.ResourceCPU, limits, rows)
}

// grantTrainJobs gives user in ns the rights on TrainJobs of Kubeflow's
// kubeflow-trainer-edit ClusterRole (it has no update).
func grantTrainJobs(ctx context.Context, t *testing.T, s *suite, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-trainer-edit"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{framework.KubeflowTrainJobGVK.Group}, Resources: []string{"trainjobs"},
		Verbs: []string{"create", "patch", "get", "list", "watch", "delete"}}}}
	for _, obj := range []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-trainer-edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
	} {
		if err := s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("granting %s TrainJobs in %s: %v", user, ns, err)
		}
	}
}

// userTrainJob creates, as the user, a TrainJob of nodes 1-CPU pods,
// with suspend: false.
func userTrainJob(ctx context.Context, t *testing.T, r *attackRun, name string, nodes int64) *unstructured.Unstructured {
	t.Helper()
	tj := framework.OperatorJob{Namespace: r.ns, Name: name, Workers: nodes}.TrainJob(trainJobRuntime)
	if err := userCreate(ctx, t, r, tj); err != nil {
		t.Fatalf("creating TrainJob %s: %v", name, err)
	}
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
		t.Fatal(err)
	}
	return tj
}

// trainJobPods waits until the pods of TrainJob tj that tally's admission
// labelled satisfy cond, and returns them.
func trainJobPods(ctx context.Context, t *testing.T, r *attackRun, tj *unstructured.Unstructured, what string, cond func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		var err error
		pods, err = workloadPods(ctx, r.s.client, r.ns, string(tj.GetUID()))
		return err == nil && cond(pods), fmt.Sprintf("%s: %d live pods of TrainJob %s", what, len(pods), tj.GetName()), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// onCPUNodes checks that each scheduled pod runs on a node of the CPU
// flavor (node-type=cpu).
func onCPUNodes(ctx context.Context, t *testing.T, r *attackRun, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		n := &corev1.Node{}
		if err := r.s.client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
			t.Fatal(err)
		}
		if n.Labels["node-type"] != "cpu" {
			t.Errorf("pod %s runs on node %s (labels %v), not on the CPU flavor's nodes", p.Name, n.Name, n.Labels)
		}
	}
}

// userPatch sends a JSON patch of tj as the user, and returns its error.
func userPatch(ctx context.Context, r *attackRun, tj *unstructured.Unstructured, ops ...map[string]any) error {
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return r.user.Patch(ctx, tj.DeepCopy(), client.RawPatch(types.JSONPatchType, raw))
}

// movePatch is a JSON patch that adds a runtime patch of the user's,
// after those tj has, that moves the trainer's pods (the Job node) to
// the GPU flavor's nodes: their label, and their taint tolerated.
func movePatch(tj *unstructured.Unstructured) map[string]any {
	entry := map[string]any{
		"manager": "example.com/mallory",
		"trainingRuntimeSpec": map[string]any{"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node", "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"nodeSelector": map[string]any{"kueue.x-k8s.io/default-flavor": "true"},
				"tolerations":  []any{map[string]any{"key": "kueue.x-k8s.io/gpu", "operator": "Exists"}},
			}}}}}}}}},
	}
	if _, has, _ := unstructured.NestedSlice(tj.Object, "spec", "runtimePatches"); has {
		return map[string]any{"op": "add", "path": "/spec/runtimePatches/-", "value": entry}
	}
	return map[string]any{"op": "add", "path": "/spec/runtimePatches", "value": []any{entry}}
}

// wantDenied fails t unless err is a denial (by tally, or by the Trainer
// or the API server, which guard some of the same fields).
func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want a denial", what)
		return
	}
	t.Logf("%s: %v", what, err)
}

// waitTrainJobDone waits until TrainJob tj is finished by tally's label,
// or gone.
func waitTrainJobDone(ctx context.Context, t *testing.T, r *attackRun, tj *unstructured.Unstructured) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(tj.GroupVersionKind())
		err := r.s.client.Get(ctx, client.ObjectKeyFromObject(tj), u)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return u.GetLabels()[framework.LabelState] == "finished", fmt.Sprintf("TrainJob %s: state %q, conditions %s", tj.GetName(), u.GetLabels()[framework.LabelState], framework.Conditions(u)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An admitted TrainJob of 2 nodes raised to 3 while it runs: refused
// (its spec.trainer is immutable, and tally denies the raise).
func attackTrainJobNodes(ctx context.Context, t *testing.T, r *attackRun) {
	tj := userTrainJob(ctx, t, r, "grow", 2)
	pods := trainJobPods(ctx, t, r, tj, "admitted", func(p []corev1.Pod) bool { return len(p) == 2 && allRunning(p) })
	wantDenied(t, "numNodes 2 → 3", userPatch(ctx, r, tj, map[string]any{"op": "replace", "path": "/spec/trainer/numNodes", "value": 3}))
	onCPUNodes(ctx, t, r, pods)
	waitTrainJobDone(ctx, t, r, tj)
}

// An admitted TrainJob's pods moved to the GPU flavor's nodes by a
// runtime patch of the user's, while it runs: denied.
func attackTrainJobMove(ctx context.Context, t *testing.T, r *attackRun) {
	tj := userTrainJob(ctx, t, r, "move", 1)
	trainJobPods(ctx, t, r, tj, "admitted", func(p []corev1.Pod) bool { return len(p) == 1 && allRunning(p) })
	if err := r.s.client.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
		t.Fatal(err)
	}
	wantDenied(t, "a runtime patch to the GPU nodes", userPatch(ctx, r, tj, movePatch(tj)))
	onCPUNodes(ctx, t, r, trainJobPods(ctx, t, r, tj, "after the patch", func([]corev1.Pod) bool { return true }))
	waitTrainJobDone(ctx, t, r, tj)
}

// A queued TrainJob (the queue is full) given a runtime patch of the
// user's that moves its pods to the GPU flavor's nodes, which the
// Trainer allows while it is suspended: tally denies it, and once
// admitted its pods run on the CPU flavor's nodes.
func attackTrainJobMoveQueued(ctx context.Context, t *testing.T, r *attackRun) {
	first := userTrainJob(ctx, t, r, "first", 2)
	trainJobPods(ctx, t, r, first, "admitted", func(p []corev1.Pod) bool { return len(p) == 2 && allRunning(p) })
	tj := userTrainJob(ctx, t, r, "queued", 1)
	if s, _, _ := unstructured.NestedBool(tj.Object, "spec", "suspend"); !s || tj.GetLabels()[framework.LabelState] != framework.StatePending {
		t.Fatalf("TrainJob queued as created: suspend=%v, labels %v; want suspended and pending", s, tj.GetLabels())
	}
	err := userPatch(ctx, r, tj, movePatch(tj))
	wantDenied(t, "a runtime patch to the GPU nodes while queued", err)
	if err != nil && !strings.Contains(err.Error(), "only tally may change the nodeSelector") {
		t.Errorf("the denial does not come from tally: %v", err)
	}
	pods := trainJobPods(ctx, t, r, tj, "admitted after the first", func(p []corev1.Pod) bool { return len(p) == 1 && allRunning(p) })
	onCPUNodes(ctx, t, r, pods)
	waitTrainJobDone(ctx, t, r, first)
	waitTrainJobDone(ctx, t, r, tj)
}

// A TrainJob created with suspend: false while the queue is full, and
// then resumed by the user: it is suspended at creation, the resume is
// denied, and it runs only once the first is done (the audit holds the
// namespace to its 2 CPUs).
func attackTrainJobResume(ctx context.Context, t *testing.T, r *attackRun) {
	first := userTrainJob(ctx, t, r, "first", 2)
	trainJobPods(ctx, t, r, first, "admitted", func(p []corev1.Pod) bool { return len(p) == 2 && allRunning(p) })
	tj := userTrainJob(ctx, t, r, "eager", 2)
	if s, _, _ := unstructured.NestedBool(tj.Object, "spec", "suspend"); !s {
		t.Errorf("TrainJob eager, created with suspend: false while the queue is full, is not suspended")
	}
	err := userPatch(ctx, r, tj, map[string]any{"op": "replace", "path": "/spec/suspend", "value": false})
	wantDenied(t, "resuming a queued TrainJob", err)
	if err != nil && !strings.Contains(err.Error(), "only tally may un-suspend a TrainJob") {
		t.Errorf("the denial does not come from tally: %v", err)
	}
	waitTrainJobDone(ctx, t, r, first)
	waitTrainJobDone(ctx, t, r, tj)
}
