package queues

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// inLQ puts w in LocalQueue lq of its namespace.
func inLQ(w *Workload, lq string) *Workload { w.LocalQueue = lq; return w }

func TestStopOf(t *testing.T) {
	fls := []*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}
	cq := func(name, stop string) *ClusterQueue {
		return makeCQ(name).Stop(stop).Group(cpu).Flavor("on-demand", "cpu=10").Obj()
	}
	cases := []struct {
		name     string
		cqStop   string
		lqStops  map[string]string
		w        *Workload
		want     Stop
		wantHeld string
	}{
		{name: "no policy", cqStop: "None", w: makeWL("j", "a", 1).Obj()},
		{name: "a ClusterQueue on hold", cqStop: StopHold, w: makeWL("j", "a", 1).Obj(),
			want: Stop{Policy: StopHold, Reason: ReasonClusterQueueStopped, Queue: "a"}, wantHeld: "ClusterQueue a is on hold (stopPolicy Hold)"},
		{name: "a draining ClusterQueue", cqStop: StopHoldAndDrain, w: inLQ(makeWL("j", "a", 1).Obj(), "main"), lqStops: map[string]string{"ns/main": StopHold},
			want: Stop{Policy: StopHoldAndDrain, Reason: ReasonClusterQueueStopped, Queue: "a"}},
		{name: "a LocalQueue on hold", cqStop: "None", w: inLQ(makeWL("j", "a", 1).Obj(), "main"), lqStops: map[string]string{"ns/main": StopHold},
			want: Stop{Policy: StopHold, Reason: ReasonLocalQueueStopped, Queue: "ns/main"}, wantHeld: "LocalQueue ns/main is on hold (stopPolicy Hold)"},
		{name: "a draining LocalQueue wins over a ClusterQueue on hold", cqStop: StopHold, w: inLQ(makeWL("j", "a", 1).Obj(), "main"),
			lqStops: map[string]string{"ns/main": StopHoldAndDrain}, want: Stop{Policy: StopHoldAndDrain, Reason: ReasonLocalQueueStopped, Queue: "ns/main"}},
		{name: "another LocalQueue of the namespace", cqStop: "None", w: inLQ(makeWL("j", "a", 1).Obj(), "other"), lqStops: map[string]string{"ns/main": StopHoldAndDrain}},
		{name: "a LocalQueue of that name in another namespace", cqStop: "None", w: inLQ(makeWL("j", "a", 1).NS("other").Obj(), "main"),
			lqStops: map[string]string{"ns/main": StopHoldAndDrain}},
		{name: "no LocalQueue: queued through the namespace's annotation", cqStop: "None", w: makeWL("j", "a", 1).Obj(), lqStops: map[string]string{"ns/main": StopHoldAndDrain}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := makeConfig(fls, cq("a", tc.cqStop))
			cfg.LocalQueueStops = tc.lqStops
			got := cfg.StopOf(tc.w)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("StopOf (-want +got):\n%s", diff)
			}
			if tc.wantHeld != "" && got.Held().Message() != tc.wantHeld {
				t.Errorf("held: %q, want %q", got.Held().Message(), tc.wantHeld)
			}
			drained, _ := cfg.Drain([]*Workload{tc.w})
			if want := tc.want.Policy == StopHoldAndDrain; (len(drained) == 1) != want || cfg.Drains() != (tc.cqStop == StopHoldAndDrain || hasDrain(tc.lqStops)) {
				t.Errorf("Drain %v, Drains %v; want drained %v", drained, cfg.Drains(), want)
			}
		})
	}
}

func hasDrain(stops map[string]string) bool {
	for _, p := range stops {
		if p == StopHoldAndDrain {
			return true
		}
	}
	return false
}

// TestDecideHeldLocalQueue: a pass admits nothing from a LocalQueue on
// hold, and the other workloads of its ClusterQueue as usual, StrictFIFO
// or not.
func TestDecideHeldLocalQueue(t *testing.T) {
	fls := []*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}
	for _, strict := range []bool{false, true} {
		b := makeCQ("a")
		if strict {
			b = b.Strict()
		}
		cfg := makeConfig(fls, b.Group(cpu).Flavor("on-demand", "cpu=10").Obj())
		cfg.LocalQueueStops = map[string]string{"ns/held": StopHold}
		snap := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}})
		waits := map[string]string{}
		got := admittedNames(Decide(snap, seqs(inLQ(makeWL("j1", "a", 1).Req(cpu, "1").Obj(), "held"), makeWL("j2", "a", 2).Req(cpu, "1").Obj()),
			func(w *Workload, v Verdict, _ int) {
				if v.Kind != Fits {
					waits[w.Name] = v.Code
				}
			}).Admissions)
		if diff := cmp.Diff([]string{"j2@on-demand"}, got); diff != "" {
			t.Errorf("strict %v: admitted (-want +got):\n%s", strict, diff)
		}
		if diff := cmp.Diff(map[string]string{"j1": "held"}, waits); diff != "" {
			t.Errorf("strict %v: verdicts (-want +got):\n%s", strict, diff)
		}
	}
}
