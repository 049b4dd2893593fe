package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

// TestPassScope: a change in one queue has the next pass decide its whole
// cohort and nothing else; a pass after no change decides nothing; a
// namespace's new labels have it decide every queue.
func TestPassScope(t *testing.T) {
	// cq-N is in cohort-(N mod 10): cq-3 and cq-13 share cohort-3.
	l := newBenchLedger(t, 20, 200, 100)
	scope := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		in := l.passCache.scope(l.cfg, len(l.late) > 0)
		var out []string
		for _, q := range l.cfg.QueueNames {
			if _, ok := in[q]; ok || in == nil {
				out = append(out, q)
			}
		}
		return out
	}
	l.decide()
	if got := scope(); len(got) != 0 {
		t.Errorf("after a pass and no change, the next pass decides %v, want nothing", got)
	}
	// A pending Job of cq-3 is updated.
	j := StripJobOrDie(benchJob(200+3, 20, true))
	j.ResourceVersion = "2"
	l.onJob(j)
	if got := fmt.Sprint(scope()); got != "[cq-13 cq-3]" {
		t.Errorf("after a change in cq-3, the pass decides %s, want cohort-3: [cq-13 cq-3]", got)
	}
	// A running Job of cq-14 finishes: cohort-4 is decided, its pending
	// Jobs then fit.
	done := benchJob(14, 20, false)
	done.Labels["tally.dev/state"] = "admitted"
	done.ResourceVersion = "2"
	done.Status.Conditions = append(done.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	l.onJob(StripJobOrDie(done))
	if got := fmt.Sprint(scope()); got != "[cq-14 cq-4]" {
		t.Errorf("after a Job of cq-14 finished, the pass decides %s, want cohort-4: [cq-14 cq-4]", got)
	}
	l.onNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-cq-0", Labels: map[string]string{"team": "a"}}})
	if got := len(scope()); got != 20 {
		t.Errorf("after a namespace's labels changed, the pass decides %d queues, want all 20", got)
	}
}

// TestPassCacheLists: a pending list is built from its tree once, kept
// while the tree is unchanged (with its settled end), and built again,
// its settled end forgotten, once the tree changed or the list was
// dropped.
func TestPassCacheLists(t *testing.T) {
	c := newPassCache()
	tree := btree.NewG(32, lessEntry)
	mk := func(name string, prio int32) *entry {
		e := &entry{}
		e.W = &queues.Workload{Name: name, Namespace: "ns", Queue: "q", Priority: prio, UID: types.UID(name)}
		tree.ReplaceOrInsert(e)
		return e
	}
	mk("a", 1)
	mk("b", 2)
	pending := map[string]*btree.BTreeG[*entry]{"q": tree, "r": btree.NewG(32, lessEntry)}
	names := func(scope map[string]struct{}) string {
		var out []string
		for _, w := range listsOf(&c, pending, entryWorkload, scope)["q"] {
			out = append(out, w.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(nil); got != "b,a" {
		t.Fatalf("list of q = %s, want b,a (by priority)", got)
	}
	c.settled["q"] = settledTail{from: 1, code: "quota"}
	if got := names(map[string]struct{}{"r": {}}); got != "" {
		t.Errorf("a pass that decides r lists q: %s", got)
	}
	mk("c", 3)
	if got := names(nil); got != "b,a" {
		t.Errorf("a tree changed but not noted rebuilt its list: %s", got)
	}
	if c.tails["q"] == nil {
		t.Errorf("a settled list kept no tail")
	}
	c.treeChanged("q")
	if _, dirty := c.dirty["q"]; !dirty {
		t.Errorf("a changed tree did not make its queue dirty")
	}
	if got := names(nil); got != "c,b,a" {
		t.Errorf("list of q after its tree changed = %s, want c,b,a", got)
	}
	if _, ok := c.settled["q"]; ok || c.tails["q"] != nil {
		t.Errorf("a list built again kept its settled end")
	}
	c.drop("q")
	if _, ok := c.lists["q"]; ok {
		t.Errorf("a dropped list is kept")
	}
	c.lists["r"] = nil
	c.scope(nil, true)
	c.dropAll()
	if len(c.lists) != 0 || !c.allDirty {
		t.Errorf("dropAll kept %d lists, allDirty %v", len(c.lists), c.allDirty)
	}
}

// TestPassCacheScope: the scope is every member of a changed queue's
// cohort tree, nothing after it was taken, and every queue (nil) after
// touchAll, a namespace change, or when asked for all.
func TestPassCacheScope(t *testing.T) {
	cfg := benchConfig(t, 20)
	c := newPassCache()
	if c.scope(cfg, false) != nil {
		t.Errorf("a new cache's first scope is not every queue")
	}
	if got := len(c.scope(cfg, false)); got != 0 {
		t.Errorf("a scope with no change holds %d queues", got)
	}
	c.touch("cq-3")
	c.touch("")
	if got := fmt.Sprint(slices.Sorted(maps.Keys(c.scope(cfg, false)))); got != "[cq-13 cq-3]" {
		t.Errorf("scope after cq-3 changed = %s, want its cohort [cq-13 cq-3]", got)
	}
	c.touch("cq-3")
	if c.scope(cfg, true) != nil {
		t.Errorf("a scope asked for all is not every queue")
	}
	if got := len(c.scope(cfg, false)); got != 0 {
		t.Errorf("a scope asked for all did not forget the changes: %d queues", got)
	}
	c.nsLabels = map[string]labels.Set{}
	c.namespacesChanged()
	if c.nsLabels != nil || c.scope(cfg, false) != nil {
		t.Errorf("a namespace change kept the labels, or did not scope every queue")
	}
	if got := c.namespaceLabels(func() map[string]labels.Set { return map[string]labels.Set{"a": {"k": "v"}} }); got["a"]["k"] != "v" {
		t.Errorf("namespaceLabels = %v", got)
	}
	if a, b := c.rotate(), c.rotate(); a != 0 || b != 1 {
		t.Errorf("rotate = %d, %d; want 0, 1", a, b)
	}
}
