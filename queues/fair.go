package queues

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// MaxShare is the share of a borrowing ClusterQueue whose fairSharing
// weight is 0: it yields to every other queue.
const MaxShare = math.MaxInt64

// Share is a ClusterQueue's weighted dominant-resource share, as Kueue
// computes it: for each resource, what the queue uses beyond its nominal
// quota (summed over flavors) per thousand of what its cohort can lend of
// that resource; the largest of these, divided by fairSharing.weight. A
// queue within its nominal quota has share 0. It is meaningful only in a
// cohort with fair sharing. In a tree of cohorts, what a cohort can lend
// includes what it may borrow from above (see cohortTree.potential).
func (s *Snapshot) Share(cq *ClusterQueue) int64 { return s.shareWith(cq, nil, nil) }

// shareWith is cq's share with extra added to its usage and less taken
// away.
func (s *Snapshot) shareWith(cq *ClusterQueue, extra, less Usage) int64 {
	if cq.Cohort == "" {
		return 0
	}
	ix := s.Config.index()
	pool := ix.tree.potential[cq.Cohort]
	var acc shareSum
	for fr, q := range ix.quotas[cq.Name] {
		acc.add(fr, s.Usage[cq.Name][fr].Add(extra[fr]).Sub(less[fr]), q.Nominal, pool[fr])
	}
	return acc.share(cq.FairWeight)
}

// cohortShare is the share of cohort c, which has a parent, with delta
// added to what its subtree uses of its own pool: as a ClusterQueue's,
// with its subtree quota for nominal quota, the parent's pool for the
// cohort's, and its Cohort's fairSharing.weight.
func (s *Snapshot) cohortShare(c string, delta Usage) int64 {
	ix := s.Config.index()
	pool := ix.tree.potential[ix.tree.parent[c]]
	var acc shareSum
	for fr, sub := range ix.lendable[c] {
		acc.add(fr, s.borrowed[c][fr].Add(delta[fr]), sub, pool[fr])
	}
	weight := int64(defaultFairWeight)
	if co := s.Config.CohortSpecs[c]; co != nil && co.FairSharing {
		weight = co.FairWeight
	}
	return acc.share(weight)
}

// shareSum adds up a node's use beyond its quota and its parent's pool,
// per resource, over the node's cells.
type shareSum struct {
	borrowed, lendable map[corev1.ResourceName]float64
}

func (a *shareSum) add(fr FlavorResource, use, quota, pool flavors.Amount) {
	if a.lendable == nil {
		a.borrowed, a.lendable = map[corev1.ResourceName]float64{}, map[corev1.ResourceName]float64{}
	}
	if use > quota {
		a.borrowed[fr.Resource] += float64(use.Sub(quota))
	}
	a.lendable[fr.Resource] += float64(pool)
}

// share is the largest borrowed part per thousand of the pool, divided by
// weight (in thousandths), rounded up: MaxShare when a pool is empty or
// the weight 0.
func (a *shareSum) share(weight int64) int64 {
	var drs float64
	for r, b := range a.borrowed {
		if a.lendable[r] == 0 {
			drs = math.Inf(1)
			break
		}
		drs = math.Max(drs, 1000*b/a.lendable[r])
	}
	switch {
	case drs == 0:
		return 0
	case weight == 0 || math.IsInf(drs, 1):
		return MaxShare
	}
	share := drs * 1000 / float64(weight)
	if share >= MaxShare {
		return MaxShare
	}
	return int64(math.Ceil(share))
}

// sharesUp appends to out the share of cq with extra added to its usage
// and less taken away, then, as that change bubbles up, the share of each
// cohort above cq that has a parent: out[l] is the share of the node l
// levels above cq, in the cohort above it.
func (s *Snapshot) sharesUp(cq *ClusterQueue, extra, less Usage, out []int64) []int64 {
	out = append(out, s.shareWith(cq, extra, less))
	t := &s.Config.index().tree
	c := cq.Cohort
	p, ok := t.parent[c]
	if !ok {
		return out
	}
	delta := Usage{}
	change := func(fr FlavorResource) {
		q, _ := s.Config.QuotaOf(cq.Name, fr)
		g := q.Guaranteed()
		before := s.Usage[cq.Name][fr]
		after := before.Add(extra[fr]).Sub(less[fr])
		if d := flavors.Max(0, after.Sub(g)).Sub(flavors.Max(0, before.Sub(g))); d != 0 {
			delta[fr] = d
		}
	}
	for fr := range extra {
		change(fr)
	}
	for fr := range less {
		if _, done := extra[fr]; !done {
			change(fr)
		}
	}
	for ; ok; c, p = p, t.parent[p] {
		out = append(out, s.cohortShare(c, delta))
		up := Usage{}
		for fr, d := range delta {
			old, keep := s.borrowed[c][fr], t.local[c][fr]
			if d := flavors.Max(0, old.Add(d).Sub(keep)).Sub(flavors.Max(0, old.Sub(keep))); d != 0 {
				up[fr] = d
			}
		}
		delta = up
		_, ok = t.parent[p]
	}
	return out
}

