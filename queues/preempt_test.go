package queues

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
)

// adm makes an admitted workload of priority prio holding cpu in flavor f
// of queue q, admitted at second t.
func adm(name, q, f string, cpuQ string, prio int32, t int) *Admitted {
	w := makeWL(name, q, t).Req(cpu, cpuQ).Prio(prio).Obj()
	return &Admitted{W: w, Usage: Usage{{f, cpu}: amt(cpu, cpuQ)}, AdmittedAt: epoch.Add(time.Duration(t) * time.Second)}
}

func withPolicy(cq *ClusterQueue, within, reclaim, borrow string, threshold *int32) *ClusterQueue {
	cq.Preemption = PreemptionPolicy{WithinClusterQueue: within, ReclaimWithinCohort: reclaim,
		BorrowWithinCohort: BorrowWithinCohort{Policy: borrow, MaxPriorityThreshold: threshold}}
	return cq
}

// fairMember is a member of cohort ml with fair sharing (weight 1) that
// reclaims from anyone and borrows while preempting lower priorities.
func fairMember(name, quota string) *ClusterQueue {
	return withPolicy(makeCQ(name).Cohort("ml").Fair(1000).Group(cpu).Flavor("f1", quota).Obj(), "LowerPriority", "Any", "LowerPriority", nil)
}

