package queues

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// tailCase is one random pass's input, made again from its seed for each
// run, since a pass changes its snapshot.
type tailCase struct {
	snap    *Snapshot
	pending map[string][]*Workload
}

func randomTailCase(seed int64) tailCase {
	r := rand.New(rand.NewSource(seed))
	fls := []*flavors.Flavor{flavor("f1"), flavor("f2", "tier", "x")}
	var cqs []*ClusterQueue
	nq := 1 + r.Intn(4)
	for i := range nq {
		b := makeCQ(fmt.Sprintf("q%d", i))
		if i > 0 || r.Intn(2) == 0 {
			b.Cohort("ml")
		}
		if r.Intn(3) == 0 {
			b.Strict()
		}
		b.Group(cpu, mem).Flavor("f1", fmt.Sprintf("cpu=%d/%d", 2+r.Intn(9), r.Intn(12)), "memory=64Gi")
		if r.Intn(2) == 0 {
			b.Flavor("f2", fmt.Sprintf("cpu=%d", 1+r.Intn(6)), "memory=64Gi")
		}
		cq := b.Obj()
		if r.Intn(2) == 0 {
			withPolicy(cq, "LowerPriority", []string{"Never", "LowerPriority", "Any"}[r.Intn(3)], "Never", nil)
		}
		cqs = append(cqs, cq)
	}
	cfg := makeConfig(fls, cqs...)
	usage := map[string]Usage{}
	admitted := map[string][]*Admitted{}
	t := 0
	for _, cq := range cqs {
		usage[cq.Name] = Usage{}
		for range r.Intn(4) {
			t++
			a := adm(fmt.Sprintf("a%d", t), cq.Name, "f1", fmt.Sprint(1+r.Intn(4)), int32(r.Intn(3)*100), t)
			admitted[cq.Name] = append(admitted[cq.Name], a)
			usage[cq.Name][FlavorResource{"f1", cpu}] += a.Usage[FlavorResource{"f1", cpu}]
		}
	}
	var ws []*Workload
	classes := []struct {
		cpu  string
		prio int32
	}{{"1", 0}, {"3", 100}, {"8", 200}}
	for i := range r.Intn(60) {
		c := classes[r.Intn(len(classes))]
		b := makeWL(fmt.Sprintf("w%d", i), cqs[r.Intn(nq)].Name, 100+r.Intn(20)).Req(cpu, c.cpu).Prio(c.prio)
		switch r.Intn(10) {
		case 0:
			b.NS("ns2")
		case 1:
			b.Selector("tier", "x")
		case 2:
			b.Req(mem, "1Gi")
		case 3:
			b.Count(2)
		}
		ws = append(ws, b.Obj())
	}
	pending := seqs(ws...)
	snap := NewSnapshot(cfg, usage, map[string]labels.Set{"ns": {}, "ns2": {}})
	if r.Intn(4) > 0 {
		snap.Admitted = admitted
	}
	if len(ws) > 0 && r.Intn(5) == 0 {
		snap.Reserved = []*Workload{ws[r.Intn(len(ws))]}
	}
	if len(ws) > 1 && r.Intn(5) == 0 {
		snap.Yield = map[*Workload]*Workload{ws[0]: ws[1]}
	}
	if r.Intn(4) == 0 {
		snap.Budget, snap.Rotate = 1+r.Intn(4), r.Intn(3)
	}
	return tailCase{snap, pending}
}

