package machine

import (
	"cmp"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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

func effectsString(fx []Effect) string {
	s := make([]string, len(fx))
	for i, f := range fx {
		s[i] = f.String()
	}
	return strings.Join(s, "; ")
}

// TestReact folds each kind of informer view into an Entry in each phase.
func TestReact(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	w2, w3 := reactWorkload(2), reactWorkload(3)
	// twoPods is w2 with a second pod, since scaled down to w2's one.
	twoPods := (&queues.Workload{Namespace: "ns", Name: "j", UID: "uid-j", Queue: "q",
		PodSets: []queues.PodSet{{Name: "main", Count: 2, Requests: w2.PodSets[0].Requests}}}).Seal()
	u2 := cpuIn("default", 2)

	// The entries, by phase.
	queued := Entry{phase: Pending, InTree: true, W: w2}
	parked := Entry{phase: Pending, W: w2}
	claimant := Entry{phase: Pending, W: w2, Claim: &Claim{Usage: u2}}
	assumedE := Entry{phase: Assumed, W: w2, Charged: u2, ChargedQueue: "q"}
	capturingE := Entry{phase: Capturing, W: w2, Charged: u2, ChargedQueue: "q"}
	captured := Entry{phase: Unrecorded, Captured: true, W: w2, Charged: u2, ChargedQueue: "q"}
	admittedE := Entry{phase: Admitted, W: w2, Charged: u2, ChargedQueue: "q"}
	preempted := Entry{phase: Evicting, W: w2, Charged: queues.Usage{}, ChargedQueue: "q", EvictedAt: now.Add(-time.Second)}
	suspendedByOwner := Entry{phase: Evicting, W: w2, Charged: u2, ChargedQueue: "q"}
	never := Entry{phase: Inadmissible, W: w2}
	done := Entry{phase: Finished, W: w2, LabelState: "finished"}
	doneUnlabelled := Entry{phase: Finished, W: w2}

	// The views.
	fin := Observed{W: w2, Finished: true}
	runs := Observed{W: w2, Usage: u2}
	runsElsewhere := Observed{W: w2, Usage: cpuIn("spot", 2)}
	waits := Observed{W: w2, Suspended: true}
	waitsBigger := Observed{W: w3, Suspended: true}
	podsRun := Observed{W: w2, Suspended: true, Running: true}
	stopped := Observed{W: w2, Suspended: true, StoppedSince: now}
	stoppedBefore := Observed{W: w2, Suspended: true, StoppedSince: now.Add(-time.Minute)}
	restore := Observed{W: w2, Suspended: true, Restore: true}
	stoppedToRestore := Observed{W: w2, Suspended: true, StoppedSince: now, Restore: true}
	// Views with pods its admission labelled still live, and one of a
	// workload admitted before (its flavors annotation: usage).
	finPods := Observed{W: w2, Finished: true, Pods: 2, Usage: u2}
	stoppedPods := Observed{W: w2, Suspended: true, StoppedSince: now.Add(-time.Minute), Pods: 1, Usage: u2}
	stoppedWasAdmitted := Observed{W: w2, Suspended: true, StoppedSince: now.Add(-time.Minute), Usage: u2}
	doneHolding := Entry{phase: Finished, W: w2, LabelState: "finished", Charged: u2, ChargedQueue: "q"}

	const (
		freeAndQueue = "release q cpu=2 in flavor default; pass; relabel; freed; join-tree; arrive; requeued"
	)
	for _, tc := range []struct {
		name    string
		e       Entry
		o       Observed
		want    Phase
		inTree  bool
		charged string // Describe of the new charge, "nil" for none
		fx      string
	}{
		{"pending waits", queued, waits, Pending, true, "nil", "leave-tree; join-tree; arrive"},
		{"admitted runs fewer pods", Entry{phase: Admitted, W: twoPods, Charged: u2, ChargedQueue: "q"}, runs, Admitted, false, "cpu=2 in flavor default", "shrunk"},
		{"admitted runs on", admittedE, runs, Admitted, false, "cpu=2 in flavor default", ""},
		{"pending runs", queued, runs, Admitted, false, "cpu=2 in flavor default", "leave-tree; started; charge q cpu=2 in flavor default; pass"},
		{"pending finishes", queued, fin, Finished, false, "nil", "leave-tree; freed; relabel"},
		{"pending to restore", queued, restore, Pending, true, "nil", "relabel; leave-tree; join-tree; arrive"},
		{"parked after a conflict: its next version queues", parked, waits, Pending, true, "nil", "join-tree; arrive"},
		{"preemptor waits for its victims", claimant, waits, Pending, false, "nil", ""},
		{"preemptor un-suspended by its owner", claimant, runs, Admitted, false, "cpu=2 in flavor default", "started; charge q cpu=2 in flavor default; pass"},
		{"assumed: write in flight", assumedE, waits, Assumed, false, "cpu=2 in flavor default", ""},
		{"assumed: write landed", assumedE, runs, Admitted, false, "cpu=2 in flavor default", "started"},
		{"assumed: landed in another flavor", assumedE, runsElsewhere, Admitted, false, "cpu=2 in flavor spot",
			"started; release q cpu=2 in flavor default; pass; charge q cpu=2 in flavor spot; pass"},
		{"assumed: finished", assumedE, fin, Finished, false, "nil", "release q cpu=2 in flavor default finished; pass; freed; relabel"},
		{"capturing: write in flight", capturingE, waits, Capturing, false, "cpu=2 in flavor default", ""},
		{"capturing: landed, fits", capturingE, runs, Admitted, false, "cpu=2 in flavor default", "started"},
		{"captured: seen", captured, runs, Admitted, false, "cpu=2 in flavor default", "started"},
		{"admitted runs on", admittedE, runs, Admitted, false, "cpu=2 in flavor default", ""},
		{"admitted: suspended, pods run", admittedE, podsRun, Evicting, false, "cpu=2 in flavor default", ""},
		{"admitted: suspended and stopped", admittedE, stopped, Pending, true, "nil", freeAndQueue},
		{"admitted: stopped, affinity to restore", admittedE, stoppedToRestore, Pending, true, "nil", freeAndQueue},
		{"admitted: finished", admittedE, fin, Finished, false, "nil", "release q cpu=2 in flavor default finished; pass; freed; relabel"},
		{"preempted: pods run", preempted, podsRun, Evicting, false, "-", ""},
		{"preempted: stale view", preempted, runs, Evicting, false, "-", ""},
		{"preempted: no pods, stop unseen", preempted, waits, Evicting, false, "-", "recheck after 2s"},
		{"preempted: stopped before the eviction", preempted, stoppedBefore, Evicting, false, "-", "recheck after 2s"},
		{"preempted: stopped since", preempted, stopped, Pending, true, "nil",
			"release q nothing; pass; relabel; freed; join-tree; arrive; requeued"},
		{"preempted: finished", preempted, fin, Finished, false, "nil", "release q nothing finished; pass; freed; relabel"},
		{"suspended by its owner: stopped", suspendedByOwner, waits, Pending, true, "nil", freeAndQueue},
		{"suspended by its owner: un-suspended again", suspendedByOwner, runs, Evicting, false, "cpu=2 in flavor default", ""},
		{"inadmissible: same shape", never, waits, Inadmissible, false, "nil", ""},
		{"inadmissible: to restore", never, restore, Inadmissible, false, "nil", "relabel"},
		{"inadmissible: reshaped", never, waitsBigger, Pending, true, "nil", "join-tree; arrive"},
		{"inadmissible: runs", never, runs, Admitted, false, "cpu=2 in flavor default", "started; charge q cpu=2 in flavor default; pass"},
		{"finished again", done, fin, Finished, false, "nil", "freed"},
		{"admitted: finished, workers run", admittedE, finPods, Finished, false, "cpu=2 in flavor default", "relabel"},
		{"finished holding: workers run on", doneHolding, finPods, Finished, false, "cpu=2 in flavor default", ""},
		{"finished holding: pods gone", doneHolding, fin, Finished, false, "nil", "release q cpu=2 in flavor default finished; pass; freed"},
		{"finished, pods seen after a restart", done, finPods, Finished, false, "cpu=2 in flavor default", "charge q cpu=2 in flavor default; pass"},
		{"admitted: stopped, counted pods run", admittedE, stoppedPods, Evicting, false, "cpu=2 in flavor default", ""},
		{"preempted: counted pods run", preempted, stoppedPods, Evicting, false, "-", ""},
		{"suspended, pods seen after a restart", queued, stoppedPods, Evicting, false, "cpu=2 in flavor default",
			"leave-tree; charge q cpu=2 in flavor default; pass"},
		{"suspended after a restart, pods gone", queued, stoppedWasAdmitted, Pending, true, "nil", "leave-tree; join-tree; arrive"},
		{"finished, label not yet written", doneUnlabelled, fin, Finished, false, "nil", "freed; relabel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", tc.e)
			got, fx := React(tc.e, tc.o, now, nil)
			if after := fmt.Sprintf("%+v", tc.e); after != before {
				t.Errorf("react changed its argument")
			}
			charged := "nil"
			if got.Charged != nil {
				charged = cmp.Or(got.Charged.Describe(), "-")
			}
			if got.Phase() != tc.want || got.InTree != tc.inTree || charged != tc.charged {
				t.Errorf("got %s, in tree %v, charged %s; want %s, %v, %s", got.Phase(), got.InTree, charged, tc.want, tc.inTree, tc.charged)
			}
			if s := effectsString(fx); s != tc.fx {
				t.Errorf("effects\n got %s\nwant %s", s, tc.fx)
			}
			if got.W != tc.o.W {
				t.Errorf("the Entry keeps an old view of the workload")
			}
			if got.Charged == nil && got.ChargedQueue != "" {
				t.Errorf("uncharged, but charged to %q", got.ChargedQueue)
			}
		})
	}
}

