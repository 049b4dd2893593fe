package inspect

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

const explainConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {matchLabels: {team: a}}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 4}
`

var explainNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// explainJob is a Job of queue q in namespace ns with cpu CPUs, created
// ago before explainNow; state is its tally.dev/state label, and for an
// admitted or finished one admitted is how long ago it was admitted and
// ran how long it ran.
func explainJob(ns, name string, cpu int64, ago time.Duration, state queues.State, admitted, ran time.Duration, prio int32) *kinds.Object {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(explainNow.Add(-ago)),
			Labels:            map[string]string{queues.LabelQueue: "q", queues.LabelState: string(state)},
			Annotations:       map[string]string{}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(state != queues.StateAdmitted), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			PriorityClassName: fmt.Sprintf("p%d", prio),
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI)}}}}}}},
	}
	if state == queues.StateAdmitted || state == queues.StateFinished {
		job.Annotations[queues.AnnotationFlavors] = "main=default"
		job.Annotations[queues.AnnotationAdmittedAt] = explainNow.Add(-admitted).Format(time.RFC3339)
		job.Spec.Suspend = ptr.To(false)
	}
	if state == queues.StateAdmitted {
		job.Status.Active = 1
	}
	if state == queues.StateFinished {
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(explainNow.Add(-admitted + ran))}}
	}
	o, _ := kinds.NewRegistry().Of(job)
	return o
}

func explainInput(t *testing.T, target *kinds.Object, others ...*kinds.Object) ExplainInput {
	t.Helper()
	cfg, _, errs := queues.Parse([]byte(explainConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return ExplainInput{Config: cfg, Workloads: append(others, target), AllNamespaces: true, Target: target, Now: explainNow,
		PriorityClasses: map[string]int32{"p0": 0, "p100": 100}}
}

// explainBooks: two running Jobs of 2 CPUs fill the 4-CPU queue (admitted
// 1 and 3 minutes ago); three finished ones ran 4, 5 and 6 minutes (median
// 5); p1 (2 CPUs) waits ahead of the target, p2 (1 CPU) behind it.
func explainBooks() []*kinds.Object {
	return []*kinds.Object{
		explainJob("a", "r1", 2, 10*time.Minute, queues.StateAdmitted, time.Minute, 0, 0),
		explainJob("a", "r2", 2, 10*time.Minute, queues.StateAdmitted, 3*time.Minute, 0, 0),
		explainJob("a", "f1", 1, time.Hour, queues.StateFinished, 50*time.Minute, 4*time.Minute, 0),
		explainJob("a", "f2", 1, time.Hour, queues.StateFinished, 50*time.Minute, 5*time.Minute, 0),
		explainJob("b", "f3", 1, time.Hour, queues.StateFinished, 50*time.Minute, 6*time.Minute, 0),
		explainJob("b", "p1", 2, 10*time.Minute, queues.StatePending, 0, 0, 0),
		explainJob("a", "p2", 1, time.Minute, queues.StatePending, 0, 0, 0),
	}
}

// TestExplainPending: the position, who is ahead, what is free, and the
// start replayed forward: r2 ends at +2m and p1 starts; r1 ends at +4m and
// p2 (1 CPU, behind, but it fits) starts; p1 ends at +7m and the target
// starts.
func TestExplainPending(t *testing.T) {
	target := explainJob("a", "target", 3, 5*time.Minute, queues.StatePending, 0, 0, 0)
	x := Explain(explainInput(t, target, explainBooks()...))
	if x.State != "pending" || x.ClusterQueue != "q" || x.Needs != "cpu=3" {
		t.Errorf("state %q queue %q needs %q", x.State, x.ClusterQueue, x.Needs)
	}
	if x.Position == nil || *x.Position != (Place{2, 3}) || x.NamespacePosition == nil || *x.NamespacePosition != (Place{1, 2}) {
		t.Errorf("position %+v, in namespace %+v; want 2 of 3, 1 of 2", x.Position, x.NamespacePosition)
	}
	if len(x.Ahead) != 1 || x.Ahead[0].Name != "b/p1" {
		t.Errorf("ahead %+v, want b/p1", x.Ahead)
	}
	if !strings.Contains(x.Reason, "needs cpu=3") || len(x.Free) != 1 || x.Free[0].Used != "4" || x.Free[0].Available != "0" {
		t.Errorf("reason %q, free %+v", x.Reason, x.Free)
	}
	if x.Estimate == nil || x.Estimate.In != "7m0s" || !strings.Contains(x.Estimate.Method, "q 5m0s (3)") {
		t.Fatalf("estimate %+v, want in 7m0s from a median of 5m0s", x.Estimate)
	}
	var must []string
	for _, r := range x.MustFinish {
		must = append(must, r.Name)
	}
	if !slices.Equal(must, []string{"a/r2", "a/r1"}) {
		t.Errorf("must finish %v, want a/r2 then a/r1", must)
	}
	var b bytes.Buffer
	if err := WriteExplanation(&b, x); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Job a/target", "Position:     2 of 3 in ClusterQueue q", "Ahead:        b/p1 (priority 0)", "starts in about 7m0s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestExplainOwnNamespace: a caller who can list only its namespace sees
// the workloads ahead elsewhere as a count, no position in the queue, and
// tally's last Queued Event.
func TestExplainOwnNamespace(t *testing.T) {
	target := explainJob("a", "target", 3, 5*time.Minute, queues.StatePending, 0, 0, 0)
	in := explainInput(t, target, explainBooks()...)
	in.AllNamespaces = false
	in.Events = []corev1.Event{{Reason: ReasonQueued, Message: "Queued in ClusterQueue q, position 2 of 3"}}
	x := Explain(in)
	if x.Position != nil || x.AheadHidden != 1 || len(x.Ahead) != 1 {
		t.Errorf("position %+v, hidden %d, ahead %+v", x.Position, x.AheadHidden, x.Ahead)
	}
	if !slices.ContainsFunc(x.Notes, func(n string) bool { return strings.Contains(n, "position 2 of 3") }) {
		t.Errorf("notes %q lack the Queued Event", x.Notes)
	}
}

func TestExplainCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target *kinds.Object
		check  func(t *testing.T, x Explanation)
	}{
		{"admitted", explainJob("a", "r9", 1, time.Minute, queues.StateAdmitted, time.Minute, 0, 0), func(t *testing.T, x Explanation) {
			if x.State != "admitted" || x.Flavors != "main=default" || x.Position != nil {
				t.Errorf("%+v", x)
			}
		}},
		{"never fits", explainJob("a", "huge", 5, time.Minute, queues.StatePending, 0, 0, 0), func(t *testing.T, x Explanation) {
			if !strings.HasPrefix(x.Reason, "Can never fit") || x.Estimate != nil {
				t.Errorf("reason %q, estimate %+v", x.Reason, x.Estimate)
			}
		}},
		{"would preempt", explainJob("a", "urgent", 2, time.Minute, queues.StatePending, 0, 0, 100), func(t *testing.T, x Explanation) {
			if len(x.WouldPreempt) != 1 || x.Position == nil || x.Position.Index != 1 {
				t.Errorf("would preempt %+v, position %+v: want one victim, first in line", x.WouldPreempt, x.Position)
			}
		}},
		{"unmanaged", func() *kinds.Object {
			o := explainJob("a", "plain", 1, time.Minute, queues.StatePending, 0, 0, 0)
			o.Meta.Labels = nil
			return o
		}(), func(t *testing.T, x Explanation) {
			if x.State != "unmanaged" {
				t.Errorf("state %q", x.State)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Explain(explainInput(t, tc.target, explainBooks()...))) })
	}
}

// TestExplainHeld: a pending workload of a LocalQueue on hold is held,
// with no estimate; one of another LocalQueue of its ClusterQueue is not.
func TestExplainHeld(t *testing.T) {
	lq := func(name, stop string) string {
		return "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " + name + ", namespace: a}\nspec: {clusterQueue: q, stopPolicy: " + stop + "}\n"
	}
	cfg, _, errs := queues.Parse([]byte(explainConfig + lq("held", "Hold") + lq("open", "None")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct{ lq, reason string }{
		{"held", "LocalQueue a/held is on hold (stopPolicy Hold)"},
		{"open", "Waiting for quota"},
	} {
		target := explainJob("a", "target", 1, time.Minute, queues.StatePending, 0, 0, 0)
		target.Meta.Labels[queues.LabelKueueQueueName] = tc.lq
		in := explainInput(t, target, explainBooks()...)
		in.Config = cfg
		x := Explain(in)
		if !strings.HasPrefix(x.Reason, tc.reason) || (tc.lq == "held") != (x.Estimate == nil) {
			t.Errorf("%s: reason %q, estimate %+v; want %q", tc.lq, x.Reason, x.Estimate, tc.reason)
		}
	}
}

// TestExplainNew: a workload not yet submitted is placed last, as if
// created now.
func TestExplainNew(t *testing.T) {
	o := explainJob("a", "draft", 1, 0, queues.StatePending, 0, 0, 0)
	o.Meta.UID, o.Meta.Labels = "", nil
	in := explainInput(t, o, explainBooks()...)
	in.New, in.Queue = true, "q"
	x := Explain(in)
	if x.Position == nil || *x.Position != (Place{3, 3}) || x.Estimate == nil {
		t.Fatalf("position %+v, estimate %+v", x.Position, x.Estimate)
	}
	if x.Estimate.In != "4m0s" {
		t.Errorf("estimate in %s, want 4m0s: r1 ends at +4m, and p2 and the draft, 1 CPU each, start then", x.Estimate.In)
	}
	// A manifest has no creationTimestamp: it is placed last all the same.
	o.Meta.CreationTimestamp = metav1.Time{}
	if x := Explain(in); x.Position == nil || *x.Position != (Place{3, 3}) {
		t.Errorf("without a creationTimestamp: position %+v, want 3 of 3", x.Position)
	}
}

// TestExplainFinishedLabelOff: with --finished-label=off finished Jobs
// keep their admitted label; explain reads their conditions, so they are
// run-time samples all the same (the same estimate as TestExplainPending),
// and a finished target is said to be finished.
func TestExplainFinishedLabelOff(t *testing.T) {
	unlabel := func(o *kinds.Object) *kinds.Object {
		if o.Finished {
			o.Meta.Labels[queues.LabelState] = string(queues.StateAdmitted)
		}
		return o
	}
	var books []*kinds.Object
	for _, o := range explainBooks() {
		books = append(books, unlabel(o))
	}
	target := explainJob("a", "target", 3, 5*time.Minute, queues.StatePending, 0, 0, 0)
	x := Explain(explainInput(t, target, books...))
	if x.Estimate == nil || x.Estimate.In != "7m0s" || !strings.Contains(x.Estimate.Method, "q 5m0s (3)") {
		t.Errorf("estimate %+v, want in 7m0s from a median of 5m0s", x.Estimate)
	}
	done := unlabel(explainJob("a", "done", 1, time.Hour, queues.StateFinished, 50*time.Minute, 4*time.Minute, 0))
	if x := Explain(explainInput(t, done, books...)); x.State != string(queues.StateFinished) {
		t.Errorf("a finished Job labelled admitted: state %q, want finished", x.State)
	}
}

// TestPodsReadyNotes: explain says how often a workload was evicted for
// pods that were not ready, when it may be admitted again, and when it
// has been set aside.
func TestPodsReadyNotes(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	limit := int32(2)
	cfg := &queues.Config{PodsReady: &queues.PodsReady{Timeout: time.Minute, BackoffLimitCount: &limit}}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"never evicted", nil, ""},
		{"backing off", map[string]string{queues.AnnotationRequeues: "1", queues.AnnotationRequeueAt: "2030-01-01T00:01:30Z"},
			"evicted 1 time(s) because its pods were not all ready in time (PodsReadyTimeout); backing off: not admitted again before 2030-01-01T00:01:30Z (in 1m30s)"},
		{"backoff over", map[string]string{queues.AnnotationRequeues: "2", queues.AnnotationRequeueAt: "2029-12-31T23:59:00Z"},
			"evicted 2 time(s) because its pods were not all ready in time (PodsReadyTimeout)"},
		{"set aside", map[string]string{queues.AnnotationRequeues: "3"},
			"evicted 3 time(s) because its pods were not all ready in time (PodsReadyTimeout); that is more than backoffLimitCount 2 allows: it is set aside as inadmissible"},
	} {
		if got := strings.Join(podsReadyNotes(cfg, nil, tc.ann, now), "\n"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestExplainRequeuedOrder: a workload evicted because its pods were not
// ready in time is placed by that eviction under
// requeuingStrategy.timestamp Eviction (behind p1, created before the
// eviction), by its creation under Creation (ahead of p1), and the notes
// say which.
func TestExplainRequeuedOrder(t *testing.T) {
	for _, tc := range []struct {
		timestamp string
		position  Place
		note      string
	}{
		{"", Place{2, 3}, "queued by the time of that eviction, 2030-01-01T11:55:00Z, not by its creation (requeuingStrategy.timestamp Eviction)"},
		{queues.EvictionTimestamp, Place{2, 3}, "queued by the time of that eviction, 2030-01-01T11:55:00Z, not by its creation (requeuingStrategy.timestamp Eviction)"},
		{queues.CreationTimestamp, Place{1, 3}, "queued by its creation all the same (requeuingStrategy.timestamp Creation)"},
	} {
		t.Run("timestamp "+tc.timestamp, func(t *testing.T) {
			target := explainJob("a", "target", 3, 20*time.Minute, queues.StatePending, 0, 0, 0)
			target.Meta.Annotations[queues.AnnotationRequeues] = "1"
			target.Meta.Annotations[queues.AnnotationRequeueAt] = explainNow.Add(-4 * time.Minute).Format(time.RFC3339)
			target.Meta.Annotations[queues.AnnotationAdmittedAt] = explainNow.Add(-15 * time.Minute).Format(time.RFC3339)
			target.Meta.Annotations[queues.AnnotationEvictedAt] = explainNow.Add(-5 * time.Minute).Format(time.RFC3339)
			in := explainInput(t, target, explainBooks()...)
			strategy := ""
			if tc.timestamp != "" {
				strategy = ", requeuingStrategy: {timestamp: " + tc.timestamp + "}"
			}
			cfg, _, errs := queues.Parse([]byte(explainConfig + "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {enable: true" + strategy + "}\n"))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			in.Config = cfg
			x := Explain(in)
			if x.Position == nil || *x.Position != tc.position {
				t.Errorf("position %+v, want %+v", x.Position, tc.position)
			}
			if !slices.ContainsFunc(x.Notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Errorf("notes %q lack %q", x.Notes, tc.note)
			}
		})
	}
}
