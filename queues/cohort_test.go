package queues

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// makeCohort makes a Cohort document; quota, when given, lends it the
// resource groups of a ClusterQueue builder.
func makeCohort(name, parent string, quota *cqB) *Cohort {
	co := &Cohort{Name: name, Parent: parent}
	if quota != nil {
		co.ResourceGroups = quota.cq.ResourceGroups
	}
	return co
}

// cpuQuota is the quota of one cpu cell in flavor f1, for a Cohort.
func cpuQuota(q string) *cqB { return makeCQ("").Group(cpu).Flavor("f1", q) }

func withCohorts(c *Config, cos ...*Cohort) *Config {
	c.CohortSpecs = map[string]*Cohort{}
	for _, co := range cos {
		c.CohortSpecs[co.Name] = co
	}
	return c
}

// The trees of the tables below, after the examples of Kueue's Cohort
// documentation:
//
//	org                 (own quota: orgQuota)
//	├── ml              a: 2 cpu, b: 0 cpu
//	└── infra           c: 6 cpu
func orgTree(orgQuota, mlQuota, infraQuota *cqB, cqs ...*ClusterQueue) *Config {
	if cqs == nil {
		cqs = []*ClusterQueue{
			makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2").Obj(),
			makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(),
			makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6").Obj(),
		}
	}
	return withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")}, cqs...),
		makeCohort("org", "", orgQuota), makeCohort("ml", "org", mlQuota), makeCohort("infra", "org", infraQuota))
}

