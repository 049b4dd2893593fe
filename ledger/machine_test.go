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
	"tally.dev/tally/queues"
)

// reactWorkload is a one-pod workload of queue q asking for cpu cores.
func reactWorkload(cpu int64) *queues.Workload {
	return (&queues.Workload{Namespace: "ns", Name: "j", UID: "uid-j", Queue: "q",
		PodSets: []queues.PodSet{{Name: "main", Count: 1, Requests: flavors.Resources{corev1.ResourceCPU: flavors.Amount(cpu * 1000)}}}}).Seal()
}

func cpuIn(flavor string, cpu int64) queues.Usage {
	return queues.Usage{{Flavor: flavor, Resource: corev1.ResourceCPU}: flavors.Amount(cpu * 1000)}
}

func effectsString(fx []effect) string {
	s := make([]string, len(fx))
	for i, f := range fx {
		s[i] = f.String()
	}
	return strings.Join(s, "; ")
}

// TestReact folds each kind of informer view into an entry in each phase.
func TestReact(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	w2, w3 := reactWorkload(2), reactWorkload(3)
	u2 := cpuIn("default", 2)

	// The entries, by phase.
	queued := entry{phase: pending, inTree: true, w: w2}
	parked := entry{phase: pending, w: w2}
	claimant := entry{phase: pending, w: w2, claim: &claim{usage: u2}}
	assumedE := entry{phase: assumed, w: w2, charged: u2, chargedQueue: "q"}
	capturingE := entry{phase: capturing, w: w2, charged: u2, chargedQueue: "q"}
	captured := entry{phase: unrecorded, captured: true, w: w2, charged: u2, chargedQueue: "q"}
	admittedE := entry{phase: admitted, w: w2, charged: u2, chargedQueue: "q"}
	preempted := entry{phase: evicting, w: w2, charged: queues.Usage{}, chargedQueue: "q", evictedAt: now.Add(-time.Second)}
	suspendedByOwner := entry{phase: evicting, w: w2, charged: u2, chargedQueue: "q"}
	never := entry{phase: inadmissible, w: w2}
	done := entry{phase: finished, w: w2, labelState: "finished"}
	doneUnlabelled := entry{phase: finished, w: w2}

	// The views.
	fin := observed{w: w2, finished: true}
	runs := observed{w: w2, usage: u2}
	runsElsewhere := observed{w: w2, usage: cpuIn("spot", 2)}
	waits := observed{w: w2, suspended: true}
	waitsBigger := observed{w: w3, suspended: true}
	podsRun := observed{w: w2, suspended: true, running: true}
	stopped := observed{w: w2, suspended: true, stoppedSince: now}
	stoppedBefore := observed{w: w2, suspended: true, stoppedSince: now.Add(-time.Minute)}
	restore := observed{w: w2, suspended: true, restore: true}
	stoppedToRestore := observed{w: w2, suspended: true, stoppedSince: now, restore: true}
	// Views with pods its admission labelled still live, and one of a
	// workload admitted before (its flavors annotation: usage).
	finPods := observed{w: w2, finished: true, pods: 2, usage: u2}
	stoppedPods := observed{w: w2, suspended: true, stoppedSince: now.Add(-time.Minute), pods: 1, usage: u2}
	stoppedWasAdmitted := observed{w: w2, suspended: true, stoppedSince: now.Add(-time.Minute), usage: u2}
	doneHolding := entry{phase: finished, w: w2, labelState: "finished", charged: u2, chargedQueue: "q"}

	const (
		freeAndQueue = "release q cpu=2 in flavor default; relabel; freed; join-tree; arrive"
	)
	for _, tc := range []struct {
		name    string
		e       entry
		o       observed
		want    phase
		inTree  bool
		charged string // describeUsage of the new charge, "nil" for none
		fx      string
	}{
		{"pending waits", queued, waits, pending, true, "nil", "leave-tree; join-tree; arrive"},
		{"pending runs", queued, runs, admitted, false, "cpu=2 in flavor default", "leave-tree; charge q cpu=2 in flavor default"},
		{"pending finishes", queued, fin, finished, false, "nil", "leave-tree; freed; relabel"},
		{"pending to restore", queued, restore, pending, true, "nil", "relabel; leave-tree; join-tree; arrive"},
		{"parked after a conflict: its next version queues", parked, waits, pending, true, "nil", "join-tree; arrive"},
		{"preemptor waits for its victims", claimant, waits, pending, false, "nil", ""},
		{"preemptor un-suspended by its owner", claimant, runs, admitted, false, "cpu=2 in flavor default", "charge q cpu=2 in flavor default"},
		{"assumed: write in flight", assumedE, waits, assumed, false, "cpu=2 in flavor default", ""},
		{"assumed: write landed", assumedE, runs, admitted, false, "cpu=2 in flavor default", ""},
		{"assumed: landed in another flavor", assumedE, runsElsewhere, admitted, false, "cpu=2 in flavor spot",
			"release q cpu=2 in flavor default; charge q cpu=2 in flavor spot"},
		{"assumed: finished", assumedE, fin, finished, false, "nil", "release q cpu=2 in flavor default finished; freed; relabel"},
		{"capturing: write in flight", capturingE, waits, capturing, false, "cpu=2 in flavor default", ""},
		{"capturing: landed, fits", capturingE, runs, admitted, false, "cpu=2 in flavor default", ""},
		{"captured: seen", captured, runs, admitted, false, "cpu=2 in flavor default", ""},
		{"admitted runs on", admittedE, runs, admitted, false, "cpu=2 in flavor default", ""},
		{"admitted: suspended, pods run", admittedE, podsRun, evicting, false, "cpu=2 in flavor default", ""},
		{"admitted: suspended and stopped", admittedE, stopped, pending, true, "nil", freeAndQueue},
		{"admitted: stopped, affinity to restore", admittedE, stoppedToRestore, pending, true, "nil", freeAndQueue},
		{"admitted: finished", admittedE, fin, finished, false, "nil", "release q cpu=2 in flavor default finished; freed; relabel"},
		{"preempted: pods run", preempted, podsRun, evicting, false, "-", ""},
		{"preempted: stale view", preempted, runs, evicting, false, "-", ""},
		{"preempted: no pods, stop unseen", preempted, waits, evicting, false, "-", "recheck after 2s"},
		{"preempted: stopped before the eviction", preempted, stoppedBefore, evicting, false, "-", "recheck after 2s"},
		{"preempted: stopped since", preempted, stopped, pending, true, "nil",
			"release q nothing; relabel; freed; join-tree; arrive"},
		{"preempted: finished", preempted, fin, finished, false, "nil", "release q nothing finished; freed; relabel"},
		{"suspended by its owner: stopped", suspendedByOwner, waits, pending, true, "nil", freeAndQueue},
		{"suspended by its owner: un-suspended again", suspendedByOwner, runs, evicting, false, "cpu=2 in flavor default", ""},
		{"inadmissible: same shape", never, waits, inadmissible, false, "nil", ""},
		{"inadmissible: to restore", never, restore, inadmissible, false, "nil", "relabel"},
		{"inadmissible: reshaped", never, waitsBigger, pending, true, "nil", "join-tree; arrive"},
		{"inadmissible: runs", never, runs, admitted, false, "cpu=2 in flavor default", "charge q cpu=2 in flavor default"},
		{"finished again", done, fin, finished, false, "nil", "freed"},
		{"admitted: finished, workers run", admittedE, finPods, finished, false, "cpu=2 in flavor default", "relabel"},
		{"finished holding: workers run on", doneHolding, finPods, finished, false, "cpu=2 in flavor default", ""},
		{"finished holding: pods gone", doneHolding, fin, finished, false, "nil", "release q cpu=2 in flavor default finished; freed"},
		{"finished, pods seen after a restart", done, finPods, finished, false, "cpu=2 in flavor default", "charge q cpu=2 in flavor default"},
		{"admitted: stopped, counted pods run", admittedE, stoppedPods, evicting, false, "cpu=2 in flavor default", ""},
		{"preempted: counted pods run", preempted, stoppedPods, evicting, false, "-", ""},
		{"suspended, pods seen after a restart", queued, stoppedPods, evicting, false, "cpu=2 in flavor default",
			"leave-tree; charge q cpu=2 in flavor default"},
		{"suspended after a restart, pods gone", queued, stoppedWasAdmitted, pending, true, "nil", "leave-tree; join-tree; arrive"},
		{"finished, label not yet written", doneUnlabelled, fin, finished, false, "nil", "freed; relabel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", tc.e)
			got, fx := react(tc.e, tc.o, now, nil)
			if after := fmt.Sprintf("%+v", tc.e); after != before {
				t.Errorf("react changed its argument")
			}
			charged := "nil"
			if got.charged != nil {
				charged = cmpOr(describeUsage(got.charged), "-")
			}
			if got.phase != tc.want || got.inTree != tc.inTree || charged != tc.charged {
				t.Errorf("got %s, in tree %v, charged %s; want %s, %v, %s", got.phase, got.inTree, charged, tc.want, tc.inTree, tc.charged)
			}
			if s := effectsString(fx); s != tc.fx {
				t.Errorf("effects\n got %s\nwant %s", s, tc.fx)
			}
			if got.w != tc.o.w {
				t.Errorf("the entry keeps an old view of the workload")
			}
			if got.charged == nil && got.chargedQueue != "" {
				t.Errorf("uncharged, but charged to %q", got.chargedQueue)
			}
		})
	}
}

