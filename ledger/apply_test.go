package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// reactWorkload is a one-pod workload of queue q asking for cpu cores.
func reactWorkload(cpu int64) *queues.Workload {
	return (&queues.Workload{Namespace: "ns", Name: "j", UID: "uid-j", Queue: "q",
		PodSets: []queues.PodSet{{Name: "main", Count: 1, Requests: flavors.Resources{corev1.ResourceCPU: flavors.Amount(cpu * 1000)}}}}).Seal()
}

// TestApplyLeavesTheTreeByTheOldVersion: a queued workload whose priority
// changes leaves its tree by the version it joined with, so the tree
// holds it once, by its new priority.
func TestApplyLeavesTheTreeByTheOldVersion(t *testing.T) {
	l := New(nil, nil, queues.NewStore(nil), &scenarioRecorder{}, logr.Discard(), Options{})
	other := &entry{Entry: machine.New(machine.Pending)}
	other.W = reactWorkload(1)
	other.W.UID, other.W.Priority = "uid-other", 5
	l.books.insert(other)
	e := &entry{Entry: machine.New(machine.Pending)}
	e.W = reactWorkload(2)
	l.books.insert(e)
	raised := *reactWorkload(2)
	raised.Priority = 10
	next := *e
	var fx []machine.Effect
	next.Entry, fx = machine.React(e.Entry, machine.Observed{W: &raised, Suspended: true}, time.Now(), nil)
	l.apply(e, next, fx)
	var order []string
	l.books.pending["q"].Ascend(func(x *entry) bool { order = append(order, fmt.Sprintf("%s/%d", x.W.UID, x.W.Priority)); return true })
	if got := strings.Join(order, ","); got != "uid-j/10,uid-other/5" {
		t.Errorf("tree holds %s, want uid-j/10,uid-other/5", got)
	}
}

// TestWorkloadKeptWhileSpecUnchanged: an update that leaves the spec (its
// generation), the queue, the priority and the user-affinity annotation as
// they were keeps the Workload; any of them changing builds a new one.
func TestWorkloadKeptWhileSpecUnchanged(t *testing.T) {
	s := newScenario(t)
	s.l.cfg.PriorityClasses = map[string]int32{"high": 1000}
	workload := func() *queues.Workload { return s.l.jobs["uid-a"].W }
	s.step([]string{"create", "a"})
	s.step([]string{"pass"})
	created := workload()
	s.step([]string{"landed", "a"})
	admitted := workload()
	if admitted == created {
		t.Fatal("the admission changed the spec, but the Workload was kept")
	}
	s.step([]string{"running", "a"})
	s.update("a", func(m map[string]any) {
		_ = unstructured.SetNestedField(m, "x", "metadata", "labels", "unrelated")
	})
	if workload() != admitted {
		t.Fatal("a status or unrelated label update built a new Workload")
	}
	for what, change := range map[string]func(map[string]any){
		"queue label": func(m map[string]any) {
			_ = unstructured.SetNestedField(m, "r", "metadata", "labels", queues.LabelQueue)
		},
		"user affinity": func(m map[string]any) {
			_ = unstructured.SetNestedField(m, `{"main":[]}`, "metadata", "annotations", queues.AnnotationUserAffinity)
		},
		"priority class": func(m map[string]any) {
			_ = unstructured.SetNestedField(m, "high", "metadata", "labels", queues.LabelKueuePriorityClass)
		},
		"spec": func(m map[string]any) {
			_ = unstructured.SetNestedField(m, int64(3), "spec", "backoffLimit")
		},
	} {
		before := workload()
		s.update("a", change)
		if workload() == before {
			t.Errorf("a change of its %s kept the Workload", what)
		}
	}
	if got := workload(); got.Queue != "r" || got.Priority != 1000 {
		t.Errorf("Workload queue %q priority %d, want r and 1000", got.Queue, got.Priority)
	}
}

// TestEndedEntryForgetsItsSpec: a workload that finishes with no pod left
// keeps who it is and nothing of what it asked for; seen again not
// finished, it is built again from its object.
func TestEndedEntryForgetsItsSpec(t *testing.T) {
	s := newScenario(t)
	e := func() *entry { return s.l.jobs["uid-a"] }
	s.step([]string{"create", "a", "cpu=2"})
	s.step([]string{"pass"})
	s.step([]string{"landed", "a"})
	s.step([]string{"running", "a"})
	if ps := e().W.PodSets; len(ps) != 1 {
		t.Fatalf("running: %d pod sets, want 1", len(ps))
	}
	s.step([]string{"finish", "a"})
	// Its status still says it started: its pods may have run, and none
	// is left.
	s.update("a", func(m map[string]any) {
		_ = unstructured.SetNestedField(m, "2026-01-02T03:04:05Z", "status", "startTime")
	})
	w := e().W
	if e().Phase() != machine.Finished || len(w.PodSets) != 0 || len(w.Total()) != 0 || e().seen.W != w {
		t.Fatalf("finished: phase %v, pod sets %v, total %v, seen the same Workload %t", e().Phase(), w.PodSets, w.Total(), e().seen.W == w)
	}
	if w.Name != "a" || w.UID != "uid-a" || w.Queue != "q" {
		t.Errorf("finished: kept %s/%s of queue %q, want a/uid-a of q", w.Name, w.UID, w.Queue)
	}
	// Not a batch/v1 Job's way, but a kind's object may say so.
	s.step([]string{"stopped", "a"})
	if ps := e().W.PodSets; e().Phase() == machine.Finished || len(ps) != 1 || len(ps[0].Requests) == 0 {
		t.Errorf("seen not finished: phase %v, pod sets %v, want the one built again", e().Phase(), ps)
	}
}
