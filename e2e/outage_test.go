package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// With tally down, unbound namespaces are unaffected: the API server never
// calls tally for them (the Job webhook fails closed, so a call would have
// been a denial). A bound namespace fails closed at once, with a message
// that names tally.
func TestOutageFailsClosedOnlyWhereBound(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 2*time.Minute)
	const free, bound = "e2e-outage-free", "e2e-outage-bound"
	if err := framework.CreateNamespace(ctx, s.client, free, ""); err != nil {
		t.Fatal(err)
	}
	if err := framework.BindNamespace(ctx, s.client, bound, "e2e-quota"); err != nil {
		t.Fatal(err)
	}
	killTally(t, s)

	// The webhook's timeout is 5s: a create that waited on tally would
	// take that long. Normal speed here is well under a second.
	const slow = 2500 * time.Millisecond
	job := framework.NewJob(free, "while-down").Request("cpu", "1").Runtime(time.Second).Obj()
	start := time.Now()
	if err := s.client.Create(ctx, job); err != nil {
		t.Fatalf("creating a Job in an unbound namespace with tally down: %v", err)
	}
	if d := time.Since(start); d > slow {
		t.Errorf("creating a Job in an unbound namespace took %s with tally down", d)
	}
	checkUntouched(t, "created while tally was down", job)
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err.Error(), nil
		}
		return framework.Completed(job), "conditions: " + conditions(job), nil
	})
	if err != nil {
		t.Fatalf("the unbound Job did not complete while tally was down: %v", err)
	}

	start = time.Now()
	err = s.client.Create(ctx, framework.NewJob(bound, "while-down").GPUs(1).Obj())
	d := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "tally.dev") {
		t.Fatalf("creating a Job in a bound namespace with tally down: want a denial naming tally, got %v", err)
	}
	if d > slow {
		t.Errorf("the denial took %s", d)
	}
	t.Logf("bound namespace, tally down: denied in %s: %v", d.Round(time.Millisecond), err)
}
