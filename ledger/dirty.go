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

// touchLocked notes that queue q's inputs changed.
func (l *Ledger) touchLocked(q string) {
	if q != "" {
		l.dirty[q] = struct{}{}
	}
}

// touchAllLocked notes that every queue's inputs may have changed.
func (l *Ledger) touchAllLocked() {
	l.allDirty = true
}

// touchEntryLocked notes a change of entry e, which may have been
// queued in, or hold quota in, a queue.
func (l *Ledger) touchEntryLocked(e *entry) {
	if e.W != nil {
		l.touchLocked(e.W.Queue)
	}
	l.touchLocked(e.ChargedQueue)
}

// changesPass says whether an entry going from e to next changes what a
// pass reads: its place in a tree, its phase (an admitted workload is a
// preemption candidate, an assumed one is not), its quota, its claim, or
// its queue and priority.
func changesPass(e, next *entry) bool {
	if e.Phase() != next.Phase() || e.InTree != next.InTree || e.ChargedQueue != next.ChargedQueue || (e.Claim == nil) != (next.Claim == nil) {
		return true
	}
	if e.W == next.W {
		return false
	}
	if e.W == nil || next.W == nil || next.InTree {
		return true
	}
	return e.W.Queue != next.W.Queue || e.W.Priority != next.W.Priority
}

// passScopeLocked returns the queues the pass about to run decides: those
// whose inputs changed, and every other member of their cohort trees; nil
// when it decides every queue. It forgets the changes: the pass decides
// on them. The map is the pass's scratch, filled again by the next pass.
func (l *Ledger) passScopeLocked() map[string]struct{} {
	if l.allDirty || len(l.late) > 0 {
		// A late capture charges the snapshot, in any queue.
		l.allDirty = false
		clear(l.dirty)
		return nil
	}
	sc := &l.scratch
	if sc.scope == nil {
		sc.scope, sc.roots = map[string]struct{}{}, map[string]bool{}
	}
	scope, roots := sc.scope, sc.roots
	clear(scope)
	clear(roots)
	for q := range l.dirty {
		scope[q] = struct{}{}
		cq := l.cfg.ClusterQueues[q]
		if cq == nil || cq.Cohort == "" {
			continue
		}
		root := l.cfg.CohortRoot(cq.Cohort)
		if roots[root] {
			continue
		}
		roots[root] = true
		for _, m := range l.cfg.Members(cq) {
			scope[m] = struct{}{}
		}
	}
	clear(l.dirty)
	return scope
}

// inScope calls f with each queue of m that scope holds, and its value;
// with every queue of m when scope is nil (passScopeLocked). It reads
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

// namespaceLabelsLocked returns the labels of every known namespace, for
// the pass's namespaceSelectors; the map is rebuilt only after a
// namespace changed, and must not be modified.
func (l *Ledger) namespaceLabelsLocked() map[string]labels.Set {
	if l.nsLabels == nil {
		l.nsLabels = make(map[string]labels.Set, len(l.namespaces))
		for n, info := range l.namespaces {
			l.nsLabels[n] = info.labels
		}
	}
	return l.nsLabels
}

// listsLocked returns the pending lists of the queues the pass decides
// (scope, see passScopeLocked), in admission order. A list is rebuilt from
// its tree only when the tree changed since: the others are last pass's.
// A list's Tail is made once a pass has settled its end (settled.go), and
// kept until the list is rebuilt: a list that changes every pass would
// pay for one and never use it.
func (l *Ledger) listsLocked(scope map[string]struct{}) map[string][]*queues.Workload {
	lists := l.scratch.lists
	if lists == nil {
		lists = map[string][]*queues.Workload{}
		l.scratch.lists = lists
	}
	clear(lists)
	inScope(l.pending, scope, func(q string, t *btree.BTreeG[*entry]) {
		list, built := l.lists[q]
		if _, stale := l.stale[q]; stale || !built {
			clear(list)
			list = list[:0]
			t.Ascend(func(e *entry) bool { list = append(list, e.W); return true })
			l.lists[q] = list
			delete(l.tails, q)
			delete(l.settled, q)
			delete(l.stale, q)
		}
		lists[q] = list
		if _, ok := l.settled[q]; ok && l.tails[q] == nil {
			l.tails[q] = queues.NewTail(list)
		}
	})
	return lists
}

// passScratch holds the maps a pass hands queues.Decide, and the
// preemption candidates' lists by queue, for the next pass to fill
// again: a pass allocates them once, not every time. Nothing outlives
// the pass that fills them.
type passScratch struct {
	// scope and roots are passScopeLocked's.
	scope      map[string]struct{}
	roots      map[string]bool
	usage      map[string]queues.Usage
	lists      map[string][]*queues.Workload
	runs       map[string]*tailRun
	candidates map[string][]*queues.Admitted
	// built holds the queues whose candidates this pass listed.
	built map[string]bool
}

// dropListLocked forgets queue q's pending list, once its tree is gone.
func (l *Ledger) dropListLocked(q string) {
	clear(l.lists[q])
	delete(l.lists, q)
	delete(l.tails, q)
	delete(l.settled, q)
	delete(l.scratch.runs, q)
	delete(l.stale, q)
}
