package machine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/queues"
)

// TestSteps runs each of the ledger's own transitions from the phases it
// meets, and from one it must leave alone.
func TestSteps(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	w := reactWorkload(2)
	u2, u1 := cpuIn("default", 2), cpuIn("default", 1)
	queued := Entry{phase: Pending, InTree: true, W: w}
	assumed := Entry{phase: Assumed, W: w, Charged: u2, ChargedQueue: "q"}
	admitted := Entry{phase: Admitted, W: w, Charged: u2, ChargedQueue: "q"}
	evicting := Entry{phase: Evicting, W: w, Charged: u1, ChargedQueue: "q", EvictedAt: now}
	capturing := Entry{phase: Capturing, W: w, Charged: u2, ChargedQueue: "q"}
	capturingUncharged := Entry{phase: Capturing, W: w}
	claimant := Entry{phase: Pending, W: w, Claim: &Claim{Victims: map[types.UID]bool{"v1": true, "v2": true}, Usage: u2}}
	lastVictim := Entry{phase: Pending, W: w, Claim: &Claim{Victims: map[types.UID]bool{"v2": true}, Usage: u2}}
	for _, tc := range []struct {
		name    string
		e       Entry
		step    Step
		want    Phase
		charged string
		fx      string
	}{
		{"reject", queued, Reject, Inadmissible, "-", "leave-tree; relabel"},
		{"reject, already labelled", Entry{phase: Pending, W: w, LabelState: "inadmissible"}, Reject, Inadmissible, "-", ""},
		{"assume", queued, Assume("q", u2), Assumed, "cpu=2 in flavor default", "leave-tree; charge q cpu=2 in flavor default; pass"},
		{"rollback, rejoin", assumed, Rollback(true), Pending, "-", "release q cpu=2 in flavor default; pass; join-tree"},
		{"rollback after a conflict", assumed, Rollback(false), Pending, "-", "release q cpu=2 in flavor default; pass"},
		{"rollback of one no longer assumed", admitted, Rollback(true), Admitted, "cpu=2 in flavor default", ""},
		{"evict", admitted, Evict(u1, now), Evicting, "cpu=1 in flavor default", "yield q cpu=1 in flavor default"},
		{"eviction failed", evicting, EvictionFailed(u1), Admitted, "cpu=2 in flavor default", "unyield q cpu=1 in flavor default; freed"},
		{"requeue", admitted, Requeue(now), Evicting, "cpu=2 in flavor default", ""},
		{"requeue failed", Entry{phase: Evicting, W: w, Charged: u2, ChargedQueue: "q"}, RequeueFailed, Admitted, "cpu=2 in flavor default", ""},
		{"requeue failed, since gone", queued, RequeueFailed, Pending, "-", ""},
		{"forget, pods live", admitted, Forget(true), Finished, "cpu=2 in flavor default", ""},
		{"forget, no pods", admitted, Forget(false), Admitted, "-", "release q cpu=2 in flavor default; pass; freed"},
		{"forget a queued one", queued, Forget(true), Pending, "-", "leave-tree; freed"},
		{"capture, fits", Entry{phase: Unrecorded, W: w}, Capture("q", u2), Capturing, "cpu=2 in flavor default", "charge q cpu=2 in flavor default; pass"},
		{"capture, does not fit", Entry{phase: Unrecorded, W: w}, Capture("q", nil), Capturing, "-", ""},
		{"captured, fits", capturing, Captured(true, true, true), Unrecorded, "cpu=2 in flavor default", ""},
		{"captured, suspended", capturingUncharged, Captured(true, false, true), Pending, "-", "join-tree; pass; requeued"},
		{"captured, suspended, forgotten since", capturingUncharged, Captured(true, false, false), Unrecorded, "-", ""},
		{"adopt a ghost", Entry{phase: Finished, W: w}, Adopt("q", u2), Finished, "cpu=2 in flavor default", "charge q cpu=2 in flavor default; pass"},
		{"adopt one more pod of a ghost", Entry{phase: Finished, W: w, Charged: u1, ChargedQueue: "q"}, Adopt("q", u2), Finished, "cpu=3 in flavor default",
			"release q cpu=1 in flavor default; pass; charge q cpu=3 in flavor default; pass"},
		{"capture write failed", capturing, Captured(false, true, true), Unrecorded, "-", "release q cpu=2 in flavor default; pass"},
		{"rebuild inadmissible", Entry{phase: Inadmissible, W: w}, Rebuild(7, nil), Pending, "-", "join-tree"},
		{"rebuild, a claim waits", Entry{phase: Pending, W: w, Claim: &Claim{}}, Rebuild(7, nil), Pending, "-", ""},
		{"rebuild admitted", admitted, Rebuild(7, nil), Admitted, "cpu=2 in flavor default", ""},
		{"preempt", queued, Preempt(u2, []types.UID{"v1", "v2"}), Pending, "-", "leave-tree; reserve q cpu=2 in flavor default"},
		{"a victim of two gone", claimant, VictimGone("v1", true), Pending, "-", ""},
		{"the last victim gone", lastVictim, VictimGone("v2", true), Pending, "-", "unreserve q cpu=2 in flavor default; join-tree; try-first; pass"},
		{"the last victim gone, preemptor forgotten", lastVictim, VictimGone("v2", false), Pending, "-", "unreserve q cpu=2 in flavor default; pass"},
		{"a victim gone, no claim", queued, VictimGone("v2", true), Pending, "-", "join-tree; try-first; pass"},
		{"forget a preemptor", claimant, Forget(false), Pending, "-", "unreserve q cpu=2 in flavor default; freed"},
		{"grow", admitted, Grow(u1), Admitted, "cpu=3 in flavor default", "grew q cpu=1 in flavor default"},
		{"grow one not admitted", assumed, Grow(u1), Assumed, "cpu=2 in flavor default", ""},
		{"shrink", admitted, Shrink("q", u1), Admitted, "cpu=1 in flavor default", "shrank q cpu=1 in flavor default"},
		{"shrink, charged elsewhere since", admitted, Shrink("r", u1), Admitted, "cpu=2 in flavor default", ""},
		{"shrink, released since", queued, Shrink("q", u1), Pending, "-", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.e.Charged.Clone()
			got, fx := tc.step(tc.e, nil)
			charged := "-"
			if got.Charged != nil {
				charged = got.Charged.Describe()
			}
			if got.Phase() != tc.want || charged != tc.charged || effectsString(fx) != tc.fx {
				t.Errorf("got %s charged %s, effects %q; want %s charged %s, %q", got.Phase(), charged, effectsString(fx), tc.want, tc.charged, tc.fx)
			}
			if !tc.e.Charged.Equal(before) {
				t.Errorf("the step changed the entry it was given: charged %v, was %v", tc.e.Charged, before)
			}
			if want := has[JoinTree](fx) || tc.e.InTree && !has[LeaveTree](fx); got.InTree != want {
				t.Errorf("in tree %v after effects %q", got.InTree, effectsString(fx))
			}
		})
	}
	if got, _ := VictimGone("v1", true)(claimant, nil); len(got.Claim.Victims) != 1 || !got.Claim.Victims["v2"] || len(claimant.Claim.Victims) != 2 {
		t.Errorf("a victim gone: claim %v (the entry given has %v), want v2 alone and the given one untouched", got.Claim.Victims, claimant.Claim.Victims)
	}
	if got, _ := Preempt(u2, []types.UID{"v1"})(queued, nil); got.Claim == nil || !got.Claim.Victims["v1"] || !got.Claim.Usage.Equal(u2) {
		t.Errorf("preempt: claim %+v", got.Claim)
	}
	if got, _ := Rebuild(7, nil)(Entry{phase: Inadmissible, W: w}, nil); got.W == w || got.W.Priority != 7 || w.Priority == 7 {
		t.Errorf("rebuild: workload %p priority %d (was %p), want a copy at 7", got.W, got.W.Priority, w)
	}
	requeued := *w
	requeued.Evicted = w.Created.Add(time.Hour)
	creation := &queues.PodsReady{Timestamp: queues.CreationTimestamp}
	if got, _ := Rebuild(0, creation)(Entry{phase: Pending, W: requeued.Seal()}, nil); !got.W.QueueTime().Equal(w.Created) {
		t.Errorf("rebuild under timestamp Creation: ordered by %v, want its creation %v", got.W.QueueTime(), w.Created)
	}
	if got, _ := Rebuild(0, nil)(Entry{phase: Pending, W: creation.Order(requeued.Seal())}, nil); !got.W.QueueTime().Equal(requeued.Evicted) {
		t.Errorf("rebuild with waitForPodsReady off: ordered by %v, want its eviction %v", got.W.QueueTime(), requeued.Evicted)
	}
}

func has[T Effect](fx []Effect) bool {
	for _, f := range fx {
		if _, ok := f.(T); ok {
			return true
		}
	}
	return false
}
