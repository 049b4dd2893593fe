package queues

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func nsTerm(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

// Affinity sets the Workload's own required node affinity terms.
func (b *wlB) Affinity(terms ...corev1.NodeSelectorTerm) *wlB { b.w.NodeAffinity = terms; return b }

const (
	opIn           = corev1.NodeSelectorOpIn
	opNotIn        = corev1.NodeSelectorOpNotIn
	opExists       = corev1.NodeSelectorOpExists
	opDoesNotExist = corev1.NodeSelectorOpDoesNotExist
	opGt           = corev1.NodeSelectorOpGt
	opLt           = corev1.NodeSelectorOpLt
)

func zoneFlavors() []*flavors.Flavor {
	return []*flavors.Flavor{
		flavor("zone-a", "zone", "a", "cores", "16"),
		flavor("zone-b", "zone", "b", "cores", "64"),
		flavor("plain"),
	}
}

// TestAssignNodeAffinity: flavors whose node labels the Job's required node
// affinity rules out are skipped, and a Job that can run on none of them
// never fits, with the reason.
func TestAssignNodeAffinity(t *testing.T) {
	zones := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").Obj()
	withPlain := makeCQ("p").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("plain", "cpu=10").Obj()
	const never = "Can never fit: no flavor of ClusterQueue q can run the Job: "
	cases := []struct {
		name  string
		w     *wlB // asks for one CPU unless it says otherwise
		usage map[string]Usage
		want  string // the flavor, or the verdict's code and message
	}{
		{name: "no affinity takes the first flavor", w: makeWL("j", "q", 1), want: "zone-a"},
		{name: "In the second flavor's zone", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "b"))), want: "zone-b"},
		{name: "In the first flavor's zone", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "a"))), want: "zone-a"},
		{name: "In either zone", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "b", "a"))), want: "zone-a"},
		{name: "NotIn the first flavor's zone", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opNotIn, "a"))), want: "zone-b"},
		{name: "Exists", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opExists))), want: "zone-a"},
		{name: "DoesNotExist on a key every flavor sets", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opDoesNotExist))),
			want: "no-matching-flavor: " + never + "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone DoesNotExist)"},
		{name: "Gt", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("cores", opGt, "32"))), want: "zone-b"},
		{name: "Lt", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("cores", opLt, "32"))), want: "zone-a"},
		{name: "terms are ORed", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "c")), nsTerm(expr("cores", opGt, "32"))), want: "zone-b"},
		{name: "expressions are ANDed", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "a", "b"), expr("cores", opGt, "32"))), want: "zone-b"},
		{name: "a key no flavor sets is ignored", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("kubernetes.io/hostname", opIn, "node-7"))), want: "zone-a"},
		{name: "a key no flavor sets is dropped from its term", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("kubernetes.io/hostname", opIn, "node-7"), expr("zone", opIn, "b"))), want: "zone-b"},
		{name: "a term of keys no flavor sets allows every flavor", w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "c")), nsTerm(expr("kubernetes.io/hostname", opIn, "node-7"))), want: "zone-a"},
		{name: "nodeSelector and affinity together", w: makeWL("j", "q", 1).Selector("zone", "b").Affinity(nsTerm(expr("cores", opGt, "32"))), want: "zone-b"},
		{name: "nodeSelector and affinity rule out a flavor each",
			w:    makeWL("j", "q", 1).Selector("zone", "a").Affinity(nsTerm(expr("cores", opGt, "32"))),
			want: "no-matching-flavor: " + never + "flavor zone-a has node label cores=16, which the Job's required node affinity does not allow (cores Gt 32)"},
		{name: "affinity no flavor allows",
			w:    makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "c"))),
			want: "no-matching-flavor: " + never + "flavor zone-a has node label zone=a, which the Job's required node affinity does not allow (zone In [c])"},
		{name: "several terms no flavor allows",
			w:    makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "c")), nsTerm(expr("cores", opLt, "8"))),
			want: "no-matching-flavor: " + never + "flavor zone-a has node labels zone=a, cores=16, which the Job's required node affinity does not allow (zone In [c] or cores Lt 8)"},
		{name: "a Job that may only use a full flavor waits for it, not for one it cannot use",
			w: makeWL("j", "q", 1).Affinity(nsTerm(expr("zone", opIn, "b"))), usage: usageOf("q:zone-b:cpu=10"),
			want: "quota/zone-b/cpu: Waiting for quota: needs cpu=1 in flavor zone-b; ClusterQueue q uses 10 of 10"},
		{name: "a Job too big for the one flavor it may use never fits for its size",
			w:    makeWL("j", "q", 1).Req(cpu, "11").Affinity(nsTerm(expr("zone", opIn, "b"))),
			want: "exceeds-quota: Can never fit: requests cpu=11, ClusterQueue q allows at most 10 in flavor zone-b (nominal 10 + borrowing 0)"},
		{name: "a flavor without labels says nothing about the zone", w: makeWL("j", "p", 1).Affinity(nsTerm(expr("zone", opIn, "b"))), want: "plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := tc.w.w.PodSets[0].Requests[cpu]; !ok {
				tc.w.Req(cpu, "1")
			}
			w := tc.w.Obj()
			cfg := makeConfig(zoneFlavors(), zones, withPlain)
			a, v := NewSnapshot(cfg, CloneUsages(tc.usage), map[string]labels.Set{"ns": {}}).Assign(w)
			got := v.Code + ": " + v.Message()
			if v.Kind == Fits {
				got = a.Flavors[0]
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDecideNodeAffinity: in a pass, each Job takes the first flavor its
// affinity allows, and one that no flavor allows is inadmissible.
func TestDecideNodeAffinity(t *testing.T) {
	cq := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=2").Flavor("zone-b", "cpu=2").Obj()
	cfg := makeConfig(zoneFlavors(), cq)
	pending := seqs(
		makeWL("wants-b", "q", 1).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(),
		makeWL("any", "q", 2).Req(cpu, "2").Obj(),
		makeWL("wants-c", "q", 3).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "c"))).Obj(),
		makeWL("wants-b-too", "q", 4).Req(cpu, "1").Affinity(nsTerm(expr("zone", opNotIn, "a"))).Obj(),
		makeWL("wants-b-again", "q", 5).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(),
	)
	waits := map[string]string{}
	d := Decide(NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}}), pending, func(w *Workload, v Verdict, _ int) {
		if v.Kind != Fits {
			waits[w.Name] = v.Code
		}
	})
	if diff := cmp.Diff([]string{"wants-b@zone-b", "any@zone-a", "wants-b-too@zone-b"}, admittedNames(d.Admissions)); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"wants-c": "no-matching-flavor", "wants-b-again": "quota/zone-b/cpu"}, waits); diff != "" {
		t.Errorf("verdict codes (-want +got):\n%s", diff)
	}
}

