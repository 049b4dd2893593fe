package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// podsReadyDocs turn on Kueue's waitForPodsReady (a Configuration document
// pasted from Kueue) with a short timeout and backoff, and add two queues:
// one whose flavor no node has, one on the CPU nodes.
const podsReadyDocs = `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  enable: true
  timeout: 10s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 3
    backoffLimitCount: 1
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: e2e-nowhere
spec:
  nodeLabels:
    tally.dev/e2e-nowhere: "true"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-podsready
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: e2e-nowhere
      resources:
      - name: cpu
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-podsready-gang
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "nvidia.com/gpu", "example.com/widget"]
    flavors:
    - name: cpu-flavor
      resources:
      - name: cpu
        nominalQuota: 4
      - name: nvidia.com/gpu
        nominalQuota: 0
      - name: example.com/widget
        nominalQuota: 4
`

// TestPodsReadyTimeout: with waitForPodsReady, an admitted workload whose
// pods cannot all start gives its quota back. A Job whose flavor no node
// has is evicted at the timeout (PodsReadyTimeout), requeued after its
// backoff, and set aside as inadmissible past backoffLimitCount, the
// Warning naming the flavor. A PyTorchJob one of whose pods cannot start
// is evicted whole: none of its pods is left running.
func TestPodsReadyTimeout(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 4*time.Minute)
	useQueues(ctx, t, s, []string{"e2e-podsready", "e2e-podsready-gang"}, podsReadyDocs)

	t.Run("flavor nothing hosts", func(t *testing.T) {
		const ns = "e2e-podsready"
		if err := framework.BindNamespace(ctx, s.client, ns, "e2e-podsready"); err != nil {
			t.Fatal(err)
		}
		job := framework.NewJob(ns, "stranded").Request("cpu", "1").Runtime(time.Second).Obj()
		if err := framework.CreateJobs(ctx, s.client, job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAfter(t, s.client, job) })
		key := client.ObjectKeyFromObject(job)
		var admissions []time.Time
		var evictions []time.Time
		lastAdmitted := ""
		err := framework.Poll(ctx, 200*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			j := &batchv1.Job{}
			if err := s.client.Get(ctx, key, j); err != nil {
				return false, err.Error(), nil
			}
			if at := j.Annotations[framework.AnnotationAdmittedAt]; at != "" && at != lastAdmitted && !framework.Suspended(j) {
				lastAdmitted = at
				admissions = append(admissions, time.Now())
			}
			if n := len(evictions); j.Annotations["tally.dev/requeues"] == fmt.Sprint(n+1) {
				evictions = append(evictions, time.Now())
			}
			state := j.Labels[framework.LabelState]
			return state == "inadmissible", fmt.Sprintf("state %s, suspended %v, requeues %q, admissions seen %d",
				state, framework.Suspended(j), j.Annotations["tally.dev/requeues"], len(admissions)), nil
		})
		if err != nil {
			t.Fatalf("waiting for the Job to be set aside: %v", err)
		}
		if len(admissions) != 2 || len(evictions) != 2 {
			t.Fatalf("admitted %d times and evicted %d times, want 2 and 2 (backoffLimitCount 1)", len(admissions), len(evictions))
		}
		// The backoff is 3s from the first eviction.
		if wait := admissions[1].Sub(evictions[0]); wait < 3*time.Second {
			t.Errorf("admitted again %s after its eviction, within its 3s backoff", wait)
		} else {
			t.Logf("eviction to readmission: %s (backoff 3s)", wait.Round(100*time.Millisecond))
		}
		t.Logf("admission to eviction: %s and %s (timeout 10s)",
			evictions[0].Sub(admissions[0]).Round(100*time.Millisecond), evictions[1].Sub(admissions[1]).Round(100*time.Millisecond))
		msgs := reasons(ctx, t, s.client, ns, "stranded", "Evicted")
		if len(msgs) != 2 || !strings.HasPrefix(msgs[0], "PodsReadyTimeout: 0 of 1 pods ready") ||
			!strings.Contains(msgs[1], "more than backoffLimitCount 1 allows: set aside as inadmissible (its pods did not start in flavor e2e-nowhere)") {
			t.Errorf("Evicted Events %q", msgs)
		}
		// The pods are the truth: none of the Job's runs on a node.
		checkNoPodRuns(ctx, t, s.client, ns)
		// The config ConfigMap says which flavor nothing can host, and only
		// that one.
		var unhostable []string
		err = framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
			unhostable = reasons(ctx, t, s.client, tallyNamespace, "tally-config", "FlavorUnhostable")
			return len(unhostable) > 0, fmt.Sprintf("FlavorUnhostable Events %q", unhostable), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range unhostable {
			if !strings.HasPrefix(m, "ResourceFlavor e2e-nowhere (node labels tally.dev/e2e-nowhere=true") {
				t.Errorf("FlavorUnhostable Event about another flavor: %q", m)
			}
		}
	})

	t.Run("gang with one pod that cannot start", func(t *testing.T) {
		const ns = "e2e-podsready-gang"
		if err := framework.BindNamespace(ctx, s.client, ns, "e2e-podsready-gang"); err != nil {
			t.Fatal(err)
		}
		pj := framework.NewPyTorchJob(ns, "half").Workers(1).GPUs(0).Runtime(10 * time.Minute).Obj()
		// The worker asks for a device its queue has quota for but no node
		// has: tally admits the gang, the master runs, the worker cannot.
		worker := pj.Object["spec"].(map[string]any)["pytorchReplicaSpecs"].(map[string]any)["Worker"].(map[string]any)
		container := worker["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		container["resources"].(map[string]any)["requests"].(map[string]any)["example.com/widget"] = "1"
		container["resources"].(map[string]any)["limits"].(map[string]any)["example.com/widget"] = "1"
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAfter(t, s.client, pj) })
		masterRan := false
		err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			pods := &corev1.PodList{}
			if err := s.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			for _, p := range pods.Items {
				if strings.Contains(p.Name, "master") && p.Status.Phase == corev1.PodRunning {
					masterRan = true
				}
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(framework.PyTorchJobGVK)
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(pj), u); err != nil {
				return false, err.Error(), nil
			}
			state := u.GetLabels()[framework.LabelState]
			return state == "inadmissible" && framework.PyTorchJobSuspended(u),
				fmt.Sprintf("master ran %v, state %s, requeues %q, suspended %v", masterRan, state, u.GetAnnotations()["tally.dev/requeues"], framework.PyTorchJobSuspended(u)), nil
		})
		if err != nil {
			t.Fatalf("waiting for the PyTorchJob to be evicted and set aside: %v", err)
		}
		if !masterRan {
			t.Errorf("the master never ran: the row did not test a half-started gang (Inadmissible Events %q, Pending Events %q)",
				reasons(ctx, t, s.client, ns, "half", "Inadmissible"), reasons(ctx, t, s.client, ns, "half", "Pending"))
		}
		msgs := reasons(ctx, t, s.client, ns, "half", "Evicted")
		if len(msgs) == 0 || !strings.HasPrefix(msgs[0], "PodsReadyTimeout: 1 of 2 pods ready") {
			t.Errorf("Evicted Events %q", msgs)
		}
		// Evicted whole: no pod of the gang is left running.
		checkNoPodRuns(ctx, t, s.client, ns)
	})
}

// reasons lists the messages of the Events of reason about object name in
// ns, oldest first.
func reasons(ctx context.Context, t *testing.T, c client.Reader, ns, name, reason string) []string {
	t.Helper()
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// checkNoPodRuns waits until no pod of ns is bound to a node and not done.
func checkNoPodRuns(ctx context.Context, t *testing.T, c client.Reader, ns string) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error(), nil
		}
		var live []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
				live = append(live, p.Name+" on "+p.Spec.NodeName)
			}
		}
		return len(live) == 0, fmt.Sprintf("pods still on nodes: %v", live), nil
	})
	if err != nil {
		t.Error(err)
	}
}

// removeAfter deletes a workload a test left, with its pods.
func removeAfter(t *testing.T, c client.Client, obj client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Delete(ctx, obj, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting %s: %v", obj.GetName(), err)
	}
}
