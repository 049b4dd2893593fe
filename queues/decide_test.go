package queues

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

const (
	cpu = corev1.ResourceCPU
	mem = corev1.ResourceMemory
	gpu = corev1.ResourceName("nvidia.com/gpu")
)

func gpuTaint() *flavors.Flavor {
	f := flavor("gpu", "node-type", "gpu")
	f.NodeTaints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	return f
}

func TestDecide(t *testing.T) {
	fls := []*flavors.Flavor{flavor("spot", "tier", "spot"), flavor("on-demand", "tier", "on-demand"), gpuTaint()}
	single := makeCQ("a").Group(cpu, mem).Flavor("on-demand", "cpu=10", "memory=10Gi").Obj()
	twoFlavors := makeCQ("a").Group(cpu).Flavor("spot", "cpu=4").Flavor("on-demand", "cpu=10").Obj()
	strict := makeCQ("a").Strict().Group(cpu).Flavor("on-demand", "cpu=10").Obj()
	cohortA := func(lim ...string) *ClusterQueue {
		q := "cpu=10"
		if len(lim) > 0 {
			q = lim[0]
		}
		return makeCQ("a").Cohort("ml").Group(cpu).Flavor("on-demand", q).Obj()
	}
	cohortB := func(lim ...string) *ClusterQueue {
		q := "cpu=10"
		if len(lim) > 0 {
			q = lim[0]
		}
		return makeCQ("b").Cohort("ml").Group(cpu).Flavor("on-demand", q).Obj()
	}

	cases := []struct {
		name    string
		cqs     []*ClusterQueue
		usage   map[string]Usage
		pending []*Workload
		want    []string
		waits   map[string]string // workload -> verdict code
	}{
		{
			name:    "fits in an empty queue",
			cqs:     []*ClusterQueue{single},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "4").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "exactly fills the quota",
			cqs:     []*ClusterQueue{single},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "10").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "does not fit beside existing usage",
			cqs:     []*ClusterQueue{single},
			usage:   usageOf("a:on-demand:cpu=8"),
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "4").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "quota/on-demand/cpu"},
		},
		{
			name:    "pods multiply by count",
			cqs:     []*ClusterQueue{single},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "3").Count(4).Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "exceeds-quota"},
		},
		{
			name:    "all or nothing across resources",
			cqs:     []*ClusterQueue{single},
			usage:   usageOf("a:on-demand:memory=9Gi"),
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "1").Req(mem, "2Gi").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "quota/on-demand/memory"},
		},
		{
			name:    "resource not covered is inadmissible",
			cqs:     []*ClusterQueue{single},
			pending: []*Workload{makeWL("j1", "a", 1).Req(gpu, "1").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "not-covered"},
		},
		{
			name:    "unknown queue is inadmissible",
			cqs:     []*ClusterQueue{single},
			pending: []*Workload{makeWL("j1", "nope", 1).Req(cpu, "1").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "unknown-queue"},
		},
		{
			name:    "first flavor in order wins",
			cqs:     []*ClusterQueue{twoFlavors},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Obj()},
			want:    []string{"j1@spot"},
		},
		{
			name:    "falls through to the next flavor when the first is full",
			cqs:     []*ClusterQueue{twoFlavors},
			usage:   usageOf("a:spot:cpu=3"),
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "skips a flavor whose labels conflict with the nodeSelector",
			cqs:     []*ClusterQueue{twoFlavors},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Selector("tier", "on-demand").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "a selector no flavor matches is inadmissible",
			cqs:     []*ClusterQueue{twoFlavors},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Selector("tier", "gold").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "no-matching-flavor"},
		},
		{
			name:    "an unrelated selector key does not rule a flavor out",
			cqs:     []*ClusterQueue{twoFlavors},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Selector("zone", "a").Obj()},
			want:    []string{"j1@spot"},
		},
		{
			name:    "a tainted flavor is skipped without a toleration",
			cqs:     []*ClusterQueue{makeCQ("a").Group(cpu).Flavor("gpu", "cpu=10").Flavor("on-demand", "cpu=10").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "a tainted flavor is used with a toleration",
			cqs:     []*ClusterQueue{makeCQ("a").Group(cpu).Flavor("gpu", "cpu=10").Flavor("on-demand", "cpu=10").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Tolerate(corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}).Obj()},
			want:    []string{"j1@gpu"},
		},
		{
			name:    "two resource groups each get a flavor",
			cqs:     []*ClusterQueue{makeCQ("a").Group(cpu).Flavor("on-demand", "cpu=10").Group(gpu).Flavor("gpu", "nvidia.com/gpu=4").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Req(gpu, "1").Tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists}).Obj()},
			want:    []string{"j1@on-demand+gpu"},
		},
		{
			name: "BestEffortFIFO skips a head that does not fit",
			cqs:  []*ClusterQueue{single},
			pending: []*Workload{
				makeWL("big", "a", 1).Req(cpu, "8").Obj(),
				makeWL("small", "a", 2).Req(cpu, "2").Obj(),
			},
			usage: usageOf("a:on-demand:cpu=4"),
			want:  []string{"small@on-demand"},
			waits: map[string]string{"big": "quota/on-demand/cpu"},
		},
		{
			name: "StrictFIFO blocks behind its head",
			cqs:  []*ClusterQueue{strict},
			pending: []*Workload{
				makeWL("big", "a", 1).Req(cpu, "8").Obj(),
				makeWL("small", "a", 2).Req(cpu, "2").Obj(),
			},
			usage: usageOf("a:on-demand:cpu=4"),
			want:  []string{},
			waits: map[string]string{"big": "quota/on-demand/cpu", "small": "strict-fifo"},
		},
		{
			name: "StrictFIFO does not block behind an inadmissible Job",
			cqs:  []*ClusterQueue{strict},
			pending: []*Workload{
				makeWL("huge", "a", 1).Req(cpu, "80").Obj(),
				makeWL("small", "a", 2).Req(cpu, "2").Obj(),
			},
			want:  []string{"small@on-demand"},
			waits: map[string]string{"huge": "exceeds-quota"},
		},
		{
			name: "FIFO by creation time within a priority",
			cqs:  []*ClusterQueue{single},
			pending: []*Workload{
				makeWL("second", "a", 2).Req(cpu, "6").Obj(),
				makeWL("first", "a", 1).Req(cpu, "6").Obj(),
			},
			want:  []string{"first@on-demand"},
			waits: map[string]string{"second": "quota/on-demand/cpu"},
		},
		{
			name: "higher priority goes first",
			cqs:  []*ClusterQueue{single},
			pending: []*Workload{
				makeWL("old-low", "a", 1).Req(cpu, "6").Prio(1).Obj(),
				makeWL("new-high", "a", 2).Req(cpu, "6").Prio(100).Obj(),
			},
			want:  []string{"new-high@on-demand"},
			waits: map[string]string{"old-low": "quota/on-demand/cpu"},
		},
		{
			name:    "borrows unused quota from the cohort",
			cqs:     []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "15").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "cannot borrow what the cohort uses",
			cqs:     []*ClusterQueue{cohortA(), cohortB()},
			usage:   usageOf("b:on-demand:cpu=8"),
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "13").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "quota/on-demand/cpu"},
		},
		{
			name: "a lender's own Workload goes before an older one that would borrow from it",
			cqs:  []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{
				makeWL("old-borrower", "a", 1).Req(cpu, "15").Obj(),
				makeWL("new-own", "b", 2).Req(cpu, "10").Obj(),
			},
			want:  []string{"new-own@on-demand"},
			waits: map[string]string{"old-borrower": "quota/on-demand/cpu"},
		},
		{
			name: "a borrower still gets what the lender's own Workloads leave",
			cqs:  []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{
				makeWL("old-borrower", "a", 1).Req(cpu, "14").Obj(),
				makeWL("new-own", "b", 2).Req(cpu, "6").Obj(),
			},
			want: []string{"new-own@on-demand", "old-borrower@on-demand"},
		},
		{
			name: "within a queue, a head that borrows keeps its place ahead of a later one that fits",
			cqs:  []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{
				makeWL("head", "a", 1).Req(cpu, "15").Obj(),
				makeWL("next", "a", 2).Req(cpu, "6").Obj(),
			},
			want:  []string{"head@on-demand"},
			waits: map[string]string{"next": "quota/on-demand/cpu"},
		},
		{
			name:  "a StrictFIFO lender's blocked head holds back its queue in both walks",
			cqs:   []*ClusterQueue{makeCQ("a").Cohort("ml").Strict().Group(cpu).Flavor("on-demand", "cpu=10").Obj(), cohortB()},
			usage: usageOf("b:on-demand:cpu=10", "a:on-demand:cpu=5"),
			pending: []*Workload{
				makeWL("head", "a", 1).Req(cpu, "6").Obj(),
				makeWL("next", "a", 2).Req(cpu, "1").Obj(),
			},
			want:  []string{},
			waits: map[string]string{"head": "quota/on-demand/cpu", "next": "strict-fifo"},
		},
		{
			name:    "borrowingLimit caps borrowing",
			cqs:     []*ClusterQueue{cohortA("cpu=10/3"), cohortB()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "14").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "exceeds-quota"},
		},
		{
			name:    "borrowingLimit allows up to the limit",
			cqs:     []*ClusterQueue{cohortA("cpu=10/3"), cohortB()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "13").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "borrowingLimit counts what is already borrowed",
			cqs:     []*ClusterQueue{cohortA("cpu=10/3"), cohortB()},
			usage:   usageOf("a:on-demand:cpu=12"),
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "2").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "quota/on-demand/cpu"},
		},
		{
			name:    "lendingLimit caps what a queue lends",
			cqs:     []*ClusterQueue{cohortA(), cohortB("cpu=10/-/4")},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "15").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "exceeds-quota"},
		},
		{
			name:    "lendingLimit lends up to the limit",
			cqs:     []*ClusterQueue{cohortA(), cohortB("cpu=10/-/4")},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "14").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "the guaranteed part of a lender stays its own",
			cqs:     []*ClusterQueue{cohortA(), cohortB("cpu=10/-/4")},
			usage:   usageOf("a:on-demand:cpu=14"),
			pending: []*Workload{makeWL("j1", "b", 1).Req(cpu, "6").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name:    "a lender gets back only the unborrowed part of its lendable quota",
			cqs:     []*ClusterQueue{cohortA(), cohortB("cpu=10/-/4")},
			usage:   usageOf("a:on-demand:cpu=14"),
			pending: []*Workload{makeWL("j1", "b", 1).Req(cpu, "7").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "quota/on-demand/cpu"},
		},
		{
			name: "a pass charges as it admits",
			cqs:  []*ClusterQueue{single},
			pending: []*Workload{
				makeWL("j1", "a", 1).Req(cpu, "4").Obj(),
				makeWL("j2", "a", 2).Req(cpu, "4").Obj(),
				makeWL("j3", "a", 3).Req(cpu, "4").Obj(),
			},
			want:  []string{"j1@on-demand", "j2@on-demand"},
			waits: map[string]string{"j3": "quota/on-demand/cpu"},
		},
		{
			name: "priority decides across queues of a cohort",
			cqs:  []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{
				makeWL("a-low", "a", 1).Req(cpu, "12").Prio(1).Obj(),
				makeWL("b-high", "b", 2).Req(cpu, "12").Prio(10).Obj(),
			},
			want:  []string{"b-high@on-demand"},
			waits: map[string]string{"a-low": "quota/on-demand/cpu"},
		},
		{
			name: "age decides across queues of a cohort",
			cqs:  []*ClusterQueue{cohortA(), cohortB()},
			pending: []*Workload{
				makeWL("b-old", "b", 1).Req(cpu, "12").Obj(),
				makeWL("a-new", "a", 2).Req(cpu, "12").Obj(),
			},
			want:  []string{"b-old@on-demand"},
			waits: map[string]string{"a-new": "quota/on-demand/cpu"},
		},
		{
			name: "queues without a cohort are independent",
			cqs: []*ClusterQueue{
				makeCQ("a").Group(cpu).Flavor("on-demand", "cpu=4").Obj(),
				makeCQ("b").Group(cpu).Flavor("on-demand", "cpu=4").Obj(),
			},
			pending: []*Workload{
				makeWL("a1", "a", 1).Req(cpu, "4").Obj(),
				makeWL("b1", "b", 2).Req(cpu, "4").Obj(),
				makeWL("a2", "a", 3).Req(cpu, "1").Obj(),
			},
			want:  []string{"a1@on-demand", "b1@on-demand"},
			waits: map[string]string{"a2": "quota/on-demand/cpu"},
		},
		{
			name: "whenCanBorrow Borrow takes the first flavor even if it borrows",
			cqs: []*ClusterQueue{
				makeCQ("a").Cohort("ml").Group(cpu).Flavor("spot", "cpu=2").Flavor("on-demand", "cpu=10").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("spot", "cpu=10").Obj(),
			},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "4").Obj()},
			want:    []string{"j1@spot"},
		},
		{
			name: "whenCanBorrow TryNextFlavor prefers a later flavor within nominal",
			cqs: []*ClusterQueue{
				makeCQ("a").Cohort("ml").WhenCanBorrow("TryNextFlavor").Group(cpu).Flavor("spot", "cpu=2").Flavor("on-demand", "cpu=10").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("spot", "cpu=10").Obj(),
			},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "4").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name: "whenCanBorrow TryNextFlavor still borrows when nothing else fits",
			cqs: []*ClusterQueue{
				makeCQ("a").Cohort("ml").WhenCanBorrow("TryNextFlavor").Group(cpu).Flavor("spot", "cpu=2").Flavor("on-demand", "cpu=1").Obj(),
				makeCQ("b").Cohort("ml").Group(cpu).Flavor("spot", "cpu=10").Obj(),
			},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "4").Obj()},
			want:    []string{"j1@spot"},
		},
		{
			name:    "a held queue admits nothing",
			cqs:     []*ClusterQueue{makeCQ("a").Stop("Hold").Group(cpu).Flavor("on-demand", "cpu=10").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "1").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "held"},
		},
		{
			name:    "a namespace the selector does not select is inadmissible",
			cqs:     []*ClusterQueue{makeCQ("a").Selector(labels.SelectorFromSet(labels.Set{"team": "x"})).Group(cpu).Flavor("on-demand", "cpu=10").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "1").NS("other").Obj()},
			want:    []string{},
			waits:   map[string]string{"j1": "namespace-not-selected"},
		},
		{
			name:    "a namespace the selector selects is admitted",
			cqs:     []*ClusterQueue{makeCQ("a").Selector(labels.SelectorFromSet(labels.Set{"team": "x"})).Group(cpu).Flavor("on-demand", "cpu=10").Obj()},
			pending: []*Workload{makeWL("j1", "a", 1).Req(cpu, "1").NS("team-x").Obj()},
			want:    []string{"j1@on-demand"},
		},
		{
			name: "one whose pod sets could not be read is inadmissible; the next of its namespace is not",
			cqs:  []*ClusterQueue{single},
			pending: []*Workload{func() *Workload {
				w := makeWL("j1", "a", 1).Req(cpu, "1").Obj()
				w.Unresolved = `ClusterTrainingRuntime "x" not found`
				return w
			}(), makeWL("j2", "a", 1).Req(cpu, "1").Obj()},
			want:  []string{"j2@on-demand"},
			waits: map[string]string{"j1": "unresolved"},
		},
		{
			name:    "a Job with no requests fits anywhere",
			cqs:     []*ClusterQueue{single},
			usage:   usageOf("a:on-demand:cpu=10"),
			pending: []*Workload{makeWL("j1", "a", 1).Obj()},
			want:    []string{"j1@"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := makeConfig(fls, tc.cqs...)
			snap := NewSnapshot(cfg, CloneUsages(tc.usage), map[string]labels.Set{"team-x": {"team": "x"}, "ns": {}, "other": {}})
			waits := map[string]string{}
			got := admittedNames(Decide(snap, seqs(tc.pending...), func(w *Workload, v Verdict, _ int) {
				if v.Kind != Fits {
					waits[w.Name] = v.Code
				}
			}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
			if tc.waits == nil {
				tc.waits = map[string]string{}
			}
			if diff := cmp.Diff(tc.waits, waits); diff != "" {
				t.Errorf("verdict codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	gpuF := flavor("nvidia-gpu-flavor", "gpu", "true")
	cases := []struct {
		name  string
		cqs   []*ClusterQueue
		usage map[string]Usage
		w     *Workload
		want  string
	}{
		{
			name:  "pending names the need, the usage and the cohort",
			cqs:   []*ClusterQueue{makeCQ("cluster-queue-a").Cohort("ml").Group(gpu).Flavor("nvidia-gpu-flavor", "nvidia.com/gpu=10").Obj(), makeCQ("b").Cohort("ml").Group(gpu).Flavor("nvidia-gpu-flavor", "nvidia.com/gpu=0").Obj()},
			usage: usageOf("cluster-queue-a:nvidia-gpu-flavor:nvidia.com/gpu=8"),
			w:     makeWL("j", "cluster-queue-a", 1).Req(gpu, "4").Obj(),
			want:  "Waiting for quota: needs nvidia.com/gpu=4 in flavor nvidia-gpu-flavor; ClusterQueue cluster-queue-a uses 8 of 10, cohort ml can lend 0",
		},
		{
			name: "can never fit names the ceiling",
			cqs:  []*ClusterQueue{makeCQ("cluster-queue-a").Group(gpu).Flavor("nvidia-gpu-flavor", "nvidia.com/gpu=10").Obj()},
			w:    makeWL("j", "cluster-queue-a", 1).Req(gpu, "16").Obj(),
			want: "Can never fit: requests nvidia.com/gpu=16, ClusterQueue cluster-queue-a allows at most 10 in flavor nvidia-gpu-flavor (nominal 10 + borrowing 0)",
		},
		{
			name: "pending names a flavor that could fit, not one that never can",
			cqs: []*ClusterQueue{makeCQ("q").Group(cpu, gpu).
				Flavor("cpu-flavor", "cpu=8", "nvidia.com/gpu=0").
				Flavor("nvidia-gpu-flavor", "cpu=16", "nvidia.com/gpu=4").Obj()},
			usage: usageOf("q:cpu-flavor:cpu=7", "q:nvidia-gpu-flavor:nvidia.com/gpu=4"),
			w:     makeWL("j", "q", 1).Req(cpu, "2").Req(gpu, "1").Obj(),
			want:  "Waiting for quota: needs nvidia.com/gpu=1 in flavor nvidia-gpu-flavor; ClusterQueue q uses 4 of 4",
		},
		{
			name: "can never fit names the flavor that comes closest",
			cqs: []*ClusterQueue{makeCQ("q").Group(cpu, gpu).
				Flavor("cpu-flavor", "cpu=8", "nvidia.com/gpu=0").
				Flavor("nvidia-gpu-flavor", "cpu=16", "nvidia.com/gpu=4").Obj()},
			w:    makeWL("j", "q", 1).Req(gpu, "16").Obj(),
			want: "Can never fit: requests nvidia.com/gpu=16, ClusterQueue q allows at most 4 in flavor nvidia-gpu-flavor (nominal 4 + borrowing 0)",
		},
		{
			name: "not covered names the resource",
			cqs:  []*ClusterQueue{makeCQ("q").Group(gpu).Flavor("nvidia-gpu-flavor", "nvidia.com/gpu=10").Obj()},
			w:    makeWL("j", "q", 1).Req(cpu, "500m").Obj(),
			want: "Can never fit: requests cpu=500m, which ClusterQueue q does not cover",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := NewSnapshot(makeConfig([]*flavors.Flavor{gpuF}, tc.cqs...), tc.usage, map[string]labels.Set{"ns": {}})
			_, v := snap.Assign(tc.w)
			if diff := cmp.Diff(tc.want, v.Message()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideReserved(t *testing.T) {
	fls := []*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}
	cqs := []*ClusterQueue{
		makeCQ("a").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=10").Obj(),
		makeCQ("b").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=10").Obj(),
		makeCQ("lender").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=8").Obj(),
	}
	// a and b are full; the lender has 4 to lend, just freed by preempting
	// for the preemptor. Both Workloads can only borrow.
	older := makeWL("older", "a", 1).Req(cpu, "4").Obj()
	preemptor := makeWL("preemptor", "b", 5).Req(cpu, "4").Obj()
	// A Workload of higher priority arrived in the preemptor's queue.
	higher := makeWL("higher", "b", 6).Req(cpu, "4").Prio(10).Obj()
	for _, tc := range []struct {
		name     string
		reserved []*Workload
		pending  []*Workload
		want     []string
	}{
		{name: "unreserved, the older Workload borrows first", want: []string{"older@on-demand"}},
		{name: "reserved, the preemptor takes the freed quota first", reserved: []*Workload{preemptor}, want: []string{"preemptor@on-demand"}},
		{name: "unreserved, a Workload of higher priority in its queue goes first", pending: []*Workload{higher}, want: []string{"higher@on-demand"}},
		{name: "reserved, the preemptor goes before a Workload of higher priority in its queue", reserved: []*Workload{preemptor},
			pending: []*Workload{higher}, want: []string{"preemptor@on-demand"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usage := usageOf("a:on-demand:cpu=10", "b:on-demand:cpu=10", "lender:on-demand:cpu=4")
			snap := NewSnapshot(makeConfig(fls, cqs...), usage, map[string]labels.Set{"ns": {}})
			snap.Reserved = tc.reserved
			got := admittedNames(Decide(snap, seqs(append([]*Workload{older, preemptor}, tc.pending...)...), func(*Workload, Verdict, int) {}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideYield(t *testing.T) {
	fls := []*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}
	lender := makeCQ("lender").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=4").Obj()
	a := makeCQ("a").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=4").Obj()
	// The lender has 3 to lend; a is full. The victim, back in c, is
	// older than the preemptor and of the same priority: without the
	// yield it would borrow first and leave the preemptor to preempt it
	// again.
	preemptor := makeWL("preemptor", "a", 5).Req(cpu, "2").Obj()
	victim := makeWL("victim", "c", 1).Req(cpu, "2").Obj()
	behind := makeWL("behind", "c", 2).Req(cpu, "1").Obj()
	for _, tc := range []struct {
		name   string
		c      *ClusterQueue
		yield  bool
		want   []string
		reason map[string]string
	}{
		{name: "no yield, the older victim borrows first", c: makeCQ("c").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=0").Obj(),
			want: []string{"victim@on-demand", "behind@on-demand"}, reason: map[string]string{"preemptor": "quota/on-demand/cpu"}},
		{name: "the victim waits for its preemptor", c: makeCQ("c").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=0").Obj(), yield: true,
			want: []string{"behind@on-demand", "preemptor@on-demand"}, reason: map[string]string{"victim": "yield"}},
		{name: "in a StrictFIFO queue what is behind the victim waits too", c: makeCQ("c").Cohort("ml").Group(cpu).Flavor("on-demand", "cpu=0").Strict().Obj(), yield: true,
			want: []string{"preemptor@on-demand"}, reason: map[string]string{"victim": "yield", "behind": "strict-fifo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usage := usageOf("a:on-demand:cpu=4", "lender:on-demand:cpu=1")
			snap := NewSnapshot(makeConfig(fls, lender, a, tc.c), usage, map[string]labels.Set{"ns": {}})
			if tc.yield {
				snap.Yield = map[*Workload]*Workload{victim: preemptor}
			}
			reasons := map[string]string{}
			got := admittedNames(Decide(snap, seqs(preemptor, victim, behind), func(w *Workload, v Verdict, _ int) {
				if v.Kind == Wait {
					reasons[w.Name] = v.Code
					if v.Code == "yield" && !strings.Contains(v.Message(), "ns/preemptor, which preempted this Job") {
						t.Errorf("yield message %q does not name the preemptor", v.Message())
					}
				}
			}).Admissions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reason, reasons); diff != "" {
				t.Errorf("reasons to wait (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideBudget bounds a pass by the writes it may start: admissions
// and victims count one each, the walk stops at the budget in its own
// order (priority first), what it did not reach is not observed and its
// queues are listed, and Rotate picks the independent group it starts at.
func TestDecideBudget(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f", "tier", "f")}
	within := func(name string) *ClusterQueue {
		return withPolicy(makeCQ(name).Group(cpu).Flavor("f", "cpu=4").Obj(), "LowerPriority", "", "", nil)
	}
	cqs := []*ClusterQueue{within("a"), within("b")}
	low1, low2 := makeWL("low1", "a", 1).Req(cpu, "1").Obj(), makeWL("low2", "a", 2).Req(cpu, "1").Obj()
	high := makeWL("high", "a", 3).Req(cpu, "1").Prio(10).Obj()
	b1 := makeWL("b1", "b", 4).Req(cpu, "1").Obj()
	big := makeWL("big", "a", 5).Req(cpu, "4").Prio(20).Obj()
	for _, tc := range []struct {
		name     string
		budget   int
		rotate   int
		admitted []*Admitted
		pending  []*Workload
		want     []string
		victims  []string
		observed []string
		full     bool
		rest     []string
	}{
		{name: "no budget: everything that fits", pending: []*Workload{low1, low2, high, b1},
			want: []string{"high@f", "low1@f", "low2@f", "b1@f"}, observed: []string{"high", "low1", "low2", "b1"}},
		{name: "a budget larger than the pass", budget: 5, pending: []*Workload{low1, low2, high, b1},
			want: []string{"high@f", "low1@f", "low2@f", "b1@f"}, observed: []string{"high", "low1", "low2", "b1"}},
		{name: "the budget stops the walk in priority order", budget: 2, pending: []*Workload{low1, low2, high, b1},
			want: []string{"high@f", "low1@f"}, observed: []string{"high", "low1"}, full: true, rest: []string{"a", "b"}},
		{name: "rotate starts at the second group", budget: 1, rotate: 1, pending: []*Workload{low1, low2, high, b1},
			want: []string{"b1@f"}, observed: []string{"b1"}, full: true, rest: []string{"b", "a"}},
		{name: "rotate wraps around", budget: 1, rotate: 2, pending: []*Workload{low1, low2, high, b1},
			want: []string{"high@f"}, observed: []string{"high"}, full: true, rest: []string{"a", "b"}},
		{name: "victims count against the budget", budget: 2,
			admitted: []*Admitted{adm("r1", "a", "f", "2", 0, 1), adm("r2", "a", "f", "2", 0, 2)},
			pending:  []*Workload{big, b1}, victims: []string{"r2", "r1"}, want: []string{}, observed: []string{"big"}, full: true, rest: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshotOf(makeConfig(fls, cqs...), tc.admitted)
			snap.Budget, snap.Rotate = tc.budget, tc.rotate
			observed := []string{}
			d := Decide(snap, seqs(tc.pending...), func(w *Workload, _ Verdict, _ int) { observed = append(observed, w.Name) })
			if diff := cmp.Diff(tc.want, admittedNames(d.Admissions)); diff != "" {
				t.Errorf("admitted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.victims, victimNames(d)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.observed, observed); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
			if d.Full != tc.full {
				t.Errorf("Full %v, want %v", d.Full, tc.full)
			}
			if diff := cmp.Diff(tc.rest, d.Rest); diff != "" {
				t.Errorf("queues not finished (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrictFIFOMessage checks the message of the Workloads behind a
// StrictFIFO queue's head, on both ways a pass reaches them: the walk
// behind the head, and a try after a Workload the pass took already
// (here one whose quota was reserved) breaks the walk.
func TestStrictFIFOMessage(t *testing.T) {
	fls := []*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}
	strict := makeCQ("a").Strict().Group(cpu).Flavor("on-demand", "cpu=10").Obj()
	big := makeWL("big", "a", 1).Req(cpu, "8").Obj()
	next := makeWL("next", "a", 2).Req(cpu, "2").Obj()
	reserved := makeWL("reserved", "a", 3).Req(cpu, "2").Obj()
	last := makeWL("last", "a", 4).Req(cpu, "2").Obj()
	snap := NewSnapshot(makeConfig(fls, strict), usageOf("a:on-demand:cpu=4"), map[string]labels.Set{"ns": {}})
	snap.Reserved = []*Workload{reserved}
	got := map[string]string{}
	d := Decide(snap, seqs(big, next, reserved, last), func(w *Workload, v Verdict, _ int) {
		switch {
		case v.Code == "strict-fifo":
			got[w.Name] = v.Code + ": " + v.Message()
		case v.Kind == Wait:
			got[w.Name] = v.Code
		}
	})
	if diff := cmp.Diff([]string{"reserved@on-demand"}, admittedNames(d.Admissions)); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	behind := "strict-fifo: Waiting behind " + big.Key() + ", the head of StrictFIFO ClusterQueue a"
	want := map[string]string{
		"big":  "quota/on-demand/cpu",
		"next": behind,
		"last": behind,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestGroups: the queues with pending work split into cohort trees and
// lone queues, each group in name order and the groups in the order of
// their first pending names; a queue the config does not hold is alone.
func TestGroups(t *testing.T) {
	fls := []*flavors.Flavor{flavor("f", "tier", "f")}
	cq := func(name, cohort string) *ClusterQueue {
		return makeCQ(name).Cohort(cohort).Group(cpu).Flavor("f", "cpu=4").Obj()
	}
	cfg := makeConfig(fls, cq("a1", "x"), cq("z1", "x"), cq("m", ""), cq("c", "y"), cq("b", "y"), cq("q", ""))
	for _, tc := range []struct {
		pending []string
		want    [][]string
	}{
		{pending: nil, want: nil},
		{pending: []string{"a1", "z1", "m", "b", "c", "q"}, want: [][]string{{"a1", "z1"}, {"b", "c"}, {"m"}, {"q"}}},
		// x's first member waits for nothing: x comes after m.
		{pending: []string{"z1", "m", "c"}, want: [][]string{{"c"}, {"m"}, {"z1"}}},
		{pending: []string{"q", "gone", "a1"}, want: [][]string{{"a1"}, {"gone"}, {"q"}}},
	} {
		pending := map[string][]*Workload{}
		for _, q := range tc.pending {
			pending[q] = nil
		}
		got := NewSnapshot(cfg, nil, nil).groups(pending)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("groups of %v (-want +got):\n%s", tc.pending, diff)
		}
	}
}