func TestCohortTreeAssign(t *testing.T) {
	f1cpu := FlavorResource{"f1", cpu}
	cases := []struct {
		name  string
		cfg   *Config
		usage map[string]Usage
		w     *Workload
		// want is the flavor, or "code: message" of a verdict that does
		// not fit; avail and ceil are Available and Ceiling of the
		// workload's queue in f1/cpu before it is decided.
		want        string
		avail, ceil string
	}{
		{name: "borrowing up two levels: b uses a's quota through ml and c's through org",
			cfg: orgTree(nil, nil, nil), w: makeWL("j", "b", 1).Req(cpu, "7").Obj(), want: "f1 (borrowing)", avail: "8", ceil: "8"},
		{name: "beyond the whole tree it can never fit",
			cfg:  orgTree(nil, nil, nil),
			w:    makeWL("j", "b", 1).Req(cpu, "9").Obj(),
			want: "exceeds-quota: Can never fit: requests cpu=9, ClusterQueue b allows at most 8 in flavor f1 (nominal 0 + borrowing 8)", avail: "8", ceil: "8"},
		{name: "a lendingLimit at a middle level keeps part of infra's quota from ml",
			cfg: orgTree(nil, nil, cpuQuota("cpu=0/-/2")), w: makeWL("j", "b", 1).Req(cpu, "4").Obj(), want: "f1 (borrowing)", avail: "4", ceil: "4"},
		{name: "what a middle lendingLimit keeps, the queue below it still uses",
			cfg: orgTree(nil, nil, cpuQuota("cpu=0/-/2")), w: makeWL("j", "c", 1).Req(cpu, "8").Obj(), want: "f1 (borrowing)", avail: "8", ceil: "8"},
		{name: "a cohort's own quota is lent to its subtree",
			cfg: orgTree(cpuQuota("cpu=10"), nil, nil), w: makeWL("j", "b", 1).Req(cpu, "18").Obj(), want: "f1 (borrowing)", avail: "18", ceil: "18"},
		{name: "a middle lendingLimit of 0 keeps all of the subtree's quota, its own included, from the rest of the tree",
			cfg: orgTree(nil, nil, cpuQuota("cpu=5/-/0")), w: makeWL("j", "b", 1).Req(cpu, "3").Obj(),
			want: "exceeds-quota: Can never fit: requests cpu=3, ClusterQueue b allows at most 2 in flavor f1 (nominal 0 + borrowing 2)", avail: "2", ceil: "2"},
		{name: "a middle borrowingLimit caps what the subtree takes from its parent",
			cfg: orgTree(nil, cpuQuota("cpu=0/1"), nil), w: makeWL("j", "b", 1).Req(cpu, "4").Obj(),
			want: "exceeds-quota: Can never fit: requests cpu=4, ClusterQueue b allows at most 3 in flavor f1 (nominal 0 + borrowing 3)", avail: "3", ceil: "3"},
		{name: "a middle borrowingLimit counts what the subtree already takes",
			cfg: orgTree(nil, cpuQuota("cpu=0/1"), nil), usage: usageOf("a:f1:cpu=2", "b:f1:cpu=1"),
			w:    makeWL("j", "b", 1).Req(cpu, "1").Obj(),
			want: "quota/f1/cpu: Waiting for quota: needs cpu=1 in flavor f1; ClusterQueue b uses 1 of 0, cohort ml (parent org) can lend 0", avail: "0", ceil: "3"},
		{name: "usage in another subtree is what the root no longer lends",
			cfg: orgTree(nil, nil, nil), usage: usageOf("c:f1:cpu=5"),
			w:    makeWL("j", "b", 1).Req(cpu, "4").Obj(),
			want: "quota/f1/cpu: Waiting for quota: needs cpu=4 in flavor f1; ClusterQueue b uses 0 of 0, cohort ml (parent org) can lend 3", avail: "3", ceil: "8"},
		{name: "a queue takes its nominal quota from what the tree has left",
			cfg: orgTree(nil, nil, nil), usage: usageOf("b:f1:cpu=6"),
			w: makeWL("j", "a", 1).Req(cpu, "2").Obj(), want: "f1", avail: "2", ceil: "8"},
		{name: "a queue's borrowingLimit still binds in a tree",
			cfg: orgTree(nil, nil, nil,
				makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0/5").Obj(),
				makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6").Obj()),
			w:    makeWL("j", "b", 1).Req(cpu, "6").Obj(),
			want: "exceeds-quota: Can never fit: requests cpu=6, ClusterQueue b allows at most 5 in flavor f1 (nominal 0 + borrowing 5)", avail: "5", ceil: "5"},
		{name: "a queue's lendingLimit keeps its quota from the rest of the tree",
			cfg: orgTree(nil, nil, nil,
				makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(),
				makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6/-/1").Obj()),
			w: makeWL("j", "b", 1).Req(cpu, "3").Obj(), want: "f1 (borrowing)", avail: "3", ceil: "3"},
		{name: "an implicit parent (no Cohort document) has no quota of its own",
			cfg: withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")},
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(),
				makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6").Obj()),
				makeCohort("ml", "org", nil), makeCohort("infra", "org", nil)),
			w: makeWL("j", "b", 1).Req(cpu, "6").Obj(), want: "f1 (borrowing)", avail: "6", ceil: "6"},
		{name: "a root cohort document with quota and no parent lends it to its members",
			cfg: withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")}, makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj()),
				makeCohort("ml", "", cpuQuota("cpu=4"))),
			w: makeWL("j", "b", 1).Req(cpu, "4").Obj(), want: "f1 (borrowing)", avail: "4", ceil: "4"},
		{name: "three levels: a leaf cohort borrows from the top's own quota",
			cfg: withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")}, makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=1").Obj()),
				makeCohort("top", "", cpuQuota("cpu=4")), makeCohort("org", "top", nil), makeCohort("ml", "org", nil)),
			usage: usageOf("b:f1:cpu=5"),
			w:     makeWL("j", "b", 1).Req(cpu, "1").Obj(),
			want:  "quota/f1/cpu: Waiting for quota: needs cpu=1 in flavor f1; ClusterQueue b uses 5 of 1, cohort ml (parents org, top) can lend 0", avail: "0", ceil: "5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(tc.cfg, CloneUsages(tc.usage), map[string]labels.Set{"ns": {}})
			cq := tc.cfg.ClusterQueues[tc.w.Queue]
			ceil, _, _ := s.Ceiling(cq, f1cpu)
			if got := fmt.Sprintf("%s/%s", s.Available(cq, f1cpu).Format(cpu), ceil.Format(cpu)); got != tc.avail+"/"+tc.ceil {
				t.Errorf("available/ceiling = %s, want %s/%s", got, tc.avail, tc.ceil)
			}
			a, v := s.Assign(tc.w)
			got := v.Code + ": " + v.Message()
			if v.Kind == Fits {
				got = strings.Join(a.Flavors, "+")
				if a.Borrowing {
					got += " (borrowing)"
				}
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCohortTreeChargeIsIncremental checks that the usage a Snapshot
// bubbles up the tree as it charges and releases is the usage it would
// compute afresh from the queues' usage.
func TestCohortTreeChargeIsIncremental(t *testing.T) {
	cfg := withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")},
		makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2/-/1").Obj(),
		makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=3").Obj(),
		makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6/4").Obj(),
		makeCQ("d").Cohort("org").Group(cpu).Flavor("f1", "cpu=1").Obj()),
		makeCohort("org", "", cpuQuota("cpu=3")), makeCohort("ml", "org", cpuQuota("cpu=2/3/1")), makeCohort("infra", "org", cpuQuota("cpu=1/-/4")))
	rng := rand.New(rand.NewSource(1))
	s := NewSnapshot(cfg, map[string]Usage{}, nil)
	queues := []string{"a", "b", "c", "d"}
	f1cpu := FlavorResource{"f1", cpu}
	for i := range 500 {
		q := queues[rng.Intn(len(queues))]
		amount := flavors.Amount(rng.Intn(4000))
		sign := 1
		if held := s.Usage[q][f1cpu]; held > 0 && rng.Intn(2) == 0 {
			amount, sign = flavors.Min(amount, held), -1
		}
		s.Charge(q, Usage{f1cpu: amount}, sign)
		fresh := NewSnapshot(cfg, CloneUsages(s.Usage), nil)
		for _, c := range []string{"org", "ml", "infra"} {
			if got, want := s.borrowed[c][f1cpu], fresh.borrowed[c][f1cpu]; got != want {
				t.Fatalf("step %d: cohort %s holds %d incrementally, %d afresh", i, c, got, want)
			}
		}
		for _, q := range queues {
			if got, want := s.Available(cfg.ClusterQueues[q], f1cpu), fresh.Available(cfg.ClusterQueues[q], f1cpu); got != want {
				t.Fatalf("step %d: %s has %d available incrementally, %d afresh", i, q, got, want)
			}
		}
	}
}