func TestPreemption(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f1", "tier", "1"), flavor("f2", "tier", "2")}
	lone := func(within string) *ClusterQueue {
		return withPolicy(makeCQ("a").Group(cpu).Flavor("f1", "cpu=10").Obj(), within, "Never", "Never", nil)
	}
	member := func(name, reclaim, borrow string, threshold *int32, quota string) *ClusterQueue {
		return withPolicy(makeCQ(name).Cohort("ml").Group(cpu).Flavor("f1", quota).Obj(), "LowerPriority", reclaim, borrow, threshold)
	}
	cases := []struct {
		name     string
		cqs      []*ClusterQueue
		admitted []*Admitted
		pending  []*Workload
		// want maps each preemptor to its victims ("name:reason-word").
		want  map[string][]string
		admit []string
	}{
		{
			name:     "lower priority within the queue: the most recently admitted goes",
			cqs:      []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{adm("low-old", "a", "f1", "5", 1, 1), adm("low-new", "a", "f1", "5", 1, 2)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{"high": {"low-new:within"}},
		},
		{
			name:     "lower priority within the queue: the lowest priority goes first",
			cqs:      []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{adm("p2", "a", "f1", "5", 2, 2), adm("p1", "a", "f1", "5", 1, 1)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{"high": {"p1:within"}},
		},
		{
			name:     "equal priority is never preempted under LowerPriority",
			cqs:      []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{adm("same", "a", "f1", "10", 5, 1)},
			pending:  []*Workload{makeWL("new", "a", 3).Req(cpu, "5").Prio(5).Obj()},
			want:     map[string][]string{},
		},
		{
			name:     "LowerOrNewerEqualPriority preempts a newer Job of equal priority",
			cqs:      []*ClusterQueue{lone("LowerOrNewerEqualPriority")},
			admitted: []*Admitted{adm("newer", "a", "f1", "10", 5, 5)},
			pending:  []*Workload{makeWL("older", "a", 3).Req(cpu, "5").Prio(5).Obj()},
			want:     map[string][]string{"older": {"newer:within"}},
		},
		{
			name:     "LowerOrNewerEqualPriority spares an older Job of equal priority",
			cqs:      []*ClusterQueue{lone("LowerOrNewerEqualPriority")},
			admitted: []*Admitted{adm("older", "a", "f1", "10", 5, 1)},
			pending:  []*Workload{makeWL("newer", "a", 3).Req(cpu, "5").Prio(5).Obj()},
			want:     map[string][]string{},
		},
		{
			name:     "LowerOrNewerEqualPriority: a preemptor evicted for pods not ready since the Job's creation is the newer",
			cqs:      []*ClusterQueue{lone("LowerOrNewerEqualPriority")},
			admitted: []*Admitted{adm("mid", "a", "f1", "10", 5, 5)},
			pending:  []*Workload{makeWL("requeued", "a", 3).Evicted(8).Req(cpu, "5").Prio(5).Obj()},
			want:     map[string][]string{},
		},
		{
			name:     "LowerOrNewerEqualPriority: ordered by its creation (timestamp Creation), it is the older",
			cqs:      []*ClusterQueue{lone("LowerOrNewerEqualPriority")},
			admitted: []*Admitted{adm("mid", "a", "f1", "10", 5, 5)},
			pending:  []*Workload{makeWL("requeued", "a", 3).Evicted(8).ByCreation().Req(cpu, "5").Prio(5).Obj()},
			want:     map[string][]string{"requeued": {"mid:within"}},
		},
		{
			name:     "Never within the queue preempts nothing",
			cqs:      []*ClusterQueue{lone("Never")},
			admitted: []*Admitted{adm("low", "a", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "the minimal set: a victim taken first but not needed is spared",
			cqs:  []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{
				adm("y", "a", "f1", "5", 1, 2), adm("x", "a", "f1", "1", 1, 3), adm("z", "a", "f1", "4", 50, 1),
			},
			pending: []*Workload{makeWL("high", "a", 4).Req(cpu, "5").Prio(10).Obj()},
			want:    map[string][]string{"high": {"y:within"}},
		},
		{
			name: "several victims when one is not enough",
			cqs:  []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{
				adm("l1", "a", "f1", "3", 1, 1), adm("l2", "a", "f1", "3", 1, 2), adm("l3", "a", "f1", "4", 1, 3),
			},
			pending: []*Workload{makeWL("high", "a", 4).Req(cpu, "7").Prio(10).Obj()},
			want:    map[string][]string{"high": {"l3:within", "l2:within"}},
		},
		{
			name: "no preemption when it would not help",
			cqs:  []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{
				adm("low", "a", "f1", "3", 1, 1), adm("higher", "a", "f1", "7", 100, 2),
			},
			pending: []*Workload{makeWL("mid", "a", 4).Req(cpu, "5").Prio(10).Obj()},
			want:    map[string][]string{},
		},
		{
			name:     "reclaim lent quota from a borrowing queue, any priority",
			cqs:      []*ClusterQueue{member("a", "Any", "Never", nil, "cpu=10"), member("b", "Any", "Never", nil, "cpu=10")},
			admitted: []*Admitted{adm("b-big", "b", "f1", "15", 100, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "8").Prio(1).Obj()},
			want:     map[string][]string{"a-job": {"b-big:reclaim"}},
		},
		{
			name:     "reclaim LowerPriority spares a borrower of higher priority",
			cqs:      []*ClusterQueue{member("a", "LowerPriority", "Never", nil, "cpu=10"), member("b", "Any", "Never", nil, "cpu=10")},
			admitted: []*Admitted{adm("b-big", "b", "f1", "15", 100, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "8").Prio(1).Obj()},
			want:     map[string][]string{},
		},
		{
			name:     "reclaim never touches a queue within its nominal quota",
			cqs:      []*ClusterQueue{member("a", "Any", "Never", nil, "cpu=10"), member("b", "Any", "Never", nil, "cpu=10")},
			admitted: []*Admitted{adm("b-own", "b", "f1", "10", 1, 1), adm("a-own", "a", "f1", "6", 50, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "8").Prio(1).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "reclaim without borrowWithinCohort must leave the preemptor within nominal",
			cqs: []*ClusterQueue{
				member("a", "Any", "Never", nil, "cpu=10"), member("b", "Any", "Never", nil, "cpu=10"), member("c", "Any", "Never", nil, "cpu=10"),
			},
			admitted: []*Admitted{adm("b-big", "b", "f1", "15", 1, 1), adm("c-own", "c", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "12").Prio(10).Obj()},
			want:     map[string][]string{},
		},
		{
			name: "borrow while preempting with borrowWithinCohort LowerPriority",
			cqs: []*ClusterQueue{
				member("a", "Any", "LowerPriority", nil, "cpu=10"), member("b", "Any", "Never", nil, "cpu=10"), member("c", "Any", "Never", nil, "cpu=10"),
			},
			admitted: []*Admitted{adm("b-big", "b", "f1", "15", 1, 1), adm("c-own", "c", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "12").Prio(10).Obj()},
			want:     map[string][]string{"a-job": {"b-big:borrow"}},
		},
		{
			name: "borrowWithinCohort respects maxPriorityThreshold",
			cqs: []*ClusterQueue{
				member("a", "Any", "LowerPriority", ptr.To[int32](0), "cpu=10"), member("b", "Any", "Never", nil, "cpu=10"), member("c", "Any", "Never", nil, "cpu=10"),
			},
			admitted: []*Admitted{adm("b-big", "b", "f1", "15", 1, 1), adm("c-own", "c", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("a-job", "a", 2).Req(cpu, "12").Prio(10).Obj()},
			want:     map[string][]string{},
		},
		{
			name:     "a victim serves one preemptor per pass",
			cqs:      []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{adm("low", "a", "f1", "10", 1, 1)},
			pending: []*Workload{
				makeWL("high1", "a", 3).Req(cpu, "10").Prio(10).Obj(),
				makeWL("high2", "a", 4).Req(cpu, "10").Prio(10).Obj(),
			},
			want: map[string][]string{"high1": {"low:within"}},
		},
		{
			name: "whenCanPreempt TryNextFlavor takes a later flavor that fits",
			cqs: []*ClusterQueue{withPolicy(makeCQ("a").Group(cpu).Flavor("f1", "cpu=10").Flavor("f2", "cpu=10").Obj(),
				"LowerPriority", "Never", "Never", nil)},
			admitted: []*Admitted{adm("low", "a", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{},
			admit:    []string{"high@f2"},
		},
		{
			name: "whenCanPreempt Preempt preempts in the earlier flavor",
			cqs: []*ClusterQueue{func() *ClusterQueue {
				cq := withPolicy(makeCQ("a").Group(cpu).Flavor("f1", "cpu=10").Flavor("f2", "cpu=10").Obj(), "LowerPriority", "Never", "Never", nil)
				cq.FlavorFungibility.WhenCanPreempt = "Preempt"
				return cq
			}()},
			admitted: []*Admitted{adm("low", "a", "f1", "10", 1, 1)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{"high": {"low:within"}},
		},
		{
			name:     "a Job that fits is admitted, not preempting",
			cqs:      []*ClusterQueue{lone("LowerPriority")},
			admitted: []*Admitted{adm("low", "a", "f1", "5", 1, 1)},
			pending:  []*Workload{makeWL("high", "a", 3).Req(cpu, "5").Prio(10).Obj()},
			want:     map[string][]string{},
			admit:    []string{"high@f1"},
		},
		{
			name: "a reclaim within nominal quota goes before an older borrower",
			cqs: []*ClusterQueue{
				member("a", "Any", "Never", nil, "cpu=4"), member("b", "Any", "Never", nil, "cpu=4"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "2", 0, 1),
				adm("b1", "b", "f1", "2", 0, 1), adm("b2", "b", "f1", "2", 0, 2), adm("b3", "b", "f1", "1", 0, 3),
			},
			pending: []*Workload{makeWL("bx", "b", 4).Req(cpu, "1").Obj(), makeWL("ap", "a", 5).Req(cpu, "2").Obj()},
			want:    map[string][]string{"ap": {"b3:reclaim"}},
		},
		{
			name: "a claim takes over its own queue's victims first, so its queue stays within nominal",
			cqs: []*ClusterQueue{
				member("a", "Any", "Never", nil, "cpu=4/0"), member("c", "Any", "Never", nil, "cpu=1"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "1", 5, 1), adm("a2", "a", "f1", "1", 5, 2), adm("a3", "a", "f1", "1", 0, 3),
				adm("c1", "c", "f1", "2", 0, 4),
			},
			pending: []*Workload{makeWL("ah", "a", 9).Req(cpu, "2").Prio(10).Obj()},
			want:    map[string][]string{"ah": {"c1:reclaim", "a3:within"}},
		},
		{
			name: "two preemptors of a pass never claim the same room",
			cqs: []*ClusterQueue{
				member("a", "Any", "Never", nil, "cpu=6"), member("b", "Any", "Never", nil, "cpu=4"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "1", 0, 1), adm("a2", "a", "f1", "1", 0, 2), adm("a3", "a", "f1", "1", 0, 3), adm("a4", "a", "f1", "1", 0, 4),
				adm("a5", "a", "f1", "1", 0, 5), adm("a6", "a", "f1", "1", 0, 6), adm("a7", "a", "f1", "1", 0, 7), adm("a8", "a", "f1", "1", 0, 8),
				adm("b1", "b", "f1", "2", 0, 1),
			},
			pending: []*Workload{makeWL("b2", "b", 9).Req(cpu, "2").Obj(), makeWL("b3", "b", 10).Req(cpu, "2").Obj()},
			want:    map[string][]string{"b2": {"a8:reclaim", "a7:reclaim"}},
		},
		{
			name: "fair sharing: reclaim from the queue with the highest share",
			cqs: []*ClusterQueue{
				fairMember("a", "cpu=10"), fairMember("b", "cpu=10"), fairMember("c", "cpu=10"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "2", 0, 1),
				adm("b1", "b", "f1", "8", 0, 1), adm("b2", "b", "f1", "4", 0, 2),
				adm("c1", "c", "f1", "8", 0, 1), adm("c2", "c", "f1", "8", 0, 3),
			},
			pending: []*Workload{makeWL("p", "a", 4).Req(cpu, "4").Obj()},
			want:    map[string][]string{"p": {"c2:reclaim"}},
		},
		{
			name: "fair sharing: no preemption that would only swap the shares",
			cqs: []*ClusterQueue{
				fairMember("a", "cpu=10"), fairMember("b", "cpu=10"), fairMember("c", "cpu=10"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "10", 10, 1),
				adm("b1", "b", "f1", "10", 0, 1), adm("b2", "b", "f1", "2", 0, 2), adm("b3", "b", "f1", "2", 0, 3),
				adm("c1", "c", "f1", "6", 0, 1),
			},
			pending: []*Workload{makeWL("p", "a", 4).Req(cpu, "4").Prio(10).Obj()},
			want:    map[string][]string{},
		},
		{
			name: "fair sharing: a borrower may preempt a queue that borrows much more",
			cqs: []*ClusterQueue{
				fairMember("a", "cpu=10"), fairMember("b", "cpu=10"), fairMember("c", "cpu=10"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "10", 10, 1),
				adm("b1", "b", "f1", "10", 0, 1), adm("b2", "b", "f1", "4", 0, 2), adm("b3", "b", "f1", "4", 0, 3), adm("b4", "b", "f1", "2", 0, 4),
			},
			pending: []*Workload{makeWL("p", "a", 5).Req(cpu, "4").Prio(10).Obj()},
			want:    map[string][]string{"p": {"b3:borrow"}},
		},
		{
			name: "fair sharing: a heavier weight keeps a borrower's share low enough to keep its Jobs",
			cqs: []*ClusterQueue{
				fairMember("a", "cpu=10"), withPolicy(makeCQ("b").Cohort("ml").Fair(3000).Group(cpu).Flavor("f1", "cpu=10").Obj(), "LowerPriority", "Any", "LowerPriority", nil),
				fairMember("c", "cpu=10"),
			},
			admitted: []*Admitted{
				adm("a1", "a", "f1", "10", 10, 1),
				adm("b1", "b", "f1", "10", 0, 1), adm("b2", "b", "f1", "4", 0, 2), adm("b3", "b", "f1", "4", 0, 3), adm("b4", "b", "f1", "2", 0, 4),
			},
			pending: []*Workload{makeWL("p", "a", 5).Req(cpu, "4").Prio(10).Obj()},
			want:    map[string][]string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := makeConfig(fls, tc.cqs...)
			snap := snapshotOf(cfg, tc.admitted)
			before := CloneUsages(snap.Usage)
			preempting := map[string]bool{}
			d := Decide(snap, seqs(tc.pending...), func(w *Workload, v Verdict, _ int) {
				if v.Kind == Preempting {
					preempting[w.Name] = true
				}
			})
			got := map[string][]string{}
			for _, p := range d.Preemptions {
				if !preempting[p.Preemptor.Name] {
					t.Errorf("%s preempts but was not observed as Preempting", p.Preemptor.Name)
				}
				for _, v := range p.Victims {
					word := strings.Fields(v.Reason)[map[bool]int{true: 0, false: 1}[strings.HasPrefix(v.Reason, "within")]]
					got[p.Preemptor.Name] = append(got[p.Preemptor.Name], v.W.Name+":"+word)
					cause := map[string]string{"within": CauseInClusterQueue, "reclaim": CauseInCohortReclamation, "borrow": CauseInCohortReclaimWhileBorrowing}[word]
					if word != "within" && cfg.FairSharing(cfg.ClusterQueues[p.Preemptor.Queue].Cohort) {
						cause = CauseInCohortFairSharing
					}
					if v.Cause != cause {
						t.Errorf("victim %s (%s): cause %q, want %q", v.W.Name, v.Reason, v.Cause, cause)
					}
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
			// Usage grows by exactly the admissions and the preemptors'
			// claims, less what the claims took over from the victims.
			want := CloneUsages(before)
			add := func(q string, u Usage) {
				if want[q] == nil {
					want[q] = Usage{}
				}
				want[q].Add(u)
			}
			for _, a := range d.Admissions {
				add(a.Workload.Queue, a.Assignment.Usage)
			}
			for _, p := range d.Preemptions {
				add(p.Preemptor.Queue, p.Assignment.Usage)
				for i, v := range p.Victims {
					want[v.W.Queue].Sub(p.Moved[i])
				}
			}
			if diff := cmp.Diff(want, snap.Usage); diff != "" {
				t.Errorf("usage after the pass (-want +got):\n%s", diff)
			}
			// A preemptor that does not borrow leaves its queue within
			// nominal quota, its claim included: otherwise its queue
			// would look like a borrower, open to reclaim.
			for _, p := range d.Preemptions {
				borrows := p.Assignment.Borrowing || cfg.FairSharing(cfg.ClusterQueues[p.Preemptor.Queue].Cohort)
				for _, v := range p.Victims {
					borrows = borrows || strings.HasPrefix(v.Reason, "to borrow")
				}
				if borrows {
					continue
				}
				for fr, used := range snap.Usage[p.Preemptor.Queue] {
					if q, _ := cfg.QuotaOf(p.Preemptor.Queue, fr); used > q.Nominal {
						t.Errorf("%s's claim leaves %s at %v of %v in %v", p.Preemptor.Name, p.Preemptor.Queue, used, q.Nominal, fr)
					}
				}
			}
		})
	}
}

func TestPreemptionMessages(t *testing.T) {
	p := Preemption{
		Preemptor: makeWL("train-big", "b", 1).NS("team-b").Prio(1000).Obj(),
		Victims: []Victim{
			{Admitted: adm("etl-7", "a", "f", "1", 100, 1), Reason: "to reclaim quota lent to cohort ml"},
			{Admitted: adm("etl-9", "a", "f", "1", 100, 2), Reason: "to reclaim quota lent to cohort ml"},
		},
	}
	p.Victims[0].W.Namespace, p.Victims[1].W.Namespace = "team-a", "team-a"
	if diff := cmp.Diff("Preempting 2 jobs to fit: team-a/etl-7 (priority 100), team-a/etl-9 (priority 100)", p.Message()); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff("Preempted by team-b/train-big (priority 1000 > 100) to reclaim quota lent to cohort ml", p.VictimMessage(p.Victims[0])); diff != "" {
		t.Error(diff)
	}
}

func TestClaimCountsOnce(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f1", "tier", "1")}
	a := withPolicy(makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=6").Obj(), "LowerPriority", "Any", "Never", nil)
	b := withPolicy(makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=4").Obj(), "LowerPriority", "Any", "Never", nil)
	cases := []struct {
		name     string
		admitted []*Admitted
		pending  *Workload
		want     map[string]Usage
	}{
		{
			name:     "within a queue the claim replaces the victim",
			admitted: []*Admitted{adm("low1", "a", "f1", "3", 0, 1), adm("low2", "a", "f1", "3", 0, 2), adm("b1", "b", "f1", "4", 0, 1)},
			pending:  makeWL("high", "a", 3).Req(cpu, "3").Prio(10).Obj(),
			want:     usageOf("a:f1:cpu=6", "b:f1:cpu=4"),
		},
		{
			name:     "a reclaim moves the borrowed quota to the reclaiming queue",
			admitted: []*Admitted{adm("a1", "a", "f1", "4", 0, 1), adm("a2", "a", "f1", "4", 0, 2), adm("b1", "b", "f1", "2", 0, 1)},
			pending:  makeWL("b2", "b", 3).Req(cpu, "2").Obj(),
			want:     usageOf("a:f1:cpu=6", "b:f1:cpu=4"),
		},
		{
			name:     "what the victims hold beyond the claim stays theirs",
			admitted: []*Admitted{adm("low1", "a", "f1", "2", 0, 1), adm("low2", "a", "f1", "4", 0, 2), adm("b1", "b", "f1", "4", 0, 1)},
			pending:  makeWL("high", "a", 3).Req(cpu, "3").Prio(10).Obj(),
			want:     usageOf("a:f1:cpu=6", "b:f1:cpu=4"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshotOf(makeConfig(fls, a, b), tc.admitted)
			d := Decide(snap, seqs(tc.pending), func(*Workload, Verdict, int) {})
			if len(d.Preemptions) != 1 {
				t.Fatalf("want one preemption, got %d", len(d.Preemptions))
			}
			if diff := cmp.Diff(tc.want, snap.Usage); diff != "" {
				t.Errorf("usage during the preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionAcrossResourceGroups preempts for a workload whose
// requests span two resource groups (cpu on f1, GPUs on g): the victims
// must make every group fit, and no victim is counted twice.
func TestPreemptionAcrossResourceGroups(t *testing.T) {
	const gpu = "nvidia.com/gpu"
	fls := []*flavors.Flavor{flavor("f1", "tier", "1"), flavor("g", "accel", "gpu")}
	cq := withPolicy(makeCQ("a").Group(cpu).Flavor("f1", "cpu=10").Group(gpu).Flavor("g", gpu+"=4").Obj(), "LowerPriority", "Never", "Never", nil)
	held := func(name, cpuQ, gpuQ string, prio int32, at int) *Admitted {
		w := makeWL(name, "a", at).Req(cpu, cpuQ).Req(gpu, gpuQ).Prio(prio).Obj()
		return &Admitted{W: w, Usage: Usage{{"f1", cpu}: amt(cpu, cpuQ), {"g", gpu}: amt(gpu, gpuQ)}, AdmittedAt: epoch.Add(time.Duration(at) * time.Second)}
	}
	cases := []struct {
		name     string
		admitted []*Admitted
		pending  *Workload
		want     []string
	}{
		{
			name:     "GPUs short, cpu free: the GPU holder goes",
			admitted: []*Admitted{held("low", "2", "4", 1, 1)},
			pending:  makeWL("high", "a", 5).Req(cpu, "2").Req(gpu, "2").Prio(10).Obj(),
			want:     []string{"low"},
		},
		{
			name:     "cpu short on one, GPUs short on another: both go",
			admitted: []*Admitted{held("cpu-hog", "9", "0", 1, 1), held("gpu-hog", "1", "4", 1, 2)},
			pending:  makeWL("high", "a", 5).Req(cpu, "2").Req(gpu, "1").Prio(10).Obj(),
			want:     []string{"cpu-hog", "gpu-hog"},
		},
		{
			name:     "one victim frees both groups: it is taken once",
			admitted: []*Admitted{held("both", "9", "4", 1, 1), held("small", "1", "0", 1, 2)},
			pending:  makeWL("high", "a", 5).Req(cpu, "5").Req(gpu, "2").Prio(10).Obj(),
			want:     []string{"both"},
		},
		{
			name:     "a group that cannot fit even with every victim: nothing is preempted",
			admitted: []*Admitted{held("low", "1", "4", 1, 1), held("same", "9", "0", 10, 2)},
			pending:  makeWL("high", "a", 5).Req(cpu, "2").Req(gpu, "1").Prio(10).Obj(),
			want:     nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usage := map[string]Usage{"a": {}}
			for _, a := range tc.admitted {
				usage["a"].Add(a.Usage)
			}
			snap := NewSnapshot(makeConfig(fls, cq), usage, map[string]labels.Set{"ns": {}})
			snap.Admitted = map[string][]*Admitted{"a": tc.admitted}
			d := Decide(snap, seqs(tc.pending), func(*Workload, Verdict, int) {})
			if diff := cmp.Diff(tc.want, victimNames(d)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVictimsFollowCharges asks for victims twice in one Snapshot, with a
// Charge between that makes a queue borrow: the second answer must see it
// (findVictims caches which queues borrow).
func TestVictimsFollowCharges(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f1", "tier", "1")}
	a := withPolicy(makeCQ("a").Cohort("ml").Group(cpu).Flavor("f1", "cpu=6").Obj(), "LowerPriority", "Any", "Never", nil)
	b := withPolicy(makeCQ("b").Cohort("ml").Group(cpu).Flavor("f1", "cpu=4").Obj(), "LowerPriority", "Any", "Never", nil)
	snap := NewSnapshot(makeConfig(fls, a, b), usageOf("a:f1:cpu=4", "b:f1:cpu=4"), map[string]labels.Set{"ns": {}})
	snap.Admitted = map[string][]*Admitted{
		"a": {adm("a1", "a", "f1", "4", 100, 1)},
		"b": {adm("b1", "b", "f1", "4", 0, 1)},
	}
	w := makeWL("a2", "a", 2).Req(cpu, "2").Obj()
	total := flavors.Resources{cpu: amt(cpu, "2")}
	victims := func() []string {
		var names []string
		for _, v := range snap.findVictims(a, w, "f1", []corev1.ResourceName{cpu}, total) {
			names = append(names, v.W.Name)
		}
		return names
	}
	if got := victims(); len(got) != 0 {
		t.Fatalf("b does not borrow: victims = %v, want none", got)
	}
	snap.Charge("b", usageOf("b:f1:cpu=2")["b"], 1)
	if got := victims(); !cmp.Equal(got, []string{"b1"}) {
		t.Errorf("b borrows 2: victims = %v, want [b1]", got)
	}
	snap.Charge("b", usageOf("b:f1:cpu=2")["b"], -1)
	if got := victims(); len(got) != 0 {
		t.Errorf("b no longer borrows: victims = %v, want none", got)
	}
}

// TestMayFindVictims: where mayFindVictims says no candidate can exist,
// assigning with preemption finds no victim, so a pass that skips it
// decides the same; and the random cases reach both answers.
func TestMayFindVictims(t *testing.T) {
	skipped, found := 0, 0
	for seed := range int64(2000) {
		c := randomTailCase(seed)
		if !c.snap.mayPreempt() {
			continue
		}
		for q, list := range c.pending {
			cq := c.snap.Config.ClusterQueues[q]
			for _, w := range list {
				_, _, victims := c.snap.assignOrPreempt(cq, w, true)
				if c.snap.mayFindVictims(cq, w) {
					if len(victims) > 0 {
						found++
					}
					continue
				}
				skipped++
				if len(victims) > 0 {
					t.Fatalf("seed %d: %s in %s: mayFindVictims says none, but preemption finds %d victims", seed, w.Name, q, len(victims))
				}
			}
		}
	}
	t.Logf("skipped %d found %d", skipped, found)
	if skipped < 1000 || found < 1000 {
		t.Fatalf("the cases skipped %d assignments and found victims in %d: too few to show anything", skipped, found)
	}
}
