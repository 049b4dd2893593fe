package queues

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// weighted gives a Cohort document spec.fairSharing with a weight in
// thousandths.
func weighted(co *Cohort, weight int64) *Cohort {
	co.FairSharing, co.FairWeight = true, weight
	return co
}

// fairTree is Kueue's example of weighted cohorts: important-org and
// regular-org under root-cohort, whose own quota is the common pool; each
// org has one ClusterQueue with no quota of its own.
func fairTree(pool string, important, regular int64) *Config {
	cqs := []*ClusterQueue{
		withPolicy(makeCQ("imp").Cohort("important-org").Fair(1000).Group(cpu).Flavor("f1", "cpu=0").Obj(), "Never", "Any", "Never", nil),
		withPolicy(makeCQ("reg").Cohort("regular-org").Fair(1000).Group(cpu).Flavor("f1", "cpu=0").Obj(), "Never", "Any", "Never", nil),
	}
	return withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")}, cqs...),
		makeCohort("root-cohort", "", cpuQuota(pool)),
		weighted(makeCohort("important-org", "root-cohort", nil), important),
		weighted(makeCohort("regular-org", "root-cohort", nil), regular))
}

func TestTreeShare(t *testing.T) {
	cfg := fairTree("cpu=8", 1000, 500)
	cases := []struct {
		name  string
		usage map[string]Usage
		// want is the share of imp in its cohort, of important-org and of
		// regular-org in root-cohort.
		want [3]int64
	}{
		{name: "idle", want: [3]int64{0, 0, 0}},
		// 3 of the 8 the root lends: 375 at every level of imp's path.
		{name: "a queue's use counts at every level up", usage: usageOf("imp:f1:cpu=3"), want: [3]int64{375, 375, 0}},
		{name: "a cohort's weight divides its share", usage: usageOf("imp:f1:cpu=2", "reg:f1:cpu=2"), want: [3]int64{250, 250, 500}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(cfg, CloneUsages(tc.usage), nil)
			got := [3]int64{s.Share(cfg.ClusterQueues["imp"]), s.cohortShare("important-org", nil), s.cohortShare("regular-org", nil)}
			if got != tc.want {
				t.Errorf("shares = %v, want %v", got, tc.want)
			}
			up := s.sharesUp(cfg.ClusterQueues["imp"], Usage{{"f1", cpu}: amt(cpu, "1")}, nil, nil)
			s.Charge("imp", Usage{{"f1", cpu}: amt(cpu, "1")}, +1)
			if want := []int64{s.Share(cfg.ClusterQueues["imp"]), s.cohortShare("important-org", nil)}; !cmp.Equal(up, want) {
				t.Errorf("sharesUp with 1 cpu more = %v, want the shares once it is charged, %v", up, want)
			}
		})
	}
	zero := NewSnapshot(fairTree("cpu=8", 1000, 0), usageOf("reg:f1:cpu=1"), nil)
	if got := zero.cohortShare("regular-org", nil); got != MaxShare {
		t.Errorf("a borrowing cohort of weight 0 has share %d, want MaxShare", got)
	}
}