// TestPoolsMoveIsIncremental checks that Pools, moved by each change of a
// queue's usage, hold what a count afresh holds, and that a Snapshot made
// from them sees what one made from the usage sees.
func TestPoolsMoveIsIncremental(t *testing.T) {
	cfg := withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")},
		makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2/-/1").Obj(),
		makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=3").Obj(),
		makeCQ("c").Cohort("infra").Group(cpu).Flavor("f1", "cpu=6/4").Obj(),
		makeCQ("d").Cohort("org").Group(cpu).Flavor("f1", "cpu=1").Obj(),
		makeCQ("e").Group(cpu).Flavor("f1", "cpu=1").Obj(),
		makeCQ("x").Cohort("flat").Group(cpu).Flavor("f1", "cpu=2").Obj(),
		makeCQ("y").Cohort("flat").Group(cpu).Flavor("f1", "cpu=1/-/0").Obj()),
		makeCohort("org", "", cpuQuota("cpu=3")), makeCohort("ml", "org", cpuQuota("cpu=2/3/1")), makeCohort("infra", "org", cpuQuota("cpu=1/-/4")))
	rng := rand.New(rand.NewSource(2))
	usage := map[string]Usage{"a": {}, "b": {}, "c": {}, "d": {}, "e": {}, "x": {}, "y": {}, "gone": {}}
	pools := NewPools(cfg, usage)
	if !pools.For(cfg) || pools.For(withCohorts(makeConfig(nil))) {
		t.Fatalf("Pools hold for their own config only")
	}
	queues := []string{"a", "b", "c", "d", "e", "x", "y", "gone"}
	f1cpu := FlavorResource{"f1", cpu}
	for i := range 300 {
		q := queues[rng.Intn(len(queues))]
		before := usage[q][f1cpu]
		after := flavors.Max(0, before.Add(flavors.Amount(rng.Intn(8000)-4000)))
		usage[q][f1cpu] = after
		pools.Move(q, f1cpu, before, after)
		fresh := NewSnapshot(cfg, CloneUsages(usage), nil)
		pooled := NewSnapshotPooled(cfg, CloneUsages(usage), nil, pools)
		for _, c := range []string{"org", "ml", "infra", "flat"} {
			if got, want := pools.s.borrowed[c][f1cpu], fresh.borrowed[c][f1cpu]; got != want {
				t.Fatalf("step %d: cohort %s holds %d in the pools, %d afresh", i, c, got, want)
			}
		}
		for _, q := range queues[:7] {
			if got, want := pooled.Available(cfg.ClusterQueues[q], f1cpu), fresh.Available(cfg.ClusterQueues[q], f1cpu); got != want {
				t.Fatalf("step %d: %s has %d available from the pools, %d afresh", i, q, got, want)
			}
		}
		// A pass charges its Snapshot, never the pools.
		pooled.Charge("a", Usage{f1cpu: 5000}, +1)
		if got, want := pools.s.borrowed["ml"][f1cpu], fresh.borrowed["ml"][f1cpu]; got != want {
			t.Fatalf("step %d: charging a pooled Snapshot moved the pools: ml holds %d, want %d", i, got, want)
		}
	}
}