// TestSettledTailsChangeNothing: a pass given its lists' Tails, and told
// that every tail is settled, decides as a pass that walks every
// Workload, and passes over only Workloads that the walk finds waiting,
// for the reason it asks about, none of them taken.
func TestSettledTailsChangeNothing(t *testing.T) {
	skippedSome := 0
	for seed := range int64(2000) {
		type seen struct {
			v   Verdict
			pos int
		}
		walk := map[string]seen{}
		c := randomTailCase(seed)
		want := Decide(c.snap, c.pending, func(w *Workload, v Verdict, pos int) { walk[w.Name] = seen{v, pos} })

		c = randomTailCase(seed)
		c.snap.Tails = map[string]*Tail{}
		for q, list := range c.pending {
			c.snap.Tails[q] = NewTail(list)
		}
		r := rand.New(rand.NewSource(seed))
		type span struct {
			q          string
			from       int
			code       string
			byWorkload map[*Workload]bool
		}
		var settled []span
		c.snap.Settled = func(q string, from int, code string) bool {
			if r.Intn(4) == 0 {
				return false
			}
			settled = append(settled, span{q: q, from: from, code: code})
			return true
		}
		tailed := map[string]seen{}
		got := Decide(c.snap, c.pending, func(w *Workload, v Verdict, pos int) { tailed[w.Name] = seen{v, pos} })

		if diff := cmp.Diff(decisionSummary(want), decisionSummary(got)); diff != "" {
			t.Fatalf("seed %d: decisions differ (-walked +tailed):\n%s", seed, diff)
		}
		for w, s := range tailed {
			if ws, ok := walk[w]; !ok || ws.v.Kind != s.v.Kind || ws.v.Code != s.v.Code || ws.v.Message() != s.v.Message() || ws.pos != s.pos {
				t.Fatalf("seed %d: %s observed as %+v, the walk's %+v", seed, w, s, ws)
			}
		}
		passed := map[string]bool{}
		for _, sp := range settled {
			for _, w := range c.pending[sp.q][sp.from:] {
				ws, ok := walk[w.Name]
				if !ok || ws.v.Kind != Wait || ws.v.Code != sp.code {
					t.Fatalf("seed %d: %s passed over as settled with %q; the walk found %+v", seed, w.Name, sp.code, ws)
				}
				if _, ok := tailed[w.Name]; ok {
					t.Fatalf("seed %d: %s passed over and observed", seed, w.Name)
				}
				passed[w.Name] = true
			}
		}
		for w := range walk {
			if _, ok := tailed[w]; !ok && !passed[w] {
				t.Fatalf("seed %d: %s neither observed nor passed over", seed, w)
			}
		}
		if len(passed) > 0 {
			skippedSome++
		}
	}
	// The cases must reach the skip, or the test checks nothing.
	if skippedSome < 100 {
		t.Fatalf("only %d of 2000 passes passed over a settled tail", skippedSome)
	}
}

// decisionSummary is what a pass decided, by name.
func decisionSummary(d Decision) []string {
	var out []string
	for _, a := range d.Admissions {
		out = append(out, fmt.Sprintf("admit %s %v %v", a.Workload.Name, a.Assignment.Flavors, a.Assignment.Borrowing))
	}
	for _, p := range d.Preemptions {
		out = append(out, fmt.Sprintf("preempt for %s %v", p.Preemptor.Name, p.Assignment.Flavors))
		for _, v := range p.Victims {
			out = append(out, "  victim "+v.W.Name)
		}
	}
	out = append(out, fmt.Sprintf("full %v rest %v", d.Full, d.Rest))
	return out
}

// TestTailLeast: NewTail's least amounts and its suffixes.
func TestTailLeast(t *testing.T) {
	w := func(name, c string) *Workload { return makeWL(name, "a", 0).Req(cpu, c).Obj() }
	list := []*Workload{
		makeWL("sel", "a", 0).Req(cpu, "1").Selector("k", "v").Obj(),
		w("b", "4"), w("c", "2"), w("d", "3"),
	}
	tl := NewTail(list)
	if tl.sameFrom != 0 || tl.plainFrom != 1 {
		t.Fatalf("sameFrom %d plainFrom %d, want 0 and 1", tl.sameFrom, tl.plainFrom)
	}
	for j, cpuQ := range map[int]string{1: "2", 2: "2", 3: "3"} {
		if !tl.covers(j, w("x", cpuQ)) {
			t.Errorf("from %d: does not cover %s", j, cpuQ)
		}
		if tl.covers(j, w("x", cpuQ+"500m")) {
			t.Errorf("from %d: covers more than %s", j, cpuQ)
		}
	}
	if tl.covers(0, w("x", "1")) {
		t.Error("covers from a Workload that is not plain")
	}
	if tl.covers(1, makeWL("x", "a", 0).Req(cpu, "1").Req(mem, "1Gi").Obj()) {
		t.Error("covers a request of other resources")
	}
	other := append([]*Workload{}, list...)
	other[2] = w("c2", "2")
	if !tl.of(list) || tl.of(other[:3]) || tl.of(append(other[:3:3], w("e", "3"))) {
		t.Error("a Tail is its own list's only")
	}
	ns := NewTail([]*Workload{w("a", "1"), makeWL("b", "a", 0).Req(cpu, "1").NS("ns2").Obj()})
	if ns.sameFrom != 1 || ns.plainFrom != 1 {
		t.Errorf("two namespaces: sameFrom %d plainFrom %d, want 1 and 1", ns.sameFrom, ns.plainFrom)
	}
}
