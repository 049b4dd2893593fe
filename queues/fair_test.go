package queues

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

func TestShare(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f1", "tier", "1"), flavor("f2", "tier", "2")}
	three := func(weight int64) []*ClusterQueue {
		return []*ClusterQueue{
			makeCQ("a").Cohort("ml").Fair(weight).Group(cpu, mem).Flavor("f1", "cpu=10", "memory=10Gi").Flavor("f2", "cpu=10", "memory=10Gi").Obj(),
			makeCQ("b").Cohort("ml").Fair(1000).Group(cpu, mem).Flavor("f1", "cpu=10", "memory=10Gi").Obj(),
			makeCQ("c").Cohort("ml").Fair(1000).Group(cpu, mem).Flavor("f1", "cpu=10/-/5", "memory=10Gi").Obj(),
		}
	}
	cases := []struct {
		name   string
		weight int64
		usage  map[string]Usage
		want   int64
	}{
		{name: "idle", weight: 1000, want: 0},
		{name: "within nominal", weight: 1000, usage: usageOf("a:f1:cpu=10", "a:f2:cpu=10"), want: 0},
		// cpu lendable: f1 10+10+5, f2 10 = 35; 7 borrowed -> 200.
		{name: "borrowing one resource", weight: 1000, usage: usageOf("a:f1:cpu=17"), want: 200},
		{name: "borrowing is summed over flavors", weight: 1000, usage: usageOf("a:f1:cpu=12", "a:f2:cpu=15"), want: 200},
		// memory lendable 40Gi; 20Gi borrowed -> 500, the dominant one.
		{name: "the dominant resource decides", weight: 1000, usage: usageOf("a:f1:cpu=17", "a:f1:memory=30Gi"), want: 500},
		{name: "weight 2 halves the share", weight: 2000, usage: usageOf("a:f1:cpu=17"), want: 100},
		{name: "weight 0.5 doubles it", weight: 500, usage: usageOf("a:f1:cpu=17"), want: 400},
		{name: "weight 0 borrowing yields to everyone", weight: 0, usage: usageOf("a:f1:cpu=11"), want: MaxShare},
		{name: "weight 0 within nominal is 0", weight: 0, usage: usageOf("a:f1:cpu=9"), want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := makeConfig(fls, three(tc.weight)...)
			s := NewSnapshot(cfg, tc.usage, nil)
			if got := s.Share(cfg.ClusterQueues["a"]); got != tc.want {
				t.Errorf("Share(a) = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFairAdmissionOrder(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f1", "tier", "1")}
	cqs := func(fair bool) []*ClusterQueue {
		out := []*ClusterQueue{}
		for _, n := range []string{"a", "b", "c"} {
			b := makeCQ(n).Cohort("ml").Group(cpu).Flavor("f1", "cpu=10")
			if fair {
				b.Fair(1000)
			}
			out = append(out, b.Obj())
		}
		return out
	}
	// a borrows 6, b is at its nominal quota, c lends its last 2: one of
	// the two borrowers' Workloads fits.
	usage := func() map[string]Usage { return usageOf("a:f1:cpu=16", "b:f1:cpu=10", "c:f1:cpu=2") }
	pending := func() map[string][]*Workload {
		return seqs(makeWL("a-old", "a", 1).Req(cpu, "2").Obj(), makeWL("b-new", "b", 2).Req(cpu, "2").Obj())
	}
	for _, tc := range []struct {
		name string
		fair bool
		want []string
	}{
		{name: "without fair sharing the older Workload goes first", want: []string{"a-old@f1"}},
		{name: "with fair sharing the queue with the lower share goes first", fair: true, want: []string{"b-new@f1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(makeConfig(fls, cqs(tc.fair)...), usage(), map[string]labels.Set{"ns": {}})
			got := admittedNames(Decide(s, pending(), func(*Workload, Verdict, int) {}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
		})
	}
}
