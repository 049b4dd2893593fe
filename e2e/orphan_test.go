package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// The pods of a deleted Job can outlive it: deleted with its pods orphaned
// (kubectl delete --cascade=orphan), they run on; deleted as usual, they
// terminate, which can take long (here a finalizer holds them). Their
// GPUs stay in use until they are gone, and tally counts them, whether it
// saw the deletion (the deleted Job's quota is held until its pods are
// gone) or was down then (after its restart it counts the pods its
// admission labelled, in the queue it noted on them). A Job that fits
// only without those pods waits, with a Pending Event, until they are
// gone, and is admitted then.
func TestOrphanedPodsHoldQuota(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 4*time.Minute)
	const ns, queue, limit = "e2e-orphans", "e2e-orphans", 4
	useQueues(ctx, t, s, []string{queue}, gpuQueueDoc(queue, limit, "Never"))
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	for _, restart := range []bool{false, true} {
		name := "seen"
		if restart {
			name = "restart"
		}
		t.Run(name, func(t *testing.T) {
			a := framework.NewJob(ns, "a-"+name).Parallelism(limit).GPUs(1).Runtime(time.Hour).Obj()
			if err := framework.CreateJobs(ctx, s.client, a); err != nil {
				t.Fatal(err)
			}
			var pods []corev1.Pod
			err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				var err error
				pods, err = podsOf(ctx, s.client, ns, a.Name)
				running := 0
				for _, p := range pods {
					if p.Status.Phase == corev1.PodRunning {
						running++
					}
				}
				return err == nil && running == limit, fmt.Sprintf("%d of %d pods of %s running (err %v)", running, limit, a.Name, err), nil
			})
			if err != nil {
				t.Fatalf("%s never ran: %v", a.Name, err)
			}
			// While tally is down, the API server denies updates of
			// Jobs in its namespaces (the webhook fails closed), the
			// orphaning one included: there the Job is deleted as
			// usual, and a finalizer keeps its pods terminating.
			propagation := metav1.DeletePropagationOrphan
			if restart {
				propagation = metav1.DeletePropagationBackground
				for i := range pods {
					p := &pods[i]
					patch := client.MergeFrom(p.DeepCopy())
					p.Finalizers = append(p.Finalizers, holdFinalizer)
					if err := s.client.Patch(ctx, p, patch); err != nil {
						t.Fatal(err)
					}
				}
				killTally(t, s)
			}
			if err := s.client.Delete(ctx, a, client.PropagationPolicy(propagation)); err != nil {
				t.Fatal(err)
			}
			err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				err := s.client.Get(ctx, client.ObjectKeyFromObject(a), &batchv1.Job{})
				return apierrors.IsNotFound(err), fmt.Sprintf("%s still there (err %v)", a.Name, err), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if restart {
				if err := s.tally.Start(); err != nil {
					t.Fatal(err)
				}
				if err := s.tally.WaitReady(ctx, time.Minute); err != nil {
					t.Fatalf("tally not ready after restart: %v", err)
				}
			}

			b := framework.NewJob(ns, "b-"+name).GPUs(1).Runtime(time.Second).Obj()
			if err := framework.CreateJobs(ctx, s.client, b); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("uses %d of %d", limit, limit)
			err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				events, err := framework.JobEvents(ctx, s.client, ns, "Pending")
				if err != nil {
					return false, err.Error(), nil
				}
				for _, e := range events[b.Name] {
					if strings.Contains(e.Message, want) {
						return true, "", nil
					}
				}
				job := &batchv1.Job{}
				if err := s.client.Get(ctx, client.ObjectKeyFromObject(b), job); err == nil && !framework.Suspended(job) {
					return false, "", fmt.Errorf("%s was admitted while the %d pods of deleted %s ran", b.Name, limit, a.Name)
				}
				return false, fmt.Sprintf("no Pending Event on %s that says %q: %v", b.Name, want, events[b.Name]), nil
			})
			if err != nil {
				t.Fatal(err)
			}

			for i := range pods {
				if restart {
					p := &corev1.Pod{}
					if err := s.client.Get(ctx, client.ObjectKeyFromObject(&pods[i]), p); err != nil {
						t.Fatal(err)
					}
					patch := client.MergeFrom(p.DeepCopy())
					p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == holdFinalizer })
					if err := s.client.Patch(ctx, p, patch); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := s.client.Delete(ctx, &pods[i]); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}
			err = framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
				job := &batchv1.Job{}
				if err := s.client.Get(ctx, client.ObjectKeyFromObject(b), job); err != nil || framework.Suspended(job) {
					return false, fmt.Sprintf("%s not admitted (err %v)", b.Name, err), nil
				}
				left, err := podsOf(ctx, s.client, ns, a.Name)
				if err != nil {
					return false, err.Error(), nil
				}
				for _, p := range left {
					if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
						return false, "", fmt.Errorf("%s was admitted while pod %s of deleted %s was %s", b.Name, p.Name, a.Name, p.Status.Phase)
					}
				}
				return true, "", nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// holdFinalizer keeps a pod of TestOrphanedPodsHoldQuota terminating.
const holdFinalizer = "e2e.tally.dev/hold"

// podsOf lists the pods of Job job in ns, by the label the job controller
// gives them, which stays when the Job is deleted with its pods orphaned.
func podsOf(ctx context.Context, c client.Reader, ns, job string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
