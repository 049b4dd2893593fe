package ledger

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// check verifies the invariants written on podBook.
func (b *podBook[W]) check() error {
	counted := map[types.UID]int{}
	for _, o := range b.owner {
		counted[o]++
	}
	if err := sameCounts("live", counted, b.live); err != nil {
		return err
	}
	ready := map[types.UID]int{}
	for _, o := range b.readyOwner {
		ready[o]++
	}
	if err := sameCounts("ready", ready, b.ready); err != nil {
		return err
	}
	if err := sameSets("unverified", b.unverified, b.claimed); err != nil {
		return err
	}
	for pod := range b.owner {
		if _, ok := b.claimed[pod]; ok {
			return fmt.Errorf("counted: pod %s is counted and unverified", pod)
		}
	}
	if err := sameSets("gated", b.gated, b.gatedOwner); err != nil {
		return err
	}
	for uid := range b.regate {
		if !b.gating[uid] {
			return fmt.Errorf("judging: %s to judge again, not being judged", uid)
		}
	}
	return nil
}

// sameSets checks that owners maps each pod to the workload whose set in
// sets holds it, and that sets holds no other pod and no empty set.
func sameSets[V any](what string, sets map[types.UID]map[types.UID]V, owners map[types.UID]types.UID) error {
	n := 0
	for o, pods := range sets {
		if len(pods) == 0 {
			return fmt.Errorf("%s: empty set for %s", what, o)
		}
		for pod := range pods {
			if owners[pod] != o {
				return fmt.Errorf("%s: pod %s held under %s, owned by %q", what, pod, o, owners[pod])
			}
		}
		n += len(pods)
	}
	if n != len(owners) {
		return fmt.Errorf("%s: %d pods held, %d owned", what, n, len(owners))
	}
	return nil
}

func sameCounts(what string, want, got map[types.UID]int) error {
	if len(want) != len(got) {
		return fmt.Errorf("%s: %d workloads counted, want %d (%v, want %v)", what, len(got), len(want), got, want)
	}
	for o, n := range want {
		if got[o] != n {
			return fmt.Errorf("%s: %s counts %d, want %d", what, o, got[o], n)
		}
	}
	return nil
}