// TestCandidatesNodeAffinity: the candidate flavors, from which the webhook
// builds the pods' node affinity, leave out those the Job's own affinity
// rules out, in every resource group.
func TestCandidatesNodeAffinity(t *testing.T) {
	fls := append(zoneFlavors(), flavor("gpu-a", "zone", "a", "accel", "t4"), flavor("gpu-b", "zone", "b", "accel", "a100"))
	one := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").Flavor("plain", "cpu=10").Obj()
	two := makeCQ("g").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").
		Group(gpu).Flavor("gpu-a", "nvidia.com/gpu=4").Flavor("gpu-b", "nvidia.com/gpu=4").Obj()
	cfg := makeConfig(fls, one, two)
	for _, tc := range []struct {
		name string
		w    *Workload
		want [][]string
	}{
		{"no affinity", makeWL("j", "q", 1).Req(cpu, "1").Obj(), [][]string{{"zone-a"}, {"zone-b"}, {"plain"}}},
		{"zone b", makeWL("j", "q", 1).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(), [][]string{{"zone-b"}, {"plain"}}},
		{"zone b by nodeSelector", makeWL("j", "q", 1).Req(cpu, "1").Selector("zone", "b").Obj(), [][]string{{"zone-b"}, {"plain"}}},
		{"a hostname only", makeWL("j", "q", 1).Req(cpu, "1").Affinity(nsTerm(expr("kubernetes.io/hostname", opIn, "n1"))).Obj(), [][]string{{"zone-a"}, {"zone-b"}, {"plain"}}},
		{"two groups, no affinity", makeWL("j", "g", 1).Req(cpu, "1").Req(gpu, "1").Obj(),
			[][]string{{"zone-a", "gpu-a"}, {"zone-a", "gpu-b"}, {"zone-b", "gpu-a"}, {"zone-b", "gpu-b"}}},
		{"two groups, zone b", makeWL("j", "g", 1).Req(cpu, "1").Req(gpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(),
			[][]string{{"zone-b", "gpu-b"}}},
		{"two groups, an accelerator", makeWL("j", "g", 1).Req(cpu, "1").Req(gpu, "1").Affinity(nsTerm(expr("accel", opIn, "a100"))).Obj(),
			[][]string{{"zone-a", "gpu-b"}, {"zone-b", "gpu-b"}}},
		{"two groups, nothing allowed", makeWL("j", "g", 1).Req(cpu, "1").Req(gpu, "1").Affinity(nsTerm(expr("zone", opIn, "c"))).Obj(), nil},
		{"two groups, one used", makeWL("j", "g", 1).Req(cpu, "1").Obj(), [][]string{{"zone-a"}, {"zone-b"}}},
		{"asks for nothing covered: still the queue's flavors", makeWL("j", "q", 1).Obj(), [][]string{{"zone-a"}, {"zone-b"}, {"plain"}}},
		{"asks for nothing covered, two groups", makeWL("j", "g", 1).Req("example.com/uncovered", "1").Obj(),
			[][]string{{"zone-a", "gpu-a"}, {"zone-a", "gpu-b"}, {"zone-b", "gpu-a"}, {"zone-b", "gpu-b"}}},
		{"two groups, pod sets not read: every group", func() *Workload {
			w := makeWL("j", "g", 1).Req(cpu, "1").Obj()
			w.Unresolved = "ResourceClaimTemplate \"x\" not found"
			return w
		}(), [][]string{{"zone-a", "gpu-a"}, {"zone-a", "gpu-b"}, {"zone-b", "gpu-a"}, {"zone-b", "gpu-b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]string
			for _, combo := range cfg.Candidates(cfg.ClusterQueues[tc.w.Queue], tc.w) {
				var names []string
				for _, f := range combo {
					names = append(names, f.Name)
				}
				got = append(got, names)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWorkloadFromJobAffinity: the Job's own terms come from the annotation
// when it is there (even empty), and from the pod template when not.
func TestWorkloadFromJobAffinity(t *testing.T) {
	userB := []corev1.NodeSelectorTerm{zoneIn("b")}
	candidates := []corev1.NodeSelectorTerm{zoneIn("a"), zoneIn("b")}
	withAnnotation := func(ann string, required ...corev1.NodeSelectorTerm) *batchv1.Job {
		j := zoneJob("j", required...)
		j.Annotations = map[string]string{AnnotationUserAffinity: ann}
		return j
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want []corev1.NodeSelectorTerm
	}{
		{"no annotation: the pod template's terms", zoneJob("j", userB...), userB},
		{"no annotation and no affinity", zoneJob("j"), nil},
		{"the annotation's terms, not the candidates'", withAnnotation(EncodeUserTerms(userB), candidates...), userB},
		{"an empty annotation: none, not the candidates'", withAnnotation("", candidates...), nil},
		{"an annotation that does not parse: the pod template's", withAnnotation("{", candidates...), candidates},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := WorkloadFromJob(tc.job, "q", 0)
			if diff := cmp.Diff(tc.want, w.NodeAffinity); diff != "" {
				t.Errorf("NodeAffinity (-want +got):\n%s", diff)
			}
			if (w.place == nil) != (len(tc.want) == 0) {
				t.Errorf("placement %v with terms %v", w.place, tc.want)
			}
		})
	}
}

// TestPlacementShared: Workloads that ask the same share one placement, and
// the terms decoded from their annotation.
func TestPlacementShared(t *testing.T) {
	ann := EncodeUserTerms([]corev1.NodeSelectorTerm{zoneIn("b")})
	job := func(sel map[string]string) *batchv1.Job {
		j := zoneJob("j", zoneIn("a"), zoneIn("b"))
		j.Annotations = map[string]string{AnnotationUserAffinity: ann}
		j.Spec.Template.Spec.NodeSelector = sel
		return j
	}
	w1 := WorkloadFromJob(job(nil), "q", 0)
	w2 := WorkloadFromJob(job(nil), "q", 0)
	w3 := WorkloadFromJob(job(map[string]string{"disk": "ssd"}), "q", 0)
	w4 := makeWL("built", "q", 1).Affinity(zoneIn("b")).Obj()
	if w1.place == nil || w1.place != w2.place {
		t.Fatalf("placements %p and %p, want one shared", w1.place, w2.place)
	}
	if &w1.NodeAffinity[0] != &w2.NodeAffinity[0] {
		t.Errorf("each Workload decoded its own terms")
	}
	if w3.place == w1.place {
		t.Errorf("a Workload with a nodeSelector shares the placement of one without")
	}
	if w4.place != w1.place {
		t.Errorf("a Workload built with the same terms has placement %p, want %p", w4.place, w1.place)
	}
	runtime.KeepAlive([]*Workload{w1, w2, w3, w4})
}

// TestPlacementConfigReload: a placement remembers its answer per flavor
// object, so a reloaded flavor of the same name is matched afresh.
func TestPlacementConfigReload(t *testing.T) {
	w := makeWL("j", "q", 1).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj()
	cq := makeCQ("q").Group(cpu).Flavor("x", "cpu=10").Obj()
	snap := func(zone string) *Snapshot {
		return NewSnapshot(makeConfig([]*flavors.Flavor{flavor("x", "zone", zone)}, cq), nil, map[string]labels.Set{"ns": {}})
	}
	if _, v := snap("a").Assign(w); v.Code != "no-matching-flavor" {
		t.Errorf("with flavor x in zone a: verdict %+v, want no-matching-flavor", v)
	}
	if a, v := snap("b").Assign(w); v.Kind != Fits || a.Flavors[0] != "x" {
		t.Errorf("with flavor x moved to zone b: %v, %+v; want x", a.Flavors, v)
	}
}

// TestPlacementForgotten: the table of shared placements lets go of those
// no Workload holds any more.
func TestPlacementForgotten(t *testing.T) {
	key := placementKey{SelectorKey(map[string]string{"forgotten": "yes"}), ""}
	w := makeWL("j", "q", 1).Selector("forgotten", "yes").Obj()
	placements.Lock()
	_, ok := placements.m[key]
	placements.Unlock()
	if !ok || w.place == nil {
		t.Fatalf("no placement kept for the Workload's nodeSelector")
	}
	w = nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		placements.Lock()
		_, ok = placements.m[key]
		placements.Unlock()
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the placement of a collected Workload is still in the table")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnsealedWorkload: a Workload the caller has not sealed is matched
// all the same.
func TestUnsealedWorkload(t *testing.T) {
	cq := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").Obj()
	cfg := makeConfig(zoneFlavors(), cq)
	w := &Workload{Namespace: "ns", Name: "j", Queue: "q", NodeAffinity: []corev1.NodeSelectorTerm{zoneIn("b")},
		PodSets: []PodSet{{Name: MainPodSet, Count: 1, Requests: flavors.Resources{cpu: amt(cpu, "1")}}}}
	a, v := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}}).Assign(w)
	if v.Kind != Fits || a.Flavors[0] != "zone-b" {
		t.Errorf("%v, %+v; want zone-b", a.Flavors, v)
	}
}

// TestDecideAffinityWaitHoldsBackNoOther: a Workload that waits for the one
// flavor its affinity allows says nothing of a later Workload of its queue
// that may use the others, however large.
func TestDecideAffinityWaitHoldsBackNoOther(t *testing.T) {
	cq := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=2").Flavor("zone-b", "cpu=2").Obj()
	cfg := makeConfig(zoneFlavors(), cq)
	pending := seqs(
		makeWL("wants-b", "q", 1).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(),
		makeWL("any", "q", 2).Req(cpu, "2").Obj(),
		makeWL("wants-b-too", "q", 3).Req(cpu, "1").Affinity(nsTerm(expr("zone", opIn, "b"))).Obj(),
	)
	waits := map[string]string{}
	d := Decide(NewSnapshot(cfg, usageOf("q:zone-b:cpu=2"), map[string]labels.Set{"ns": {}}), pending, func(w *Workload, v Verdict, _ int) {
		if v.Kind != Fits {
			waits[w.Name] = v.Code
		}
	})
	if diff := cmp.Diff([]string{"any@zone-a"}, admittedNames(d.Admissions)); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"wants-b": "quota/zone-b/cpu", "wants-b-too": "quota/zone-b/cpu"}, waits); diff != "" {
		t.Errorf("verdict codes (-want +got):\n%s", diff)
	}
}

// TestPlacementConcurrent: the webhook and the ledger build and decide
// Workloads on their own goroutines; those that share a placement get the
// same answers (run with -race).
func TestPlacementConcurrent(t *testing.T) {
	cq := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").Obj()
	ann := EncodeUserTerms([]corev1.NodeSelectorTerm{zoneIn("b")})
	errs := make(chan string, 8)
	for g := range 8 {
		go func() {
			var bad string
			for i := range 50 {
				// New flavor objects every round, as after a reload.
				cfg := makeConfig(zoneFlavors(), cq)
				j := zoneJob("j", zoneIn("a"), zoneIn("b"))
				j.Annotations = map[string]string{AnnotationUserAffinity: ann}
				w := WorkloadFromJob(j, "q", int32(g))
				a, v := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}}).Assign(w)
				if v.Kind != Fits || a.Flavors[0] != "zone-b" {
					bad = fmt.Sprintf("round %d: %v, %+v", i, a.Flavors, v)
				}
			}
			errs <- bad
		}()
	}
	for range 8 {
		if bad := <-errs; bad != "" {
			t.Error(bad)
		}
	}
}