// inTree reports whether cohort is part of a tree of more than one
// cohort: there, fair sharing walks the tree (see tournament and
// fairTarget).
func (c *Config) inTree(cohort string) bool {
	t := &c.index().tree
	return cohort != "" && len(t.cohorts[t.root[cohort]]) > 1
}

// The fair-sharing preemption strategies, tried in this order (Kueue's
// default): a victim's queue must keep at least the preemptor queue's
// share once the victim is gone, or failing that have more than it before.
const (
	lessThanOrEqualToFinalShare = iota
	lessThanInitialShare
)

// fairChoose picks victims among cands in a cohort with fair sharing: other
// queues' Workloads go first, from the queue with the highest share, each
// only if a strategy allows it; then Workloads of cq itself, as its
// withinClusterQueue policy allows. It stops as soon as fits holds. In a
// tree of cohorts, the queue is found walking down the tree (see
// fairTarget), and the strategies compare the shares of the two queues'
// ancestors just below the lowest cohort above both, as Kueue does.
func (s *Snapshot) fairChoose(sim *Snapshot, cq *ClusterQueue, wUsage Usage, cands []candidate, cells []FlavorResource, fits func([]candidate) bool) []candidate {
	byQueue := map[string][]candidate{}
	var own []candidate
	for _, c := range cands {
		if c.sameQueue {
			own = append(own, c)
		} else {
			byQueue[c.queue] = append(byQueue[c.queue], c)
		}
	}
	var chosen []candidate
	take := func(c candidate) {
		sim.Charge(c.queue, c.Usage, -1)
		chosen = append(chosen, c)
	}
	tree := s.Config.inTree(cq.Cohort)
	for _, strategy := range []int{lessThanOrEqualToFinalShare, lessThanInitialShare} {
		refused := map[string]bool{}
		var pruned map[string]bool
		if tree {
			pruned = map[string]bool{}
		}
		for !fits(chosen) {
			target, best := "", int64(-1)
			if tree {
				target = sim.fairTarget(cq, s.Config.CohortRoot(cq.Cohort), byQueue, refused, pruned, cells)
			} else {
				for _, q := range SortedKeys(byQueue) {
					if len(byQueue[q]) == 0 || refused[q] || !sim.borrowingIn(q, cells) {
						continue
					}
					if sh := sim.Share(s.Config.ClusterQueues[q]); sh > best {
						target, best = q, sh
					}
				}
			}
			if target == "" {
				break
			}
			v := byQueue[target][0]
			tq := s.Config.ClusterQueues[target]
			var ok bool
			if tree {
				// Compare the two queues' ancestors just below the
				// lowest cohort above both.
				mineAt, theirsAt := s.Config.belowCommon(cq, tq)
				mine := sim.sharesUp(cq, wUsage, nil, nil)[mineAt]
				ok = mine < sim.sharesUp(tq, nil, nil, nil)[theirsAt]
				if strategy == lessThanOrEqualToFinalShare {
					ok = mine <= sim.sharesUp(tq, nil, v.Usage, nil)[theirsAt]
				}
			} else {
				mine := sim.shareWith(cq, wUsage, nil)
				ok = mine < best
				if strategy == lessThanOrEqualToFinalShare {
					ok = mine <= sim.shareWith(tq, nil, v.Usage)
				}
			}
			if !ok {
				refused[target] = true
				continue
			}
			byQueue[target] = byQueue[target][1:]
			take(v)
		}
	}
	for _, c := range own {
		if fits(chosen) {
			break
		}
		take(c)
	}
	return chosen
}

