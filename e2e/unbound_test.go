package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// A Job in a namespace with no tally.dev/cluster-queue annotation is never
// touched: no labels or annotations of tally's, not suspended, and it runs
// to completion.
func TestUnboundNamespaceUntouched(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 2*time.Minute)
	const ns = "e2e-unbound"
	if err := framework.CreateNamespace(ctx, s.client, ns, ""); err != nil {
		t.Fatal(err)
	}
	job := framework.NewJob(ns, "plain").Request("cpu", "1").Runtime(time.Second).Obj()
	if err := framework.CreateJobs(ctx, s.client, job); err != nil {
		t.Fatal(err)
	}
	checkUntouched(t, "as created", job)

	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err.Error(), nil
		}
		return framework.Completed(job), "conditions: " + conditions(job), nil
	})
	if err != nil {
		t.Fatalf("Job did not complete: %v", err)
	}
	checkUntouched(t, "once complete", job)

	nsObj := &corev1.Namespace{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	if _, ok := nsObj.Labels[framework.LabelManaged]; ok {
		t.Errorf("unbound namespace has label %s: %v", framework.LabelManaged, nsObj.Labels)
	}
}

func checkUntouched(t *testing.T, when string, j *batchv1.Job) {
	t.Helper()
	for k := range j.Labels {
		if strings.HasPrefix(k, "tally.dev/") {
			t.Errorf("%s: Job has tally's label %s=%s", when, k, j.Labels[k])
		}
	}
	for k := range j.Annotations {
		if strings.HasPrefix(k, "tally.dev/") {
			t.Errorf("%s: Job has tally's annotation %s", when, k)
		}
	}
	if framework.Suspended(j) {
		t.Errorf("%s: Job is suspended", when)
	}
	if a := j.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		t.Errorf("%s: Job has a node affinity it was not created with: %v", when, a.NodeAffinity)
	}
	if len(j.Spec.Template.Spec.Tolerations) > 0 {
		t.Errorf("%s: Job has tolerations it was not created with: %v", when, j.Spec.Template.Spec.Tolerations)
	}
}

func conditions(j *batchv1.Job) string {
	var parts []string
	for _, c := range j.Status.Conditions {
		parts = append(parts, string(c.Type)+"="+string(c.Status))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
