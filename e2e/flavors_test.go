package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// A GPU Job and a CPU Job in a bound namespace are queued, admitted onto
// their flavor and run to completion on that flavor's nodes.
func TestJobsRunOnTheirFlavor(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 2*time.Minute)
	const ns, queue = "e2e-flavors", "e2e-flavors"
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	rec, err := framework.Record(ctx, s.client, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()

	cases := []struct {
		job       *batchv1.Job
		flavor    string
		nodeLabel [2]string
	}{
		{framework.NewJob(ns, "gpu-job").GPUs(1).Request("cpu", "2").Runtime(3 * time.Second).Obj(), "nvidia-gpu-flavor", [2]string{"kueue.x-k8s.io/default-flavor", "true"}},
		{framework.NewJob(ns, "cpu-job").Request("cpu", "2").Request("memory", "1Gi").Runtime(3 * time.Second).Obj(), "cpu-flavor", [2]string{"node-type", "cpu"}},
	}
	for _, tc := range cases {
		if err := framework.CreateJobs(ctx, s.client, tc.job); err != nil {
			t.Fatal(err)
		}
		j := tc.job
		if !framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StatePending || j.Labels[framework.LabelQueue] != queue {
			t.Errorf("Job %s as created: want suspend=true, %s=pending, %s=%s; got suspend=%v labels=%v",
				j.Name, framework.LabelState, framework.LabelQueue, queue, ptrString(j.Spec.Suspend), j.Labels)
		}
	}

	waitFinishedAndLabelled(ctx, t, s.client, ns, len(cases), time.Minute)

	for _, tc := range cases {
		t.Run(tc.job.Name, func(t *testing.T) {
			j := &batchv1.Job{}
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(tc.job), j); err != nil {
				t.Fatal(err)
			}
			if !framework.Completed(j) {
				t.Errorf("Job did not complete: conditions %v", j.Status.Conditions)
			}
			if h := rec.History(j.Name); h == nil || !slices.Equal(h.States, []string{framework.StatePending, framework.StateAdmitted, framework.StateFinished}) {
				t.Errorf("%s went through %v, want [pending admitted finished]", framework.LabelState, statesOf(h))
			}
			if got, want := j.Annotations[framework.AnnotationFlavors], "main="+tc.flavor; got != want {
				t.Errorf("annotation %s = %q, want %q", framework.AnnotationFlavors, got, want)
			}
			if at := j.Annotations[framework.AnnotationAdmittedAt]; at == "" {
				t.Errorf("annotation %s missing", framework.AnnotationAdmittedAt)
			} else if _, err := time.Parse(time.RFC3339, at); err != nil {
				t.Errorf("annotation %s = %q is not RFC 3339: %v", framework.AnnotationAdmittedAt, at, err)
			}
			nodes, err := podNodes(ctx, s.client, j)
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) == 0 {
				t.Fatal("no pods with a node found for the Job")
			}
			for pod, node := range nodes {
				if node.Labels[tc.nodeLabel[0]] != tc.nodeLabel[1] {
					t.Errorf("pod %s ran on node %s (labels %v), want a node of flavor %s (%s=%s)",
						pod, node.Name, node.Labels, tc.flavor, tc.nodeLabel[0], tc.nodeLabel[1])
				}
			}
		})
	}
}

// waitFinishedAndLabelled waits until want Jobs of ns have finished and
// carry tally.dev/state=finished.
func waitFinishedAndLabelled(ctx context.Context, t *testing.T, c client.Reader, ns string, want int, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		jobs, err := framework.ListJobs(ctx, c, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		done, labelled := 0, 0
		var notYet []string
		for i := range jobs {
			j := &jobs[i]
			if framework.Finished(j) {
				done++
			}
			if j.Labels[framework.LabelState] == framework.StateFinished {
				labelled++
			} else if len(notYet) < 5 {
				notYet = append(notYet, fmt.Sprintf("%s(suspend=%s %s=%q)", j.Name, ptrString(j.Spec.Suspend), framework.LabelState, j.Labels[framework.LabelState]))
			}
		}
		return done >= want && labelled >= want, fmt.Sprintf("%d of %d finished, %d labelled finished; e.g. %v", done, want, labelled, notYet), nil
	})
	if err != nil {
		t.Fatalf("waiting for %d Jobs of %s to finish: %v", want, ns, err)
	}
}

// podNodes maps each scheduled pod of a Job to its node.
func podNodes(ctx context.Context, c client.Reader, j *batchv1.Job) (map[string]*corev1.Node, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.JobNameLabel: j.Name}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Node{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
			return nil, err
		}
		out[p.Name] = n
	}
	return out, nil
}

func statesOf(h *framework.JobHistory) []string {
	if h == nil {
		return nil
	}
	return h.States
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
