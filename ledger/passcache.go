package ledger

import (
	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/queues"
)

// A pass decides only the queues whose inputs changed since the last one
// (Decide is a pure function of them): their pending trees, their usage,
// the workloads that hold quota in them (preemption candidates) and the
// victims that yield in them. Borrowing and preemption couple the
// members of a cohort, so a change in one member has the pass decide the
// whole cohort. A change that reaches every queue (the config, a
// priority, a namespace's labels, a recount, a workload to capture late)
// has it decide them all.

// passCache is what a pass keeps for the next one: which queues' inputs
// changed since (dirty, allDirty), the pending lists it built and which
// of them changed since (stale), their settled ends (settled.go), the
// namespaces' labels, the maps it builds in (scratch), and how many passes
// ran. It does no I/O and holds no lock: the ledger's lock covers it.
type passCache struct {
	// dirty holds the queues whose pass inputs changed since the last
	// pass; allDirty: every queue's may have.
	dirty    map[string]struct{}
	allDirty bool
	// lists are the pending lists, in admission order, as the last pass
	// that decided each queue built them; stale holds the queues whose
	// tree changed since.
	lists map[string][]*queues.Workload
	stale map[string]struct{}
	// settled holds the lists' ends whose waiting a pass has seen, and
	// tails describe those lists' ends (queues.NewTail; settled.go).
	tails   map[string]*queues.Tail
	settled map[string]settledTail
	// scratch is what a pass builds, kept for the next pass to build in.
	scratch passScratch
	// nsLabels are the namespaces' labels the passes read; nil after a
	// namespace changed.
	nsLabels map[string]labels.Set
	// passes counts the passes, to rotate where a bounded one starts.
	passes int
}

func newPassCache() passCache {
	return passCache{
		dirty: map[string]struct{}{}, allDirty: true,
		lists: map[string][]*queues.Workload{}, stale: map[string]struct{}{},
		tails: map[string]*queues.Tail{}, settled: map[string]settledTail{},
	}
}

// touch notes that queue q's inputs changed.
func (c *passCache) touch(q string) {
	if q != "" {
		c.dirty[q] = struct{}{}
	}
}

// touchAll notes that every queue's inputs may have changed.
func (c *passCache) touchAll() {
	c.allDirty = true
}

// treeChanged notes that queue q's pending tree changed: its list is
// built again by the next pass that decides it.
func (c *passCache) treeChanged(q string) {
	c.stale[q] = struct{}{}
	c.touch(q)
}

// namespacesChanged notes that a namespace's labels changed: every queue
// is decided again, on the labels read again.
func (c *passCache) namespacesChanged() {
	c.nsLabels = nil
	c.touchAll()
}

// rotate counts a pass, and says how many ran before it.
func (c *passCache) rotate() int {
	c.passes++
	return c.passes - 1
}

// scope returns the queues the pass about to run decides under cfg: those
// whose inputs changed, and every other member of their cohort trees; nil
// when it decides every queue, as it does when all says so (a late
// capture charges the snapshot, in any queue). It forgets the changes:
// the pass decides on them. The map is the pass's scratch, filled again
// by the next pass.
func (c *passCache) scope(cfg *queues.Config, all bool) map[string]struct{} {
	if c.allDirty || all {
		c.allDirty = false
		clear(c.dirty)
		return nil
	}
	sc := &c.scratch
	if sc.scope == nil {
		sc.scope, sc.roots = map[string]struct{}{}, map[string]bool{}
	}
	scope, roots := sc.scope, sc.roots
	clear(scope)
	clear(roots)
	for q := range c.dirty {
		scope[q] = struct{}{}
		cq := cfg.ClusterQueues[q]
		if cq == nil || cq.Cohort == "" {
			continue
		}
		root := cfg.CohortRoot(cq.Cohort)
		if roots[root] {
			continue
		}
		roots[root] = true
		for _, m := range cfg.Members(cq) {
			scope[m] = struct{}{}
		}
	}
	clear(c.dirty)
	return scope
}

// inScope calls f with each queue of m that scope holds, and its value;
// with every queue of m when scope is nil (passCache.scope). It reads
// only the queues in scope, not all of m.
func inScope[V any](m map[string]V, scope map[string]struct{}, f func(q string, v V)) {
	if scope == nil {
		for q, v := range m {
			f(q, v)
		}
		return
	}
	for q := range scope {
		if v, ok := m[q]; ok {
			f(q, v)
		}
	}
}

// namespaceLabels returns the labels of every namespace, for the pass's
// namespaceSelectors, as build makes them; the map is built again only
// after a namespace changed, and must not be modified.
func (c *passCache) namespaceLabels(build func() map[string]labels.Set) map[string]labels.Set {
	if c.nsLabels == nil {
		c.nsLabels = build()
	}
	return c.nsLabels
}

// listsOf returns the pending lists, of c, of the queues the pass decides
// (scope, see passCache.scope), in admission order: the Workloads (as
// workload reads them) of their trees in pending. A list is rebuilt from
// its tree only when the tree changed since: the others are last pass's.
// A list's Tail is made once a pass has settled its end (settled.go), and
// kept until the list is rebuilt: a list that changes every pass would
// pay for one and never use it.
func listsOf[E any](c *passCache, pending map[string]*btree.BTreeG[E], workload func(E) *queues.Workload, scope map[string]struct{}) map[string][]*queues.Workload {
	lists := c.scratch.lists
	if lists == nil {
		lists = map[string][]*queues.Workload{}
		c.scratch.lists = lists
	}
	clear(lists)
	inScope(pending, scope, func(q string, t *btree.BTreeG[E]) {
		list, built := c.lists[q]
		if _, stale := c.stale[q]; stale || !built {
			clear(list)
			list = list[:0]
			t.Ascend(func(e E) bool { list = append(list, workload(e)); return true })
			c.lists[q] = list
			delete(c.tails, q)
			delete(c.settled, q)
			delete(c.stale, q)
		}
		lists[q] = list
		if _, ok := c.settled[q]; ok && c.tails[q] == nil {
			c.tails[q] = queues.NewTail(list)
		}
	})
	return lists
}

// passScratch holds the maps a pass hands queues.Decide, and the
// preemption candidates' lists by queue, for the next pass to fill
// again: a pass allocates them once, not every time. Nothing outlives
// the pass that fills them.
type passScratch struct {
	// scope and roots are passCache.scope's.
	scope      map[string]struct{}
	roots      map[string]bool
	usage      map[string]queues.Usage
	lists      map[string][]*queues.Workload
	runs       map[string]*tailRun
	candidates map[string][]*queues.Admitted
	// built holds the queues whose candidates this pass listed.
	built map[string]bool
}

// drop forgets queue q's pending list, once its tree is gone.
func (c *passCache) drop(q string) {
	clear(c.lists[q])
	delete(c.lists, q)
	delete(c.tails, q)
	delete(c.settled, q)
	delete(c.scratch.runs, q)
	delete(c.stale, q)
}

// dropAll forgets every pending list, once the trees are built again,
// and has the next pass decide every queue.
func (c *passCache) dropAll() {
	for q := range c.lists {
		c.drop(q)
	}
	c.touchAll()
}