// admCPUMem is an admitted workload of queue q holding cpu and memory in
// flavor f1, admitted at second t.
func admCPUMem(name, q, cpuQ, memQ string, t int) *Admitted {
	w := makeWL(name, q, t).Req(cpu, cpuQ).Req(mem, memQ).Obj()
	return &Admitted{W: w, Usage: Usage{{"f1", cpu}: amt(cpu, cpuQ), {"f1", mem}: amt(mem, memQ)}, AdmittedAt: epoch.Add(time.Duration(t) * time.Second)}
}

func TestCohortTreePreemption(t *testing.T) {
	reclaimer := func(name, cohort, quota, reclaim, borrow string) *ClusterQueue {
		return withPolicy(makeCQ(name).Cohort(cohort).Group(cpu).Flavor("f1", quota).Obj(), "LowerPriority", reclaim, borrow, nil)
	}
	std := func(c string) *ClusterQueue { return reclaimer("c", "infra", c, "Any", "Never") }
	cases := []struct {
		name     string
		cfg      *Config
		admitted []*Admitted
		pending  []*Workload
		// want maps each preemptor to its victims ("name:reason").
		want  map[string][]string
		admit []string
	}{
		{
			name: "reclaim across the tree: c takes back what b borrowed of it through org",
			cfg: orgTree(nil, nil, nil, makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=6")),
			admitted: []*Admitted{adm("b1", "b", "f1", "4", 5, 1), adm("b2", "b", "f1", "4", 5, 2)},
			pending:  []*Workload{makeWL("c1", "c", 3).Req(cpu, "4").Prio(0).Obj()},
			want:     map[string][]string{"c1": {"b2:to reclaim quota lent to cohort org"}},
		},
		{
			name: "no reclaim from a queue whose cohort borrows nothing from the root",
			cfg: orgTree(nil, nil, nil, makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=4").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=2")),
			admitted: []*Admitted{adm("b1", "b", "f1", "3", 0, 1), adm("c0", "c", "f1", "2", 9, 1)},
			pending:  []*Workload{makeWL("c1", "c", 3).Req(cpu, "2").Prio(9).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "a queue reclaims within its own cohort first, where the lender is nearest",
			cfg: orgTree(nil, nil, nil, reclaimer("a", "ml", "cpu=4", "Any", "Never"),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=2")),
			admitted: []*Admitted{adm("b1", "b", "f1", "4", 0, 1), adm("b2", "b", "f1", "2", 0, 2)},
			pending:  []*Workload{makeWL("a1", "a", 3).Req(cpu, "2").Obj()},
			want:     map[string][]string{"a1": {"b2:to reclaim quota lent to cohort ml"}},
		},
		{
			name: "borrowing beyond its own subtree, a preemptor without borrowWithinCohort may not preempt",
			cfg: orgTree(nil, nil, nil, reclaimer("a", "ml", "cpu=1", "Any", "Never"),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=6")),
			admitted: []*Admitted{adm("c1", "c", "f1", "5", 0, 1), adm("c2", "c", "f1", "2", 0, 2)},
			pending:  []*Workload{makeWL("a1", "a", 3).Req(cpu, "2").Prio(9).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "it may when the subtree below the common cohort can hold the request: the quota is its subtree's",
			cfg: orgTree(nil, nil, nil, reclaimer("a", "ml", "cpu=1", "Any", "Never"),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=4").Obj(), std("cpu=6")),
			admitted: []*Admitted{adm("c1", "c", "f1", "6", 0, 1), adm("c2", "c", "f1", "3", 0, 2)},
			pending:  []*Workload{makeWL("a1", "a", 3).Req(cpu, "3").Prio(0).Obj()},
			want:     map[string][]string{"a1": {"c2:to reclaim quota lent to cohort org"}},
		},
		{
			name: "borrowWithinCohort lets a preemptor borrow across the tree from lower priorities",
			cfg: orgTree(nil, nil, nil, reclaimer("a", "ml", "cpu=1", "Any", "LowerPriority"),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=6")),
			admitted: []*Admitted{adm("c1", "c", "f1", "5", 0, 1), adm("c2", "c", "f1", "2", 0, 2)},
			pending:  []*Workload{makeWL("a1", "a", 3).Req(cpu, "2").Prio(9).Obj()},
			want:     map[string][]string{"a1": {"c2:to borrow within cohort org"}},
		},
		{
			name: "reclaimWithinCohort Never keeps the whole tree out of reach",
			cfg: orgTree(nil, nil, nil, makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=2").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), reclaimer("c", "infra", "cpu=6", "Never", "Never")),
			admitted: []*Admitted{adm("b1", "b", "f1", "8", 0, 1)},
			pending:  []*Workload{makeWL("c1", "c", 3).Req(cpu, "4").Prio(9).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "the root's own quota: a queue within its nominal quota reclaims it from a borrower in another subtree",
			cfg: orgTree(cpuQuota("cpu=4"), nil, nil, makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=0").Obj(), std("cpu=2")),
			admitted: []*Admitted{adm("b1", "b", "f1", "3", 0, 1), adm("b2", "b", "f1", "3", 0, 2)},
			pending:  []*Workload{makeWL("c1", "c", 3).Req(cpu, "2").Obj()},
			want:     map[string][]string{"c1": {"b2:to reclaim quota lent to cohort org"}},
		},
		{
			name: "the advantage needs every resource to fit below the common cohort: memory does not fit in ml",
			cfg: orgTree(nil, nil, nil,
				withPolicy(makeCQ("a").Cohort("ml").Group(cpu, mem).Flavor("f1", "cpu=1", "memory=1").Obj(), "LowerPriority", "Any", "Never", nil),
				makeCQ("b").Cohort("ml").Group(cpu, mem).Flavor("f1", "cpu=4", "memory=0").Obj(),
				makeCQ("c").Cohort("infra").Group(cpu, mem).Flavor("f1", "cpu=6", "memory=6").Obj()),
			admitted: []*Admitted{admCPUMem("c1", "c", "5", "4", 1), admCPUMem("c2", "c", "2", "3", 2)},
			pending:  []*Workload{makeWL("a1", "a", 3).Req(cpu, "3").Req(mem, "2").Obj()},
			want:     map[string][]string{},
		},
		{
			name: "what fits is admitted across the tree with no preemption",
			cfg:  orgTree(nil, nil, nil),
			pending: []*Workload{makeWL("b1", "b", 1).Req(cpu, "4").Obj(), makeWL("c1", "c", 2).Req(cpu, "3").Obj(),
				makeWL("a1", "a", 3).Req(cpu, "1").Obj()},
			want:  map[string][]string{},
			admit: []string{"c1@f1", "a1@f1", "b1@f1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshotOf(tc.cfg, tc.admitted)
			d := Decide(snap, seqs(tc.pending...), func(*Workload, Verdict, int) {})
			got := map[string][]string{}
			for _, p := range d.Preemptions {
				for _, v := range p.Victims {
					got[p.Preemptor.Name] = append(got[p.Preemptor.Name], v.W.Name+":"+v.Reason)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if tc.admit == nil {
				tc.admit = []string{}
			}
			if diff := cmp.Diff(tc.admit, admittedNames(d.Admissions)); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
		})
	}
}
