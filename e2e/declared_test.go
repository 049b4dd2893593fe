package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// declaredQueue is the ClusterQueue of TestDeclaredKind, loaded with the
// WorkloadKind: 4 GPUs.
const declaredQueue = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-declared
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
`

// A kind tally does not know, a TrainJob CRD with a small controller
// (framework.RunTrainJobs), is declared by a WorkloadKind in a config
// reload and queued with no restart of tally: the webhook's rules come to
// cover it, a TrainJob created un-suspended is suspended, admitted onto
// its flavor's nodes, and two 3-GPU TrainJobs in a 4-GPU queue run one
// after the other: the second has no pod until the first has finished.
func TestDeclaredKind(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-declared", "e2e-declared"
	if err := framework.InstallTrainJobCRD(ctx, s.client, tallyNamespace); err != nil {
		t.Fatal(err)
	}
	pid := s.tally.Pid()
	useQueues(ctx, t, s, []string{queue}, framework.TrainJobKind, declaredQueue)
	if err := framework.Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		ok, err := framework.WebhookCovers(ctx, s.client, framework.TrainJobGVK.Group, "trainjobs")
		return ok, "tally's mutating webhook has no rule for trainjobs", err
	}); err != nil {
		t.Fatal(err)
	}
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	ctrlErrs := framework.RunTrainJobs(ctx, s.client, ns, 100*time.Millisecond)

	var names []string
	for i := range 2 {
		tj := framework.NewTrainJob(ns, fmt.Sprintf("train-%d", i), 3, 1, 3*time.Second)
		if err := s.client.Create(ctx, tj); err != nil {
			t.Fatalf("creating a TrainJob: %v", err)
		}
		suspended, _, _ := unstructured.NestedBool(tj.Object, "spec", "suspend")
		if l := tj.GetLabels(); !suspended || l[framework.LabelState] != framework.StatePending || l[framework.LabelQueue] != queue {
			t.Errorf("TrainJob %s as created: suspend=%v labels=%v; want suspended, pending, in %s", tj.GetName(), suspended, l, queue)
		}
		names = append(names, tj.GetName())
	}

	// Poll until both have finished: never more than 4 GPUs in pods, and
	// the second waited with no pod while the first ran.
	maxGPUs, sawWaiting := int64(0), false
	err := framework.Poll(ctx, 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-ctrlErrs:
			if err != nil {
				return false, "", fmt.Errorf("the TrainJob controller: %w", err)
			}
		default:
		}
		gpus, finished, waiting := int64(0), 0, 0
		for _, name := range names {
			pods, err := framework.TrainJobPods(ctx, s.client, ns, name)
			if err != nil {
				return false, "", err
			}
			for _, p := range pods {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					gpus += framework.PodRequest(&p.Spec, framework.ResourceGPU)
				}
			}
			tj := &unstructured.Unstructured{}
			tj.SetGroupVersionKind(framework.TrainJobGVK)
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
				return false, "", err
			}
			switch {
			case framework.TrainJobFinished(tj):
				finished++
			case len(pods) == 0:
				waiting++
			}
		}
		maxGPUs = max(maxGPUs, gpus)
		sawWaiting = sawWaiting || (waiting == 1 && gpus == 3)
		return finished == len(names), fmt.Sprintf("%d of %d TrainJobs finished", finished, len(names)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if maxGPUs > 4 {
		t.Errorf("TrainJob pods held %d GPUs at once in a 4-GPU queue", maxGPUs)
	}
	if !sawWaiting {
		t.Error("never saw one TrainJob run while the other waited without pods")
	}
	for _, name := range names {
		tj := &unstructured.Unstructured{}
		tj.SetGroupVersionKind(framework.TrainJobGVK)
		if err := framework.Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
				return false, "", err
			}
			return tj.GetLabels()[framework.LabelState] == "finished", "state " + tj.GetLabels()[framework.LabelState], nil
		}); err != nil {
			t.Errorf("TrainJob %s: %v", name, err)
		}
		if got, want := tj.GetAnnotations()[framework.AnnotationFlavors], "worker=nvidia-gpu-flavor"; got != want {
			t.Errorf("TrainJob %s: %s=%q, want %q", name, framework.AnnotationFlavors, got, want)
		}
		// Events are recorded asynchronously, and QuotaReleased only once
		// the pods are gone.
		for _, reason := range []string{"Queued", "Admitted", "QuotaReleased"} {
			if err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
				es, err := framework.WorkloadEvents(ctx, s.client, ns, framework.TrainJobGVK.Kind, reason)
				return len(es[name]) > 0, "no " + reason + " Event", err
			}); err != nil {
				t.Errorf("TrainJob %s: %v", name, err)
			}
		}
	}
	if s.tally.Pid() != pid || !s.tally.Running() {
		t.Error("tally was restarted or stopped: the declared kind must be picked up without a restart")
	}
}
