package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// explainConfig is loaded with the suite's config by TestExplain: a
// 1-CPU ClusterQueue, so its Jobs run one at a time, and a priority.
var explainConfig = cpuQueue("e2e-explain", 1, "") + `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: e2e-explain-high
value: 1000
`

// tally explain, run as a user would, gives each waiting Job the position
// in which the ledger then admits it, and an estimated start from the run
// times of the queue's finished Jobs. Two Jobs finish first (the history);
// then one runs while three wait: the high-priority one, created second,
// is first in line. The estimates' errors are logged.
func TestExplain(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-explain", "e2e-explain"
	useQueues(ctx, t, s, []string{queue}, explainConfig)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	job := func(name string, high bool) *batchv1.Job {
		b := framework.NewJob(ns, name).Request("cpu", "1").Runtime(4 * time.Second)
		if high {
			b.Label(framework.LabelPriorityClass, "e2e-explain-high")
		}
		j := b.Obj()
		if err := s.client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	for _, name := range []string{"history-1", "history-2"} {
		job(name, false)
	}
	waitJobFinished(ctx, t, s, ns, "history-1")
	waitJobFinished(ctx, t, s, ns, "history-2")

	job("running", false)
	waitJobState(ctx, t, s, ns, "running", "admitted")
	waiting := []string{"low-1", "high", "low-2"}
	var low []*batchv1.Job
	for _, name := range waiting {
		if j := job(name, name == "high"); name != "high" {
			low = append(low, j)
		}
	}
	// The high-priority Job first; the two others by creation (one-second
	// resolution), then UID.
	want := append([]string{"high"}, admissionOrder(low)...)
	predicted := map[string]time.Time{}
	for _, name := range waiting {
		x := runExplain(ctx, t, s, ns, name)
		if x.State != "pending" || x.Position == nil {
			t.Fatalf("%s: state %q, position %+v", name, x.State, x.Position)
		}
		if got := want[x.Position.Index-1]; got != name || x.Position.Of != 3 {
			t.Errorf("%s: position %d of %d, want %d of 3", name, x.Position.Index, x.Position.Of, slices.Index(want, name)+1)
		}
		if x.Estimate == nil {
			t.Fatalf("%s: no estimate (notes %q)", name, x.Notes)
		}
		predicted[name] = x.Estimate.Start
		t.Logf("%s: position %d of 3, estimated start %s (%s)", name, x.Position.Index, x.Estimate.In, x.Estimate.Method)
	}

	text, err := exec.CommandContext(ctx, s.env.Bin, "explain", "--kubeconfig", s.cluster.Kubeconfig, "-n", ns, "low-2").CombinedOutput()
	if err != nil {
		t.Fatalf("tally explain low-2: %v: %s", err, text)
	}
	t.Logf("tally explain -n %s low-2:\n%s", ns, text)

	// The ledger admits them in that order.
	var order []string
	admittedAt := map[string]time.Time{}
	for _, name := range waiting {
		j := waitJobFinished(ctx, t, s, ns, name)
		at, err := time.Parse(time.RFC3339, j.Annotations[framework.AnnotationAdmittedAt])
		if err != nil {
			t.Fatalf("%s: admitted-at: %v", name, err)
		}
		admittedAt[name] = at
		order = append(order, name)
	}
	slices.SortStableFunc(order, func(a, b string) int { return admittedAt[a].Compare(admittedAt[b]) })
	if !slices.Equal(order, want) {
		t.Errorf("admitted in the order %v, explained %v", order, want)
	}
	for _, name := range want {
		t.Logf("%s: estimated start %s, admitted %s: error %s", name, predicted[name].Format(time.TimeOnly),
			admittedAt[name].Format(time.TimeOnly), admittedAt[name].Sub(predicted[name]).Round(time.Second))
	}
}

// runExplain runs tally explain -o json on Job ns/name as a user would.
func runExplain(ctx context.Context, t *testing.T, s *suite, ns, name string) explanation {
	t.Helper()
	cmd := exec.CommandContext(ctx, s.env.Bin, "explain", "--kubeconfig", s.cluster.Kubeconfig, "-n", ns, "-o", "json", name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tally explain %s: %v: %s", name, err, stderr.String())
	}
	var x explanation
	if err := json.Unmarshal(out, &x); err != nil {
		t.Fatalf("tally explain -o json %s: %v: %s", name, err, out)
	}
	return x
}

// explanation is what the e2e tests read of tally explain -o json.
type explanation struct {
	State    string `json:"state"`
	Position *struct {
		Index int `json:"index"`
		Of    int `json:"of"`
	} `json:"position"`
	Estimate *struct {
		Start  time.Time `json:"start"`
		In     string    `json:"in"`
		Method string    `json:"method"`
	} `json:"estimate"`
	Notes []string `json:"notes"`
}

// waitJobState waits until Job ns/name carries tally.dev/state=state.
func waitJobState(ctx context.Context, t *testing.T, s *suite, ns, name, state string) {
	t.Helper()
	err := framework.Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		j := &batchv1.Job{}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return false, "", err
		}
		return j.Labels[framework.LabelState] == state, fmt.Sprintf("Job %s: state %q", name, j.Labels[framework.LabelState]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