func TestPodBookSetCounted(t *testing.T) {
	type step struct {
		pod, owner types.UID
		live       bool
		want       podMove
	}
	for _, tc := range []struct {
		name  string
		steps []step
		live  map[types.UID]int
	}{
		{name: "first and last", steps: []step{
			{"p1", "w", true, podMove{joined: "w", first: true}},
			{"p2", "w", true, podMove{joined: "w"}},
			{"p1", "w", true, podMove{}},
			{"p1", "w", false, podMove{left: "w"}},
			{"p2", "", false, podMove{left: "w", emptied: true}},
			{"p2", "", false, podMove{}},
		}},
		{name: "relabelled", steps: []step{
			{"p", "a", true, podMove{joined: "a", first: true}},
			{"q", "b", true, podMove{joined: "b", first: true}},
			{"p", "b", true, podMove{left: "a", emptied: true, joined: "b"}},
		}, live: map[types.UID]int{"b": 2}},
		{name: "relabelled and ended", steps: []step{
			{"p", "a", true, podMove{joined: "a", first: true}},
			{"p", "b", false, podMove{left: "a", emptied: true}},
		}},
		{name: "a live pod without a new owner stays", steps: []step{
			{"p", "a", true, podMove{joined: "a", first: true}},
			{"p", "", true, podMove{}},
		}, live: map[types.UID]int{"a": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPodBook[*entry]()
			for i, s := range tc.steps {
				if got := b.setCounted(s.pod, s.owner, s.live); got != s.want {
					t.Errorf("step %d: setCounted(%s, %q, %v) = %+v, want %+v", i, s.pod, s.owner, s.live, got, s.want)
				}
				if err := b.check(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := sameCounts("live", tc.live, b.live); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestPodBookCountingForgetsDoubt(t *testing.T) {
	b := newPodBook[*entry]()
	b.doubt("p", podClaim{owner: "w", ns: "n"})
	b.setCounted("p", "w", false)
	if len(b.doubted("w")) != 1 {
		t.Fatalf("a pod not counted lost its doubt")
	}
	b.setCounted("p", "w", true)
	if len(b.doubted("w")) != 0 {
		t.Errorf("a counted pod is still doubted")
	}
	if err := b.check(); err != nil {
		t.Error(err)
	}
}

func TestPodBookReady(t *testing.T) {
	type step struct {
		pod, owner   types.UID
		ready        bool
		lost, gained types.UID
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[types.UID]int
	}{
		{"ready once", []step{{"p", "w", true, "", "w"}, {"p", "w", true, "", ""}}, map[types.UID]int{"w": 1}},
		{"ready then not", []step{{"p", "w", true, "", "w"}, {"p", "w", false, "w", ""}}, map[types.UID]int{}},
		{"not ready, never seen", []step{{"p", "w", false, "", ""}}, map[types.UID]int{}},
		{"moves to another workload", []step{{"p", "w", true, "", "w"}, {"p", "v", true, "w", "v"}}, map[types.UID]int{"v": 1}},
		{"two pods", []step{{"p", "w", true, "", "w"}, {"q", "w", true, "", "w"}, {"p", "", false, "w", ""}}, map[types.UID]int{"w": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPodBook[*entry]()
			for i, s := range tc.steps {
				lost, gained := b.setReady(s.pod, s.owner, s.ready)
				if lost != s.lost || gained != s.gained {
					t.Errorf("step %d: setReady(%s, %s, %v) = %q, %q; want %q, %q", i, s.pod, s.owner, s.ready, lost, gained, s.lost, s.gained)
				}
				if err := b.check(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := sameCounts("ready", tc.want, b.ready); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestPodBookUnverified(t *testing.T) {
	b := newPodBook[*entry]()
	b.doubt("p1", podClaim{owner: "w", ns: "a"})
	b.doubt("p2", podClaim{owner: "w", ns: "b"})
	b.doubt("p3", podClaim{owner: "v", ns: "a"})
	if err := b.check(); err != nil {
		t.Fatal(err)
	}
	if got := len(b.doubted("w")); got != 2 {
		t.Errorf("doubted(w) has %d pods, want 2", got)
	}
	for pod := range b.doubted("w") {
		b.unverify(pod)
	}
	b.unverify("p-unknown")
	if err := b.check(); err != nil {
		t.Fatal(err)
	}
	if len(b.doubted("w")) != 0 || len(b.doubted("v")) != 1 {
		t.Errorf("after unverifying w's pods: w %d, v %d; want 0, 1", len(b.doubted("w")), len(b.doubted("v")))
	}
	if _, ok := b.unverified["w"]; ok {
		t.Errorf("a workload without unverified pods keeps a set")
	}
}

func TestPodBookRootOf(t *testing.T) {
	b := newPodBook[*entry]()
	// A TrainJob t makes a JobSet s, whose Job j is a part of it.
	deep := types.UID(fmt.Sprint("d", maxPartDepth+1))
	known := func(uid types.UID) bool { return uid == "t" || uid == deep }
	if got := b.link("s", "t", "ns", known); got != "t" {
		t.Errorf("link(s, t) = %q, want its root t", got)
	}
	if got := b.link("j", "s", "ns", known); got != "t" {
		t.Errorf("link(j, s) = %q, want its root t", got)
	}
	if got := b.link("j", "s", "ns", known); got != "" {
		t.Errorf("link(j, s) again = %q, want none: nothing is new", got)
	}
	// A chain longer than maxPartDepth.
	for i := range maxPartDepth + 1 {
		b.link(types.UID(fmt.Sprint("d", i)), types.UID(fmt.Sprint("d", i+1)), "ns", known)
	}
	for _, tc := range []struct {
		uid, want types.UID
	}{
		{"t", "t"}, {"s", "t"}, {"j", "t"}, {"x", ""},
		// d1 is maxPartDepth parts from deep, d2 one fewer.
		{"d0", ""}, {"d1", ""}, {"d2", deep},
	} {
		if got := b.rootOf(tc.uid, known); got != tc.want {
			t.Errorf("rootOf(%s) = %q, want %q", tc.uid, got, tc.want)
		}
	}
	if of, ns, ok := b.partOf("j"); of != "s" || ns != "ns" || !ok {
		t.Errorf("partOf(j) = %q, %q, %v", of, ns, ok)
	}
	b.forget("s", nil)
	if got := b.rootOf("j", known); got != "" {
		t.Errorf("rootOf(j) after its JobSet is forgotten = %q, want none", got)
	}
	b.link("j", "", "", known)
	if _, _, ok := b.partOf("j"); ok {
		t.Errorf("link(j, none) keeps j as a part")
	}
	if len(b.partNS) != len(b.parts) {
		t.Errorf("parts and their namespaces differ: %v, %v", b.parts, b.partNS)
	}
}

func TestPodBookGatedAndJudging(t *testing.T) {
	b := newPodBook[*entry]()
	if b.startJudging("w", 0) {
		t.Fatalf("a judgement starts for a workload with nothing to judge")
	}
	b.gate("p1", "w")
	b.gate("p2", "w")
	b.gate("p2", "w")
	if got := len(b.gated["w"]); got != 2 {
		t.Errorf("gated pods of w: %d, want 2", got)
	}
	if !b.startJudging("w", 0) {
		t.Fatalf("the first judgement does not start")
	}
	if b.startJudging("w", 0) || b.startJudging("w", 0) {
		t.Fatalf("a judgement starts while one is under way")
	}
	if err := b.check(); err != nil {
		t.Fatal(err)
	}
	if !b.judged("w") {
		t.Errorf("a judgement asked for meanwhile is not run")
	}
	if b.judged("w") {
		t.Errorf("two asks ran two more judgements")
	}
	b.ungate("p1")
	b.ungate("p2")
	b.ungate("p3")
	if err := b.check(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.gated["w"]; ok {
		t.Errorf("a workload without gated pods keeps a set")
	}
	// Counted pods beyond the count, or pods found beyond it before, have
	// it judged; as many as its count do not.
	b.setCounted("c1", "w", true)
	b.setCounted("c2", "w", true)
	if b.startJudging("w", 2) {
		t.Errorf("a judgement starts for a workload with its count of pods")
	}
	if !b.startJudging("w", 1) {
		t.Errorf("a judgement does not start for a pod beyond the count")
	}
	b.judged("w")
	b.noteExcess("w", []types.UID{"c2"}, time.Unix(1, 0))
	if !b.startJudging("w", 2) {
		t.Errorf("a judgement does not start for a workload that ran beyond its count")
	}
}

func TestPodBookExcessAndGhosts(t *testing.T) {
	b := newPodBook[*entry]()
	now := time.Unix(100, 0)
	b.noteExcess("w", []types.UID{"p"}, now)
	since := b.noteExcess("w", []types.UID{"p", "q"}, now.Add(time.Minute))
	if !since["p"].Equal(now) || !since["q"].Equal(now.Add(time.Minute)) {
		t.Errorf("noteExcess: %v, want p since %v and q a minute later", since, now)
	}
	if b.noteExcess("w", nil, now); len(b.excess) != 0 {
		t.Errorf("an empty set of pods beyond the count is kept")
	}
	b.noteExcess("w", []types.UID{"p"}, now)
	if b.forgetExcess("w"); len(b.excess) != 0 {
		t.Errorf("forgetExcess keeps the pods beyond the count")
	}
	e := &entry{}
	if _, ok := b.lay("w"); ok {
		t.Errorf("lay(w) finds a ghost never kept")
	}
	b.haunt("w", e)
	b.setCounted("p", "w", true)
	if b.ghost("w") != e {
		t.Errorf("ghost(w) is not the entry kept")
	}
	if g, ok := b.lay("w"); !ok || g != nil {
		t.Errorf("lay(w) with a pod counted = %v, %v; want the ghost kept", g, ok)
	}
	b.setCounted("p", "", false)
	if g, ok := b.lay("w"); !ok || g != e {
		t.Errorf("lay(w) with no pod left = %v, %v; want the ghost", g, ok)
	}
	if b.ghost("w") != nil {
		t.Errorf("ghost(w) is kept after its last pod is gone")
	}
	b.awaitReady(e)
	b.forget("w", e)
	if len(b.unready) != 0 {
		t.Errorf("a forgotten workload still waits for ready pods")
	}
}

// TestPodBookCheck: the invariants check fails on a book that breaks one.
func TestPodBookCheck(t *testing.T) {
	for name, breakIt := range map[string]func(b *podBook[*entry]){
		"counted, not in live": func(b *podBook[*entry]) { b.owner["p"] = "w" },
		"live zero entry":      func(b *podBook[*entry]) { b.live["w"] = 0 },
		"ready, not counted":   func(b *podBook[*entry]) { b.ready["w"] = 1 },
		"claimed, not held":    func(b *podBook[*entry]) { b.claimed["p"] = "w" },
		"empty unverified set": func(b *podBook[*entry]) { b.unverified["w"] = map[types.UID]podClaim{} },
		"gated under another":  func(b *podBook[*entry]) { b.gate("p", "w"); b.gatedOwner["p"] = "v" },
		"regate, not judging":  func(b *podBook[*entry]) { b.regate["w"] = true },
	} {
		b := newPodBook[*entry]()
		breakIt(&b)
		if b.check() == nil {
			t.Errorf("%s: check passed", name)
		}
	}
}