func TestReactAdmittedAt(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := reactWorkload(1)
	e, _ := React(Entry{phase: Assumed, W: w}, Observed{W: w, Usage: cpuIn("default", 1), AdmittedAt: at}, at, nil)
	if !e.AdmittedAt.Equal(at) {
		t.Errorf("admittedAt %v, want %v", e.AdmittedAt, at)
	}
	e, _ = React(e, Observed{W: w, Usage: cpuIn("default", 1)}, at.Add(time.Hour), nil)
	if !e.AdmittedAt.Equal(at) {
		t.Errorf("a view without the annotation changed admittedAt to %v", e.AdmittedAt)
	}
}

// TestRecheckFold: an evicted workload whose stop went unseen is freed
// when its recheck comes, and nothing else is.
func TestRecheckFold(t *testing.T) {
	w := reactWorkload(2)
	for _, tc := range []struct {
		name string
		e    Entry
		last Observed
		want Phase
		fx   string
	}{
		{"evicting", Entry{phase: Evicting, W: w, Charged: cpuIn("default", 2), ChargedQueue: "q", EvictedAt: time.Now()}, Observed{},
			Pending, "release q cpu=2 in flavor default; pass; relabel; freed; join-tree; requeued"},
		{"admitted since", Entry{phase: Admitted, W: w, Charged: cpuIn("default", 2), ChargedQueue: "q"}, Observed{}, Admitted, ""},
		{"freed since", Entry{phase: Pending, W: w, InTree: true}, Observed{}, Pending, ""},
		{"evicting, counted pods run", Entry{phase: Evicting, W: w, Charged: cpuIn("default", 2), ChargedQueue: "q",
			EvictedAt: time.Now()}, Observed{W: w, Suspended: true, Pods: 1}, Evicting, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fx := Recheck(tc.last)(tc.e, nil)
			if got.Phase() != tc.want || effectsString(fx) != tc.fx {
				t.Errorf("got %s, effects %q; want %s, %q", got.Phase(), effectsString(fx), tc.want, tc.fx)
			}
			if got.Phase() == Pending && (!got.InTree || got.Charged != nil || !got.EvictedAt.IsZero()) {
				t.Errorf("freed, but in tree %v, charged %v, evicted at %v", got.InTree, got.Charged, got.EvictedAt)
			}
		})
	}
}