// fairTarget walks down from cohort co for the queue to take the next
// victim from, as Kueue's fair-sharing preemption does: at each cohort, the
// child with the highest share that may still give one, a cohort winning
// a tie with a ClusterQueue. A ClusterQueue may give one while it has
// candidates left, not refused, and uses more than its nominal quota in
// cells; a cohort while some queue below it may, and it uses more than its
// subtree quota in cells or is above cq. A cohort found to have none is
// marked in pruned. It returns "" when no queue may give one.
func (s *Snapshot) fairTarget(cq *ClusterQueue, co string, byQueue map[string][]candidate, refused, pruned map[string]bool, cells []FlavorResource) string {
	t := &s.Config.index().tree
	for {
		target, best := "", int64(-1)
		for _, q := range t.direct[co] {
			if len(byQueue[q]) == 0 || refused[q] || !s.borrowingIn(q, cells) {
				continue
			}
			if sh := s.Share(s.Config.ClusterQueues[q]); sh > best {
				target, best = q, sh
			}
		}
		kid, kidBest := "", int64(-1)
		for _, k := range t.kids[co] {
			if pruned[k] || !t.isAbove(k, cq.Cohort) && !s.overIn(k, cells) {
				continue
			}
			if sh := s.cohortShare(k, nil); sh > kidBest {
				kid, kidBest = k, sh
			}
		}
		if kid == "" || kidBest < best {
			return target
		}
		if q := s.fairTarget(cq, kid, byQueue, refused, pruned, cells); q != "" {
			return q
		}
		pruned[kid] = true
	}
}

// isAbove reports whether cohort co is cohort c or above it.
func (t *cohortTree) isAbove(co, c string) bool {
	for ok := true; ok; c, ok = t.parent[c] {
		if c == co {
			return true
		}
	}
	return false
}

// overIn reports whether cohort c's subtree uses more than its subtree
// quota in any of cells.
func (s *Snapshot) overIn(c string, cells []FlavorResource) bool {
	for _, fr := range cells {
		if s.borrowed[c][fr] > s.CohortLendable(c, fr) {
			return true
		}
	}
	return false
}

// belowCommon gives, for queues a and b of one tree, how many levels above
// each (0: the queue itself) is its ancestor just below the lowest cohort
// above both: the levels of sharesUp at which their shares compare.
func (c *Config) belowCommon(a, b *ClusterQueue) (int, int) {
	t := &c.index().tree
	lca := b.Cohort
	for !t.isAbove(lca, a.Cohort) {
		lca = t.parent[lca]
	}
	return t.depth[a.Cohort] - t.depth[lca], t.depth[b.Cohort] - t.depth[lca]
}

// tournament picks the cursor whose head goes next among the cursors of
// one walk over a tree of cohorts with fair sharing, as Kueue's
// fair-sharing order does: each cohort, from the leaves up, puts forward
// one head of its subtree, that of the child (ClusterQueue or cohort)
// with the lowest share with the head admitted, ties going by Before. A
// head that does not fit now is weighed at its queue's current share.
type tournament struct {
	s    *Snapshot
	root string
	// heads keeps, per queue, its head's shares up the tree (see
	// Snapshot.sharesUp), while the tree's count of Charges stays at, and
	// the place of the queue's cursor in the heads last given to pick.
	heads map[string]*headShares
}

type headShares struct {
	w      *Workload
	at     uint64
	shares []int64
	cursor int
}

// newTournament starts a tournament over the tree of cohort. It has the
// Snapshot count the tree's Charges (see borrowerFlagsOf), which tell it
// when shares change.
func (s *Snapshot) newTournament(cohort string) *tournament {
	if s.borrowers == nil {
		s.borrowers, s.charges = map[cohortCell]*borrowerFlags{}, map[string]uint64{}
	}
	return &tournament{s: s, root: s.Config.CohortRoot(cohort), heads: map[string]*headShares{}}
}

// pick returns the index in h of the cursor whose head goes next.
func (tr *tournament) pick(h heads) int {
	s := tr.s
	t := &s.Config.index().tree
	at := s.charges[tr.root]
	for i, c := range h {
		w := c.head()
		m := tr.heads[c.cq.Name]
		if m == nil {
			m = &headShares{}
			tr.heads[c.cq.Name] = m
		}
		m.cursor = i
		if m.w != w || m.at != at || m.shares == nil {
			var extra Usage
			if w.Queue == c.cq.Name {
				if a, v := s.assignIn(c.cq, w); v.Kind == Fits {
					extra = a.Usage
				}
			}
			m.w, m.at, m.shares = w, at, s.sharesUp(c.cq, extra, nil, m.shares[:0])
		}
	}
	var best func(co string) int
	best = func(co string) int {
		win, low := -1, int64(0)
		consider := func(i int, share int64) {
			if win < 0 || share < low || share == low && Before(h[i].head(), h[win].head()) {
				win, low = i, share
			}
		}
		for _, k := range t.kids[co] {
			if i := best(k); i >= 0 {
				consider(i, tr.heads[h[i].cq.Name].shares[t.depth[h[i].cq.Cohort]-t.depth[k]+1])
			}
		}
		for _, q := range t.direct[co] {
			if m := tr.heads[q]; m != nil && m.cursor < len(h) && h[m.cursor].cq.Name == q {
				consider(m.cursor, m.shares[0])
			}
		}
		return win
	}
	return best(tr.root)
}