func TestFairTreeAdmissionOrder(t *testing.T) {
	// Each queue asks for ten Workloads of 1 cpu; regular-org's are the
	// older, so without fair sharing they would all go first.
	pending := func() map[string][]*Workload {
		var ws []*Workload
		for i := range 10 {
			ws = append(ws, makeWL(fmt.Sprintf("reg%d", i), "reg", i).Req(cpu, "1").Obj(),
				makeWL(fmt.Sprintf("imp%d", i), "imp", 100+i).Req(cpu, "1").Obj())
		}
		return seqs(ws...)
	}
	count := func(adms []Admission) map[string]int {
		out := map[string]int{}
		for _, a := range adms {
			out[a.Workload.Queue]++
		}
		return out
	}
	cases := []struct {
		name string
		cfg  *Config
		want map[string]int
	}{
		// Kueue's example: the important org trends to 75% of the
		// common pool, the regular one to 25%.
		{name: "weights 0.75 and 0.25 split the pool 3 to 1", cfg: fairTree("cpu=12", 750, 250), want: map[string]int{"imp": 9, "reg": 3}},
		{name: "equal weights split it evenly", cfg: fairTree("cpu=12", 1000, 1000), want: map[string]int{"imp": 6, "reg": 6}},
		{name: "a cohort of weight 0 gets only what the others leave", cfg: fairTree("cpu=12", 1000, 0), want: map[string]int{"imp": 10, "reg": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(tc.cfg, nil, map[string]labels.Set{"ns": {}})
			got := count(Decide(s, pending(), func(*Workload, Verdict, int) {}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted per queue (-want +got):\n%s", diff)
			}
		})
	}

	// Two subtrees: within ml, a borrows b's unused quota, but ml stays
	// within its subtree quota; infra borrows from the root. The share
	// that counts is that of each subtree at the root, so a's Workload
	// goes first, though c's queue has the lower share and the older
	// Workload. Only one of the two fits.
	subtrees := func(fair bool) *Config {
		mk := func(name, cohort, quota string) *ClusterQueue {
			b := makeCQ(name).Cohort(cohort).Group(cpu).Flavor("f1", quota)
			if fair {
				b.Fair(1000)
			}
			return b.Obj()
		}
		return orgTree(nil, nil, nil, mk("a", "ml", "cpu=2"), mk("b", "ml", "cpu=8"), mk("c", "infra", "cpu=2"), mk("d", "infra", "cpu=2"))
	}
	for _, tc := range []struct {
		name string
		fair bool
		want []string
	}{
		{name: "without fair sharing the older Workload goes first", want: []string{"c-old@f1"}},
		{name: "with fair sharing the subtree with the lower share goes first", fair: true, want: []string{"a-new@f1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := subtrees(tc.fair)
			s := NewSnapshot(cfg, usageOf("a:f1:cpu=6", "c:f1:cpu=4", "d:f1:cpu=2"), map[string]labels.Set{"ns": {}})
			if tc.fair {
				if a, c := s.Share(cfg.ClusterQueues["a"]), s.Share(cfg.ClusterQueues["c"]); a <= c {
					t.Fatalf("shares a %d, c %d: the case needs a's queue share to be the higher", a, c)
				}
			}
			pending := seqs(makeWL("c-old", "c", 1).Req(cpu, "2").Obj(), makeWL("a-new", "a", 2).Req(cpu, "2").Obj())
			got := admittedNames(Decide(s, pending, func(*Workload, Verdict, int) {}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFairTreePreemption(t *testing.T) {
	// org lends its own 8 cpu; no queue has quota of its own. a and b
	// are in ml, c in infra.
	member := func(name, cohort string) *ClusterQueue {
		return withPolicy(makeCQ(name).Cohort(cohort).Fair(1000).Group(cpu).Flavor("f1", "cpu=0").Obj(), "LowerPriority", "Any", "LowerPriority", nil)
	}
	cfg := func(infraWeight int64) *Config {
		c := withCohorts(makeConfig([]*flavors.Flavor{flavor("f1")}, member("a", "ml"), member("b", "ml"), member("c", "infra")),
			makeCohort("org", "", cpuQuota("cpu=8")), makeCohort("ml", "org", nil), weighted(makeCohort("infra", "org", nil), infraWeight))
		return c
	}
	p := func() *Workload { return makeWL("p", "a", 10).Req(cpu, "2").Prio(10).Obj() }
	cases := []struct {
		name     string
		cfg      *Config
		admitted []*Admitted
		want     map[string][]string
	}{
		{
			name:     "a subtree that holds the whole pool gives up Workloads to one that holds none",
			cfg:      cfg(1000),
			admitted: []*Admitted{adm("c1", "c", "f1", "2", 0, 1), adm("c2", "c", "f1", "2", 0, 2), adm("c3", "c", "f1", "2", 0, 3), adm("c4", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{"p": {"c4:to borrow within cohort org"}},
		},
		{
			name:     "no preemption when the preemptor's subtree would end above the other's",
			cfg:      cfg(1000),
			admitted: []*Admitted{adm("a1", "a", "f1", "2", 10, 1), adm("a2", "a", "f1", "2", 10, 2), adm("c1", "c", "f1", "2", 0, 3), adm("c2", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{},
		},
		{
			name:     "a heavier weight at the cohort level keeps the subtree's Workloads",
			cfg:      cfg(4000),
			admitted: []*Admitted{adm("c1", "c", "f1", "2", 0, 1), adm("c2", "c", "f1", "2", 0, 2), adm("c3", "c", "f1", "2", 0, 3), adm("c4", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{},
		},
		{
			name:     "with equal weights, an even split stays",
			cfg:      cfg(1000),
			admitted: []*Admitted{adm("a1", "a", "f1", "2", 10, 1), adm("b1", "b", "f1", "2", 0, 2), adm("c1", "c", "f1", "2", 0, 3), adm("c2", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{},
		},
		{
			name:     "a cohort of weight 0 that borrows gives up its Workloads to an even split",
			cfg:      cfg(0),
			admitted: []*Admitted{adm("a1", "a", "f1", "2", 10, 1), adm("b1", "b", "f1", "2", 0, 2), adm("c1", "c", "f1", "2", 0, 3), adm("c2", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{"p": {"c2:to borrow within cohort org"}},
		},
		{
			// Walking down from org, ml and infra tie and infra comes
			// first by name; but ml with p would end at 6 of 8 against
			// infra's 2 of 8, so infra keeps its Workloads. Within ml, a
			// with p ends at 2 of 8 against b's 2 of 8: b gives one up.
			// Compared queue to queue, a would have taken c's.
			name:     "shares compare just below the lowest common cohort",
			cfg:      cfg(1000),
			admitted: []*Admitted{adm("b1", "b", "f1", "2", 0, 1), adm("b2", "b", "f1", "2", 0, 2), adm("c1", "c", "f1", "2", 0, 3), adm("c2", "c", "f1", "2", 0, 4)},
			want:     map[string][]string{"p": {"b2:to borrow within cohort ml"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshotOf(tc.cfg, tc.admitted)
			d := Decide(snap, seqs(p()), func(*Workload, Verdict, int) {})
			got := map[string][]string{}
			for _, pr := range d.Preemptions {
				for _, v := range pr.Victims {
					got[pr.Preemptor.Name] = append(got[pr.Preemptor.Name], v.W.Name+":"+v.Reason)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}
