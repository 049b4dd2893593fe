package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// The GPU training example's Kueue manifests, loaded unchanged (see
// exampleFiles), bind namespace team-a through the LocalQueue
// team-a-queue alone, with no annotation: Jobs labelled
// kueue.x-k8s.io/queue-name are queued in cluster-queue-a (10 GPUs) and
// never run past it, an unknown queue-name is denied with the namespace's
// LocalQueues, and a Job that names no queue is created unqueued with a
// warning.
func TestGPUTrainingLocalQueue(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 4*time.Minute)
	const ns, queue, localQueue, limit = "team-a", "cluster-queue-a", "team-a-queue", 10
	c, warnings, err := framework.NewClientWithWarnings(s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	viaLQ := map[string]string{framework.LabelKueueQueueName: localQueue}
	if err := framework.CreateNamespace(ctx, c, ns, ""); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitManaged(ctx, c, ns, viaLQ); err != nil {
		t.Fatalf("namespace %s, named only by a LocalQueue, is not managed: %v", ns, err)
	}

	t.Run("an unknown queue-name is denied with the namespace's LocalQueues", func(t *testing.T) {
		j := framework.NewJob(ns, "typo").GPUs(1).Label(framework.LabelKueueQueueName, "team-a-queu").Obj()
		err := c.Create(ctx, j)
		want := `LocalQueue "team-a-queu" does not exist in namespace team-a; its LocalQueues: team-a-queue`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("create: %v; want a denial containing %q", err, want)
		}
	})

	// Three 4-GPU Jobs in the 10-GPU queue: two run at once, one waits.
	var jobs []*batchv1.Job
	for i := range 3 {
		jobs = append(jobs, framework.NewJob(ns, fmt.Sprintf("train-%d", i)).GPUs(4).Runtime(3*time.Second).
			Label(framework.LabelKueueQueueName, localQueue).Obj())
	}
	if err := framework.CreateJobs(ctx, c, jobs...); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if !framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StatePending || j.Labels[framework.LabelQueue] != queue {
			t.Errorf("Job %s as created: want suspended, pending, in %s; got suspend=%v labels=%v", j.Name, queue, ptrString(j.Spec.Suspend), j.Labels)
		}
	}
	rep := framework.WatchQuota(ctx, c, ns, limit, len(jobs), 100*time.Millisecond, 2*time.Minute)
	t.Logf("%d polls; at most %d GPUs running at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("quota exceeded: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("the LocalQueue's Jobs did not all finish: %v", rep.Err)
	}
	if !rep.SawWaiting {
		t.Errorf("no poll saw a Job waiting while others ran: cluster-queue-a held nothing back")
	}
	waitFinishedAndLabelled(ctx, t, c, ns, len(jobs), 30*time.Second)
	for _, j := range jobs {
		nodes, err := podNodes(ctx, c, j)
		if err != nil {
			t.Fatal(err)
		}
		for pod, node := range nodes {
			if node.Labels["kueue.x-k8s.io/default-flavor"] != "true" {
				t.Errorf("pod %s ran on node %s, not a node of the GPU training example's flavor nvidia-gpu-flavor", pod, node.Name)
			}
		}
	}

	t.Run("a Job larger than the queue never runs", func(t *testing.T) {
		big := framework.NewJob(ns, "fifty-gpus").GPUs(50).Runtime(time.Second).Label(framework.LabelKueueQueueName, localQueue).Obj()
		if err := framework.CreateJobs(ctx, c, big); err != nil {
			t.Fatal(err)
		}
		if !framework.Suspended(big) || big.Labels[framework.LabelState] != framework.StateInadmissible {
			t.Fatalf("as created: suspend=%v labels=%v, want suspended and inadmissible", ptrString(big.Spec.Suspend), big.Labels)
		}
		if w := strings.Join(warnings.Take(), "\n"); !strings.Contains(w, "Can never fit: requests nvidia.com/gpu=50, ClusterQueue cluster-queue-a allows at most 10") {
			t.Errorf("warnings %q do not say why the Job can never fit", w)
		}
		// A Job submitted after it is admitted and finishes, so the
		// ledger has decided on the big one by then.
		after := framework.NewJob(ns, "after-big").GPUs(1).Runtime(time.Second).Label(framework.LabelKueueQueueName, localQueue).Obj()
		if err := framework.CreateJobs(ctx, c, after); err != nil {
			t.Fatal(err)
		}
		waitFinishedAndLabelled(ctx, t, c, ns, len(jobs)+1, time.Minute)
		if err := c.Get(ctx, client.ObjectKeyFromObject(big), big); err != nil {
			t.Fatal(err)
		}
		pods, err := framework.JobPods(ctx, c, big)
		if err != nil {
			t.Fatal(err)
		}
		if !framework.Suspended(big) || len(pods) > 0 || big.Labels[framework.LabelState] != framework.StateInadmissible {
			t.Errorf("the 50-GPU Job: suspend=%v, %d pods, state %q; want suspended, no pods, inadmissible",
				ptrString(big.Spec.Suspend), len(pods), big.Labels[framework.LabelState])
		}
		// Its owner cannot start it by hand, nor move it to another queue.
		big.Spec.Suspend = ptr.To(false)
		if err := c.Update(ctx, big); err == nil || !strings.Contains(err.Error(), "only tally may un-suspend a Job") {
			t.Errorf("un-suspending it by hand: %v; want a denial", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(big), big); err != nil {
			t.Fatal(err)
		}
		big.Labels[framework.LabelKueueQueueName] = "elsewhere"
		if err := c.Update(ctx, big); err == nil || !strings.Contains(err.Error(), "metadata.labels[kueue.x-k8s.io/queue-name]: only tally may change this label") {
			t.Errorf("changing its queue-name: %v; want a denial", err)
		}
	})

	t.Run("a Job that names no queue runs unqueued, with a warning", func(t *testing.T) {
		warnings.Take()
		j := framework.NewJob(ns, "no-queue").Request("cpu", "1").Runtime(time.Second).Obj()
		if err := framework.CreateJobs(ctx, c, j); err != nil {
			t.Fatal(err)
		}
		want := "this Job is not queued and runs outside any quota: it has no kueue.x-k8s.io/queue-name label, and namespace team-a has no tally.dev/cluster-queue annotation and no LocalQueue named default (its LocalQueues: team-a-queue)"
		if w := strings.Join(warnings.Take(), "\n"); !strings.Contains(w, want) {
			t.Errorf("warnings %q, want one containing %q", w, want)
		}
		checkUntouched(t, "as created", j)
		err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(j), j); err != nil {
				return false, err.Error(), nil
			}
			return framework.Completed(j), "conditions: " + conditions(j), nil
		})
		if err != nil {
			t.Fatalf("the unqueued Job did not complete: %v", err)
		}
		// The ledger does not capture it late either.
		checkUntouched(t, "once complete", j)
	})
}