// TestReactBackoff: a workload evicted for pods that were not ready waits
// out of its queue until its backoff ends, and is set aside once it gave
// up.
func TestReactBackoff(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	w := reactWorkload(2)
	for _, tc := range []struct {
		name   string
		e      Entry
		o      Observed
		want   Phase
		inTree bool
		fx     string
	}{
		{"backing off", Entry{phase: Pending, W: w}, Observed{W: w, Suspended: true, RequeueAt: now.Add(time.Minute)},
			Pending, false, "fold again after 1m0s"},
		{"backoff over", Entry{phase: Pending, W: w}, Observed{W: w, Suspended: true, RequeueAt: now},
			Pending, true, "join-tree; arrive"},
		{"gave up", Entry{phase: Pending, W: w, InTree: true}, Observed{W: w, Suspended: true, GaveUp: true},
			Inadmissible, false, "leave-tree; relabel"},
		{"gave up, labelled", Entry{phase: Inadmissible, W: w, LabelState: "inadmissible"}, Observed{W: w, Suspended: true, GaveUp: true},
			Inadmissible, false, ""},
		{"gave up, pods still going", Entry{phase: Evicting, W: w, Charged: cpuIn("default", 2), ChargedQueue: "q"},
			Observed{W: w, Suspended: true, GaveUp: true, Pods: 1}, Evicting, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fx := React(tc.e, tc.o, now, nil)
			if got.Phase() != tc.want || got.InTree != tc.inTree || effectsString(fx) != tc.fx {
				t.Errorf("got %s in tree %v, effects %q; want %s %v, %q", got.Phase(), got.InTree, effectsString(fx), tc.want, tc.inTree, tc.fx)
			}
		})
	}
}

// TestPhasePredicates: a workload waits for admission only while pending
// or inadmissible, and never while a write of tally's is in flight.
func TestPhasePredicates(t *testing.T) {
	for p := range Phase(len(phaseNames)) {
		want := p == Pending || p == Inadmissible
		if p.Waiting() != want {
			t.Errorf("%s.Waiting() = %v, want %v", p, p.Waiting(), want)
		}
		if p.Waiting() && p.Writing() {
			t.Errorf("%s both waits and writes", p)
		}
	}
}
