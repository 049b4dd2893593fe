package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// A TrainJob of Kubeflow Trainer v2, on its real controller (with JobSet's
// beside it: the Trainer runs a TrainJob as a JobSet), queued by tally in
// the 4-CPU queue of TestKindsQueued. Its pods come from the
// ClusterTrainingRuntime it names (torch, 1 CPU a node) with its own
// numNodes (3): the scenario of TestKindsQueued (suspended at creation,
// admitted all at once onto the CPU flavor's nodes, preempted by a
// higher-priority batch/v1 Job, admitted again, finished, its quota
// free), read from the pods that tally's admission labelled; the JobSet
// the Trainer makes for it is not queued. A TrainJob whose runtime is
// deleted while it waits is inadmissible, with an Event that names the
// runtime, and is admitted once the runtime is back.
func TestTrainJob(t *testing.T) {
	s := setup(t)
	build := testContext(t, 30*time.Minute)
	for _, name := range []string{framework.JobSetController, framework.TrainerController} {
		if err := s.env.BuildTool(build, name); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t, 12*time.Minute)
	const ns, queue = "e2e-trainjob", "e2e-kinds"
	for _, install := range []func(context.Context) error{s.cluster.InstallJobSetCRD, s.cluster.InstallTrainerCRDs} {
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

	runtime := func(name string, runtime time.Duration) *unstructured.Unstructured {
		t.Helper()
		rt := framework.OperatorJob{Name: name, Workers: 1, Runtime: runtime}.TorchRuntime()
		if err := s.client.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.client.Delete(context.Background(), rt); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", name, err)
			}
		})
		if err := framework.WaitTrainerSeesRuntime(ctx, s.client, name); err != nil {
			t.Fatal(err)
		}
		return rt
	}

	t.Run("queued, preempted, finished", func(t *testing.T) {
		defer func(before int) {
			t.Logf("trainjobs: %d PATCH requests on the TrainJob", apiPatches(ctx, t, s, "trainjobs")-before)
		}(apiPatches(ctx, t, s, "trainjobs"))
		runtime("e2e-torch", 20*time.Second)
		tj := framework.OperatorJob{Namespace: ns, Name: "tj", Workers: 3}.TrainJob("e2e-torch")
		queuedKind(ctx, t, s, tj, queue, "node=cpu-flavor", 3, func(u *unstructured.Unstructured) bool {
			return framework.ConditionStatus(u, "Complete") == "True"
		})
		// The JobSet the Trainer made for it is a part of it, not queued.
		set := &unstructured.Unstructured{}
		set.SetGroupVersionKind(framework.JobSetGVK)
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tj"}, set); err != nil {
			t.Fatalf("the TrainJob's JobSet: %v", err)
		}
		if l := set.GetLabels(); l[framework.LabelState] != "" || l[framework.LabelQueue] != "" {
			t.Errorf("JobSet tj, made by the Trainer, is queued on its own: labels %v", l)
		}
	})

	t.Run("runtime gone, then back", func(t *testing.T) {
		rt := runtime("e2e-late", 3*time.Second)
		// The queue is full, so the TrainJob waits.
		blocker := framework.NewJob(ns, "blocker").Request("cpu", "1").Parallelism(4).Runtime(10 * time.Minute).Obj()
		if err := s.client.Create(ctx, blocker); err != nil {
			t.Fatal(err)
		}
		if err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
			pods, err := workloadPods(ctx, s.client, ns, string(blocker.UID))
			return len(pods) == 4 && allRunning(pods), fmt.Sprintf("%d live pods of Job blocker", len(pods)), err
		}); err != nil {
			t.Fatal(err)
		}
		tj := framework.OperatorJob{Namespace: ns, Name: "tj-late", Workers: 2}.TrainJob("e2e-late")
		if err := s.client.Create(ctx, tj); err != nil {
			t.Fatal(err)
		}
		waitEvent := func(reason, want string) {
			t.Helper()
			if err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				es, err := framework.WorkloadEvents(ctx, s.client, ns, "TrainJob", reason)
				if err != nil {
					return false, "", err
				}
				var msgs []string
				for _, e := range es[tj.GetName()] {
					if strings.Contains(e.Message, want) {
						t.Logf("%s Event: %s", reason, e.Message)
						return true, "", nil
					}
					msgs = append(msgs, e.Message)
				}
				return false, fmt.Sprintf("%s Events %q, want one with %q", reason, msgs, want), nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		waitEvent("Pending", "Waiting for quota: needs cpu=2")
		if err := s.client.Delete(ctx, rt); err != nil {
			t.Fatal(err)
		}
		waitEvent("Inadmissible", `ClusterTrainingRuntime "e2e-late" not found`)
		// The Trainer's webhook refuses every write to a TrainJob whose
		// runtime does not exist, tally's state label among them: the
		// Event says it is inadmissible, the label follows once the
		// runtime is back.

		// Back, the runtime makes the TrainJob wait for quota again: a
		// second Pending Event (the reason changed twice).
		runtime("e2e-late", 3*time.Second)
		if err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
			es, err := framework.WorkloadEvents(ctx, s.client, ns, "TrainJob", "Pending")
			n := countEvents(es[tj.GetName()])
			return n >= 2, fmt.Sprintf("%d Pending Events", n), err
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.client.Delete(ctx, blocker, client.PropagationPolicy("Background")); err != nil {
			t.Fatal(err)
		}
		u := tj.DeepCopy()
		err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(tj), u); err != nil {
				return false, "", err
			}
			pods, err := workloadPods(ctx, s.client, ns, string(u.GetUID()))
			if err != nil {
				return false, "", err
			}
			done := framework.ConditionStatus(u, "Complete") == "True" && u.GetLabels()[framework.LabelState] == "finished" && len(pods) == 0
			return done, fmt.Sprintf("state %q, %d live pods, conditions %s", u.GetLabels()[framework.LabelState], len(pods), framework.Conditions(u)), nil
		})
		if err != nil {
			t.Fatalf("TrainJob tj-late after its runtime came back: %v", err)
		}
		if got := u.GetAnnotations()[framework.AnnotationFlavors]; got != "node=cpu-flavor" {
			t.Errorf("%s=%q, want node=cpu-flavor", framework.AnnotationFlavors, got)
		}
	})
	t.Logf("at most %d CPUs in the namespace's pods at once", peak())
}