func TestReactAdmittedAt(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := reactWorkload(1)
	e, _ := react(entry{phase: assumed, w: w}, observed{w: w, usage: cpuIn("default", 1), admittedAt: at}, at, nil)
	if !e.admittedAt.Equal(at) {
		t.Errorf("admittedAt %v, want %v", e.admittedAt, at)
	}
	e, _ = react(e, observed{w: w, usage: cpuIn("default", 1)}, at.Add(time.Hour), nil)
	if !e.admittedAt.Equal(at) {
		t.Errorf("a view without the annotation changed admittedAt to %v", e.admittedAt)
	}
}

// TestRecheckFold: an evicted workload whose stop went unseen is freed
// when its recheck comes, and nothing else is.
func TestRecheckFold(t *testing.T) {
	w := reactWorkload(2)
	for _, tc := range []struct {
		name string
		e    entry
		want phase
		fx   string
	}{
		{"evicting", entry{phase: evicting, w: w, charged: cpuIn("default", 2), chargedQueue: "q", evictedAt: time.Now()},
			pending, "release q cpu=2 in flavor default; relabel; freed; join-tree"},
		{"admitted since", entry{phase: admitted, w: w, charged: cpuIn("default", 2), chargedQueue: "q"}, admitted, ""},
		{"freed since", entry{phase: pending, w: w, inTree: true}, pending, ""},
		{"evicting, counted pods run", entry{phase: evicting, w: w, charged: cpuIn("default", 2), chargedQueue: "q",
			evictedAt: time.Now(), seen: observed{w: w, suspended: true, pods: 1}}, evicting, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fx := recheckFold(tc.e, nil)
			if got.phase != tc.want || effectsString(fx) != tc.fx {
				t.Errorf("got %s, effects %q; want %s, %q", got.phase, effectsString(fx), tc.want, tc.fx)
			}
			if got.phase == pending && (!got.inTree || got.charged != nil || !got.evictedAt.IsZero()) {
				t.Errorf("freed, but in tree %v, charged %v, evicted at %v", got.inTree, got.charged, got.evictedAt)
			}
		})
	}
}

// TestApplyLeavesTheTreeByTheOldVersion: a queued workload whose priority
// changes leaves its tree by the version it joined with, so the tree
// holds it once, by its new priority.
func TestApplyLeavesTheTreeByTheOldVersion(t *testing.T) {
	l := New(nil, nil, queues.NewStore(nil), &scenarioRecorder{}, logr.Discard(), Options{})
	other := &entry{phase: pending, w: reactWorkload(1)}
	other.w.UID, other.w.Priority = "uid-other", 5
	l.entree(other)
	e := &entry{phase: pending, w: reactWorkload(2)}
	l.entree(e)
	raised := *reactWorkload(2)
	raised.Priority = 10
	next, fx := react(*e, observed{w: &raised, suspended: true}, time.Now(), nil)
	l.apply(e, next, fx)
	var order []string
	l.pending["q"].Ascend(func(x *entry) bool { order = append(order, fmt.Sprintf("%s/%d", x.w.UID, x.w.Priority)); return true })
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
	workload := func() *queues.Workload { return s.l.jobs["uid-a"].w }
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
