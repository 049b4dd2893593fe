package ledger

import (
	"github.com/google/btree"

	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// books are what every pass reads of the workloads: the pending trees
// by queue, usage by queue and the cohorts' pools that move with it, and
// the entries charged with quota by the queue they are charged in. They
// follow the entries through the machine's effects (carry), note in the
// pass cache every queue whose trees, usage or workloads changed, and
// keep the usage gauges. Their invariants:
//
//   - an entry is in its queue's tree exactly when its InTree is set, and
//     no tree is empty;
//   - usage[q] is the sum of what the entries charged in q are charged,
//     preemptors' claims, yielded and grown usage included (a recount
//     checks it), with no empty usage kept;
//   - holding[q] holds exactly the entries charged in q (held, heldIn);
//   - pools, when made for the config in force, are the cohorts' pools
//     of usage.
//
// Like the other rooms they do no I/O and hold no lock: the ledger's
// lock covers them.
type books struct {
	pending map[string]*btree.BTreeG[*entry]
	usage   map[string]queues.Usage
	// pools are the cohorts' pools as usage has them, moved with it; nil,
	// or for another config, they are counted again by the next pass.
	pools   *queues.Pools
	holding map[string]map[*entry]struct{}
	cache   *passCache
	metrics *metrics.Metrics
}

func newBooks(cache *passCache, m *metrics.Metrics) books {
	return books{
		pending: map[string]*btree.BTreeG[*entry]{},
		usage:   map[string]queues.Usage{},
		holding: map[string]map[*entry]struct{}{},
		cache:   cache, metrics: m,
	}
}

// carry moves the books with entry e as it becomes next: LeaveTree is
// carried out on e as it was (the tree is ordered by the version the
// workload joined it with), the pass cache notes the change, e becomes
// next, and the effects that move usage and trees are taken on it, under
// config cfg. Usage changes commute, so their order does not matter.
func (b *books) carry(cfg *queues.Config, e, next *entry, effects []machine.Effect) {
	for _, f := range effects {
		if _, ok := f.(machine.LeaveTree); ok {
			b.remove(e)
		}
	}
	b.follow(e, next)
	*e = *next
	for _, f := range effects {
		switch f := f.(type) {
		case machine.JoinTree:
			b.insert(e)
		case machine.Reserve:
			b.move(cfg, f.Queue, f.Usage, +1)
		case machine.Unreserve:
			b.move(cfg, f.Queue, f.Usage, -1)
		case machine.Grew:
			b.move(cfg, f.Queue, f.Usage, +1)
		case machine.Shrank:
			b.move(cfg, f.Queue, f.Usage, -1)
		case machine.Charge:
			b.move(cfg, f.Queue, f.Usage, +1)
		case machine.Release:
			b.move(cfg, f.Queue, f.Usage, -1)
		case machine.Yield:
			b.move(cfg, f.Queue, f.Usage, -1)
		case machine.Unyield:
			b.move(cfg, f.Queue, f.Usage, +1)
		}
	}
	b.hold(e)
}

// follow notes in the pass cache an entry going from e to next when that
// changes what a pass reads: its place in a tree, its phase (an admitted
// workload is a preemption candidate, an assumed one is not), its quota,
// its claim, or its queue and priority.
func (b *books) follow(e, next *entry) {
	if !changesPass(e, next) {
		return
	}
	for _, x := range [2]*entry{e, next} {
		if x.W != nil {
			b.cache.touch(x.W.Queue)
		}
		b.cache.touch(x.ChargedQueue)
	}
}

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

// insert puts a pending entry into its queue's tree.
func (b *books) insert(e *entry) {
	t := b.pending[e.W.Queue]
	if t == nil {
		t = btree.NewG(32, lessEntry)
		b.pending[e.W.Queue] = t
	}
	t.ReplaceOrInsert(e)
	e.InTree = true
	b.cache.treeChanged(e.W.Queue)
}

// remove takes e out of its queue's tree, if it is in it.
func (b *books) remove(e *entry) {
	if !e.InTree {
		return
	}
	if t := b.pending[e.W.Queue]; t != nil {
		t.Delete(e)
		if t.Len() == 0 {
			delete(b.pending, e.W.Queue)
			b.cache.drop(e.W.Queue)
		}
	}
	e.InTree = false
	b.cache.treeChanged(e.W.Queue)
}

// dropTrees empties every pending tree, for them to be built again.
func (b *books) dropTrees() {
	b.pending = map[string]*btree.BTreeG[*entry]{}
	b.cache.dropAll()
}

// hold files e in the holding set of the queue it is charged in, or takes
// it out of holding once it holds no quota.
func (b *books) hold(e *entry) {
	if e.held && (e.Charged == nil || e.heldIn != e.ChargedQueue) {
		delete(b.holding[e.heldIn], e)
		e.held, e.heldIn = false, ""
	}
	if e.Charged == nil || e.held {
		return
	}
	set := b.holding[e.ChargedQueue]
	if set == nil {
		set = map[*entry]struct{}{}
		b.holding[e.ChargedQueue] = set
	}
	set[e] = struct{}{}
	e.held, e.heldIn = true, e.ChargedQueue
}

// move adds u to queue's usage (sign +1) or takes it off (-1).
func (b *books) move(cfg *queues.Config, queue string, u queues.Usage, sign int) {
	cur := b.usage[queue]
	if cur == nil {
		if sign < 0 {
			return
		}
		cur = queues.Usage{}
		b.usage[queue] = cur
	}
	b.movePools(cfg, queue, cur, u, sign)
	if sign > 0 {
		cur.Add(u)
	} else {
		cur.Sub(u)
		if len(cur) == 0 {
			delete(b.usage, queue)
		}
	}
	b.cache.touch(queue)
	b.metrics.SetUsage(cfg, queue, cur, u)
}

// movePools moves the pools as queue's usage cur is about to have u
// added (sign +1) or taken away (-1).
func (b *books) movePools(cfg *queues.Config, queue string, cur, u queues.Usage, sign int) {
	if !b.pools.For(cfg) {
		return
	}
	for fr, a := range u {
		before := cur[fr]
		after := before.Add(a)
		if sign < 0 {
			after = before.Sub(a)
		}
		b.pools.Move(queue, fr, before, after)
	}
}

// recounted puts usage recounted from scratch in force: the pools are
// counted again by the next pass, and every queue is changed.
func (b *books) recounted(cfg *queues.Config, fresh map[string]queues.Usage) {
	b.metrics.ObserveUsage(cfg, b.usage, fresh)
	b.usage = fresh
	b.pools = nil
	b.cache.touchAll()
}
