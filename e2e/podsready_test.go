package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// podsReadyDocs turn on Kueue's waitForPodsReady (a Configuration document
// pasted from Kueue) with a short timeout and backoff, and add two queues:
// one whose flavor no node has, one on the CPU nodes. TestPodsReadyTimeout
// adds a third, on the CPU nodes, for a RayJob (podsReadyRayQueue).
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

// podsReadyRayQueue is the queue of TestPodsReadyTimeout's RayJob: room
// for its head, its workers up to maxReplicas and its submitter, 1 CPU
// each, and the sidecar KubeRay adds to an autoscaling cluster's head.
const podsReadyRayQueue = "e2e-podsready-ray"

// TestPodsReadyTimeout: with waitForPodsReady, an admitted workload whose
// pods cannot all start gives its quota back. A Job whose flavor no node
// has is evicted at the timeout (PodsReadyTimeout), requeued after its
// backoff, and set aside as inadmissible past backoffLimitCount, the
// Warning naming the flavor. A PyTorchJob one of whose pods cannot start
// is evicted whole: none of its pods is left running. An autoscaling
// RayJob, charged its workers' maxReplicas, is ready once the pods
// KubeRay starts are: it is not evicted.
func TestPodsReadyTimeout(t *testing.T) {
	s := setup(t)
	// A cold build of KubeRay's operator, for the RayJob row, takes some
	// minutes.
	if err := s.env.BuildTool(testContext(t, 30*time.Minute), framework.RayOperator); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 6*time.Minute)
	// RayJob's CRD before the config that brings the queues: tally watches
	// a kind whose CRD came since its last config load from the next one.
	if err := s.cluster.InstallRayCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	useQueues(ctx, t, s, []string{"e2e-podsready", "e2e-podsready-gang", podsReadyRayQueue}, podsReadyDocs, cpuQueue(podsReadyRayQueue, 8, ""))

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

	t.Run("autoscaling RayJob ready with the workers KubeRay starts", func(t *testing.T) {
		const ns = podsReadyRayQueue
		if err := framework.BindNamespace(ctx, s.client, ns, podsReadyRayQueue); err != nil {
			t.Fatal(err)
		}
		o, err := framework.NewRayOperator(ctx, s.cluster, filepath.Dir(s.cluster.Kubeconfig))
		if err != nil {
			t.Fatal(err)
		}
		startOperator(ctx, t, o, 2*time.Minute)
		// One worker of [0, 2], the cluster autoscaling: tally charges 2,
		// KubeRay starts 1. The submitter runs on past the check.
		rj := framework.OperatorJob{Namespace: ns, Name: "scaling", Workers: 1, Runtime: 10 * time.Minute}.RayJob()
		cluster := rj.Object["spec"].(map[string]any)["rayClusterSpec"].(map[string]any)
		cluster["enableInTreeAutoscaling"] = true
		group := cluster["workerGroupSpecs"].([]any)[0].(map[string]any)
		group["minReplicas"], group["maxReplicas"] = int64(0), int64(2)
		if err := s.client.Create(ctx, rj); err != nil {
			t.Fatal(err)
		}
		// A RayJob carries a finalizer that only its running operator
		// removes: it is gone before the operator stops.
		t.Cleanup(func() { removeRayJob(t, s.client, rj) })
		const timeout = 10 * time.Second // podsReadyDocs
		var admitted time.Time
		var pods string
		err = framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(framework.RayJobGVK)
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(rj), u); err != nil {
				return false, err.Error(), nil
			}
			if n := u.GetAnnotations()["tally.dev/requeues"]; n != "" {
				return false, "", fmt.Errorf("evicted (requeues %s, state %s) with pods %s; Evicted Events %q",
					n, u.GetLabels()[framework.LabelState], pods, reasons(ctx, t, s.client, ns, "scaling", "Evicted"))
			}
			state := u.GetLabels()[framework.LabelState]
			if at := u.GetAnnotations()[framework.AnnotationAdmittedAt]; state == framework.StateAdmitted && admitted.IsZero() {
				if admitted, err = time.Parse(time.RFC3339, at); err != nil {
					return false, "", fmt.Errorf("%s %q: %v", framework.AnnotationAdmittedAt, at, err)
				}
			}
			var ready, workers int
			if pods, ready, workers, err = rayPods(ctx, s.client, ns); err != nil {
				return false, err.Error(), nil
			}
			// Past the timeout, with a margin for the eviction to land.
			past := !admitted.IsZero() && time.Since(admitted) > timeout+5*time.Second
			return past && ready == 3 && workers == 1, fmt.Sprintf("state %s, admitted %s, pods %s", state, admitted.Format(time.RFC3339), pods), nil
		})
		if err != nil {
			t.Fatalf("waiting for the RayJob's head, worker and submitter to be ready past the timeout: %v", err)
		}
		t.Logf("%s after its admission: pods %s, not evicted (timeout %s)", time.Since(admitted).Round(time.Second), pods, timeout)
		if msgs := reasons(ctx, t, s.client, ns, "scaling", "Evicted"); len(msgs) != 0 {
			t.Errorf("Evicted Events %q", msgs)
		}
		// KubeRay adds its autoscaler's container to the head, which the
		// RayJob does not hold: the pod gate charges it as pod overhead.
		t.Logf("PodOverhead Events %q", reasons(ctx, t, s.client, ns, "scaling", "PodOverhead"))
	})
}

// rayPods describes the pods of ns, a RayJob's: each with its phase and
// whether it is ready; how many count as ready for waitForPodsReady
// (Ready, or succeeded) and how many are the cluster's workers.
func rayPods(ctx context.Context, c client.Reader, ns string) (desc string, ready, workers int, err error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return "", 0, 0, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		ok := p.Status.Phase == corev1.PodSucceeded
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
				ok = true
			}
		}
		if ok {
			ready++
		}
		if p.Labels["ray.io/node-type"] == "worker" {
			workers++
		}
		out = append(out, fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, ok))
	}
	return fmt.Sprintf("%v", out), ready, workers, nil
}

// removeRayJob deletes a RayJob and waits until it is gone.
func removeRayJob(t *testing.T, c client.Client, rj client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Delete(ctx, rj, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
		t.Errorf("deleting RayJob %s: %v", rj.GetName(), err)
		return
	}
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(framework.RayJobGVK)
		err := c.Get(ctx, client.ObjectKeyFromObject(rj), u)
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v, finalizers %v", err, u.GetFinalizers()), nil
	})
	if err != nil {
		t.Errorf("RayJob %s is not gone: %v", rj.GetName(), err)
	}
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
