package queues

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// Admitted is a Workload that holds quota: a preemption candidate.
type Admitted struct {
	W          *Workload
	Usage      Usage
	AdmittedAt time.Time
	// Placement is where its pods were placed in a topology; nil for
	// none. Preempting it frees that room.
	Placement *Placement
}

// Victim is an admitted Workload chosen to be preempted, and why.
type Victim struct {
	*Admitted
	// Reason says why, for the Preempted event: "within ClusterQueue q",
	// "to reclaim quota lent to cohort c" or "to borrow within cohort c".
	Reason string
	// Cause is the same as one of Kueue's preemption reasons (Cause*).
	Cause string
}

// The causes of a preemption, as Kueue names them.
const (
	// CauseInClusterQueue: the victim is in the preemptor's ClusterQueue.
	CauseInClusterQueue = "InClusterQueue"
	// CauseInCohortReclamation: the victim's queue borrows what the
	// preemptor's lends, and the preemptor then fits within its nominal
	// quota.
	CauseInCohortReclamation = "InCohortReclamation"
	// CauseInCohortReclaimWhileBorrowing: likewise, but the preemptor
	// then borrows (borrowWithinCohort).
	CauseInCohortReclaimWhileBorrowing = "InCohortReclaimWhileBorrowing"
	// CauseInCohortFairSharing: the victim is in another queue of a
	// cohort with fair sharing.
	CauseInCohortFairSharing = "InCohortFairSharing"
)

// Preemption is a decision to make room for a Workload by preempting
// others. The preemptor's quota is reserved at once; it is admitted when
// the victims' quota is really free.
type Preemption struct {
	Preemptor  *Workload
	Assignment Assignment
	Victims    []Victim
	// Moved is, for each victim, the part of its usage that now counts
	// as the preemptor's claim instead.
	Moved []Usage
}

// claim charges a preemptor's usage to queue q and moves to it, from the
// victims, the usage the claim covers: what the victims hold and the claim
// needs is counted once, in q, so that a claim never counts twice against
// the cohort, and never counts against the victims' own queue. It returns
// what was moved from each victim.
func (s *Snapshot) claim(q string, u Usage, victims []Victim) []Usage {
	left := u.Clone()
	moved := make([]Usage, len(victims))
	// The victims of q first: the claim lands in q, so what it takes over
	// there keeps q's usage what it will be once they are gone, and q
	// never looks like a borrower meanwhile.
	for _, own := range []bool{true, false} {
		for i, v := range victims {
			if (v.W.Queue == q) != own {
				continue
			}
			m := Usage{}
			for fr, a := range v.Usage {
				if t := flavors.Min(a, left[fr]); t > 0 {
					m[fr] = t
					left[fr] = left[fr].Sub(t)
				}
			}
			moved[i] = m
			s.Charge(v.W.Queue, m, -1)
		}
	}
	s.Charge(q, u, +1)
	return moved
}

// Message is the Preempting event's text.
func (p Preemption) Message() string {
	parts := make([]string, len(p.Victims))
	for i, v := range p.Victims {
		parts[i] = fmt.Sprintf("%s (priority %d)", v.W.Key(), v.W.Priority)
	}
	noun := "jobs"
	if len(parts) == 1 {
		noun = "job"
	}
	return fmt.Sprintf("Preempting %d %s to fit: %s", len(parts), noun, strings.Join(parts, ", "))
}

// VictimMessage is the Preempted event's text for v.
func (p Preemption) VictimMessage(v Victim) string {
	rel := "="
	switch {
	case p.Preemptor.Priority > v.W.Priority:
		rel = ">"
	case p.Preemptor.Priority < v.W.Priority:
		rel = "<"
	}
	return fmt.Sprintf("Preempted by %s (priority %d %s %d) %s", p.Preemptor.Key(), p.Preemptor.Priority, rel, v.W.Priority, v.Reason)
}

// candidate is an admitted Workload that a preemptor may displace.
type candidate struct {
	*Admitted
	queue     string
	sameQueue bool
	// borrowOK: may be preempted even if the preemptor then borrows.
	borrowOK bool
	// advantage: the preemptor takes back quota of its own subtree below
	// the lowest cohort above both queues (see ancestryOf). Such
	// candidates go first.
	advantage bool
	// lca is that cohort's level on the preemptor's path up its tree (see
	// ancestry); 0 in a flat cohort, whose lowest cohort is the
	// preemptor's own. It fits in the struct's padding.
	lca int16
}

// canPreempt reports whether cq's policy lets preemptor w displace
// victim v, which is in cq (same) or in another queue of its cohort.
func canPreempt(cq *ClusterQueue, w, v *Workload, same bool) (ok, borrowOK bool) {
	if same {
		switch cq.Preemption.WithinClusterQueue {
		case PreemptLowerPriority:
			ok = v.Priority < w.Priority
		case PreemptLowerOrNewerEqualPriority:
			ok = v.Priority < w.Priority || v.Priority == w.Priority && w.queueKey() < v.queueKey()
		}
		return ok, ok
	}
	switch cq.Preemption.ReclaimWithinCohort {
	case PreemptAny:
		ok = true
	case PreemptLowerPriority:
		ok = v.Priority < w.Priority
	}
	b := cq.Preemption.BorrowWithinCohort
	borrowOK = ok && b.Policy == PreemptLowerPriority && v.Priority < w.Priority &&
		(b.MaxPriorityThreshold == nil || v.Priority <= *b.MaxPriorityThreshold)
	return ok, borrowOK
}

// preemptsAtAll reports whether cq's policy may ever preempt.
func preemptsAtAll(cq *ClusterQueue) bool {
	p := cq.Preemption
	return p.WithinClusterQueue == PreemptLowerPriority || p.WithinClusterQueue == PreemptLowerOrNewerEqualPriority ||
		cq.Cohort != "" && (p.ReclaimWithinCohort == PreemptAny || p.ReclaimWithinCohort == PreemptLowerPriority)
}

// mayFindVictims reports whether findVictims could find a candidate for
// w in cq in some flavor: an admitted Workload of cq that w may preempt,
// or, where cq may reclaim, another queue of its cohort that borrows in a
// cell of cq's flavors. It is false only when every call would have no
// candidate, so that a Workload that must wait is not assigned a second
// time, for preemption, in vain: in a full cohort where no queue borrows,
// that is most of them. In a tree of cohorts or with fair sharing, which
// find candidates otherwise, it is always true.
func (s *Snapshot) mayFindVictims(cq *ClusterQueue, w *Workload) bool {
	for _, a := range s.admittedIn(cq.Name) {
		if ok, _ := canPreempt(cq, w, a.W, true); ok {
			return true
		}
	}
	if cq.Cohort == "" {
		return false
	}
	if s.Config.FairSharing(cq.Cohort) || s.Config.inTree(cq.Cohort) {
		return true
	}
	if r := cq.Preemption.ReclaimWithinCohort; r != PreemptAny && r != PreemptLowerPriority {
		return false // it reclaims from no other queue
	}
	root, members := s.Config.CohortRoot(cq.Cohort), s.Config.Members(cq)
	for _, g := range cq.ResourceGroups {
		for _, f := range g.Flavors {
			for _, r := range g.Covered {
				for i, b := range s.borrowerFlagsOf(root, members, FlavorResource{f.Name, r}) {
					if b && members[i] != cq.Name {
						return true
					}
				}
			}
		}
	}
	return false
}

// findVictims chooses the fewest admitted Workloads whose removal lets w's
// resources res fit in flavor f of cq. Candidates are taken in order:
// Workloads of other (borrowing) queues first, then lowest priority, then
// most recently admitted; taking stops as soon as w fits, and every victim
// that turns out not to be needed is dropped again. It returns nil when w
// would not fit even with every eligible candidate gone.
func (s *Snapshot) findVictims(cq *ClusterQueue, w *Workload, f string, res []corev1.ResourceName, total flavors.Resources) []Victim {
	cells := make([]FlavorResource, len(res))
	for i, r := range res {
		cells[i] = FlavorResource{f, r}
	}
	uses := func(a *Admitted) bool {
		for _, fr := range cells {
			if a.Usage[fr] > 0 {
				return true
			}
		}
		return false
	}
	fair := s.Config.FairSharing(cq.Cohort)
	members := s.Config.Members(cq)
	root := s.Config.CohortRoot(cq.Cohort)
	var buf [4][]bool
	borrowing := buf[:0] // by cell, then member
	if !fair && cq.Cohort != "" {
		for _, fr := range cells {
			borrowing = append(borrowing, s.borrowerFlagsOf(root, members, fr))
		}
	}
	// In a tree of cohorts, a candidate's queue is reached through the
	// lowest cohort above both queues; see reach.
	var up *ancestry
	if cq.Cohort != "" && len(s.Config.index().tree.cohorts[root]) > 1 {
		up = s.ancestryOf(cq, cells, total)
	}
	var cands []candidate
	for m, q := range members {
		// Reclaim only takes back what a queue borrows, and removing
		// victims never makes a queue borrow: a queue that does not
		// borrow now offers no candidates.
		if q != cq.Name && !fair && !anyAt(borrowing, m) {
			continue
		}
		lca, advantage := int16(0), false
		if up != nil && q != cq.Name {
			// With fair sharing, any borrowing queue of the tree gives
			// candidates, as in Kueue: fairTarget walks down to them.
			if lca, advantage = up.reach(s.Config.ClusterQueues[q].Cohort); !fair && !s.overBelow(q, up.names[lca], cells) {
				continue
			}
		}
		for _, a := range s.admittedIn(q) {
			if a.W.UID == w.UID || !uses(a) {
				continue
			}
			ok, borrowOK := canPreempt(cq, w, a.W, q == cq.Name)
			if ok {
				cands = append(cands, candidate{Admitted: a, queue: q, sameQueue: q == cq.Name, borrowOK: borrowOK || advantage, lca: lca, advantage: advantage})
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sim := s.cloneFor(cq)
	if !fair {
		// Without room even with every candidate gone, no choice helps:
		// say so before sorting them, then put them back.
		for _, c := range cands {
			sim.Charge(c.queue, c.Usage, -1)
		}
		for _, fr := range cells {
			if total[fr.Resource] > sim.Available(cq, fr) {
				return nil
			}
		}
		for _, c := range cands {
			sim.Charge(c.queue, c.Usage, +1)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.sameQueue != b.sameQueue {
			return !a.sameQueue
		}
		if a.advantage != b.advantage {
			return a.advantage
		}
		if a.W.Priority != b.W.Priority {
			return a.W.Priority < b.W.Priority
		}
		if !a.AdmittedAt.Equal(b.AdmittedAt) {
			return a.AdmittedAt.After(b.AdmittedAt)
		}
		return a.W.UID < b.W.UID
	})

	placed := s.placedAfter(f, w)
	fits := func(chosen []candidate) bool {
		borrowing := false
		for _, fr := range cells {
			need := total[fr.Resource]
			if need > sim.Available(cq, fr) {
				return false
			}
			q, _ := s.Config.QuotaOf(cq.Name, fr)
			if sim.Usage[cq.Name][fr].Add(need) > q.Nominal {
				borrowing = true
			}
		}
		if borrowing {
			for _, c := range chosen {
				if !c.sameQueue && !c.borrowOK {
					return false
				}
			}
		}
		return placed == nil || placed(chosen)
	}
	var chosen []candidate
	if fair {
		wUsage := Usage{}
		for _, fr := range cells {
			wUsage[fr] = total[fr.Resource]
		}
		chosen = s.fairChoose(sim, cq, wUsage, cands, cells, fits)
	} else {
		for _, c := range cands {
			if fits(chosen) {
				break
			}
			if !c.sameQueue && (!sim.borrowingIn(c.queue, cells) || up != nil && !sim.overBelow(c.queue, up.names[c.lca], cells)) {
				continue // reclaim only takes back what a queue borrowed
			}
			sim.Charge(c.queue, c.Usage, -1)
			chosen = append(chosen, c)
		}
	}
	if !fits(chosen) {
		return nil
	}
	// Drop the victims that are not needed, the last taken first.
	for i := len(chosen) - 1; i >= 0; i-- {
		c := chosen[i]
		sim.Charge(c.queue, c.Usage, +1)
		rest := append(append([]candidate(nil), chosen[:i]...), chosen[i+1:]...)
		if fits(rest) {
			chosen = rest
			continue
		}
		sim.Charge(c.queue, c.Usage, -1)
	}
	borrows := false
	for _, fr := range cells {
		q, _ := s.Config.QuotaOf(cq.Name, fr)
		borrows = borrows || sim.Usage[cq.Name][fr].Add(total[fr.Resource]) > q.Nominal
	}
	victims := make([]Victim, len(chosen))
	for i, c := range chosen {
		reason, cause := fmt.Sprintf("within ClusterQueue %s", cq.Name), CauseInClusterQueue
		if !c.sameQueue {
			lca := cq.Cohort
			if up != nil {
				lca = up.names[c.lca]
			}
			reason, cause = fmt.Sprintf("to reclaim quota lent to cohort %s", lca), CauseInCohortReclamation
			if borrows && !c.advantage {
				reason, cause = fmt.Sprintf("to borrow within cohort %s", lca), CauseInCohortReclaimWhileBorrowing
			}
			if fair {
				cause = CauseInCohortFairSharing
			}
		}
		victims[i] = Victim{Admitted: c.Admitted, Reason: reason, Cause: cause}
	}
	return victims
}

// ancestry is a preemptor queue's path up its cohort tree: each cohort's
// level (0 for the queue's own cohort), and, by level, the cohort and
// whether the preemptor has the advantage over the queues reached through
// it.
type ancestry struct {
	parent    map[string]string
	level     map[string]int16
	names     []string
	advantage []bool
}

// ancestryOf walks up from cq as Kueue's hierarchical reclaim does: the
// preemptor, needing total of cells, has the advantage over the queues
// outside the lowest subtree of its path that can hold its request with
// what that subtree already uses. Reclaiming from them takes back quota of
// its own subtree, so it may do so even while borrowing.
func (s *Snapshot) ancestryOf(cq *ClusterQueue, cells []FlavorResource, total flavors.Resources) *ancestry {
	t := &s.Config.index().tree
	up := &ancestry{parent: t.parent, level: map[string]int16{}}
	// Whether the request fits in the subtree below the cohort at
	// the current level: cq's own nominal quota first.
	below := true
	remaining := make(Usage, len(cells))
	for _, fr := range cells {
		q, _ := s.Config.QuotaOf(cq.Name, fr)
		used, need := s.Usage[cq.Name][fr], total[fr.Resource]
		below = below && used.Add(need) <= q.Nominal
		remaining[fr] = flavors.Max(0, need.Sub(flavors.Max(0, q.Guaranteed().Sub(used))))
	}
	for c, ok := cq.Cohort, true; ok; c, ok = t.parent[c] {
		up.level[c] = int16(len(up.names))
		up.names, up.advantage = append(up.names, c), append(up.advantage, below)
		fits := true
		for _, fr := range cells {
			used := s.borrowed[c][fr]
			fits = fits && used.Add(remaining[fr]) <= s.CohortLendable(c, fr)
			remaining[fr] = flavors.Max(0, remaining[fr].Sub(flavors.Max(0, t.local[c][fr].Sub(used))))
		}
		below = below || fits
	}
	return up
}

// reach finds the lowest cohort on the path up from cohort that is also
// above the preemptor, and whether the preemptor has the advantage over
// the queues reached through it. Both queues are in one tree, so the path
// meets the preemptor's at its root at the latest.
func (up *ancestry) reach(cohort string) (int16, bool) {
	c := cohort
	for {
		if l, ok := up.level[c]; ok {
			return l, up.advantage[l]
		}
		c = up.parent[c]
	}
}

// overBelow reports whether queue q's cohorts below lca, up from q's own,
// all use more than their subtree quota in some of cells: only then has q
// borrowed from lca's other subtrees, as Kueue's candidates must have.
func (s *Snapshot) overBelow(q string, lca string, cells []FlavorResource) bool {
	t := &s.Config.index().tree
	for c := s.Config.ClusterQueues[q].Cohort; c != lca; c = t.parent[c] {
		if !s.overIn(c, cells) {
			return false
		}
	}
	return true
}

// anyAt says whether any of flags holds at position i.
func anyAt(flags [][]bool, i int) bool {
	for _, f := range flags {
		if f[i] {
			return true
		}
	}
	return false
}

// borrowingIn reports whether queue q uses more than its nominal quota in
// any of cells.
func (s *Snapshot) borrowingIn(q string, cells []FlavorResource) bool {
	for _, fr := range cells {
		if s.borrows(q, fr) {
			return true
		}
	}
	return false
}

// borrows reports whether queue q uses more than its nominal quota of fr.
func (s *Snapshot) borrows(q string, fr FlavorResource) bool {
	quota, _ := s.Config.QuotaOf(q, fr)
	return s.Usage[q][fr] > quota.Nominal
}

// cloneFor returns a Snapshot of cq's cohort tree (or of cq alone) to simulate
// removals in. It shares s's usage of each queue until it charges that
// queue (see Charge): a pass tries this for many Workloads, and copying a
// large cohort's usage each time would cost more than the search.
func (s *Snapshot) cloneFor(cq *ClusterQueue) *Snapshot {
	members := s.Config.Members(cq)
	sim := &Snapshot{Config: s.Config, Usage: make(map[string]Usage, len(members)), Namespaces: s.Namespaces,
		borrowed: map[string]Usage{}, sharing: true}
	for _, q := range members {
		sim.Usage[q] = s.Usage[q]
	}
	if cq.Cohort != "" {
		for _, c := range s.Config.index().tree.cohorts[s.Config.CohortRoot(cq.Cohort)] {
			sim.borrowed[c] = s.borrowed[c].Clone()
		}
	}
	return sim
}

// mayPreempt says whether s has preemption candidates at all.
func (s *Snapshot) mayPreempt() bool { return s.Admitted != nil || s.AdmittedIn != nil }

// admittedIn is s.Admitted[q], asked of s.AdmittedIn the first time.
func (s *Snapshot) admittedIn(q string) []*Admitted {
	list, ok := s.Admitted[q]
	if ok || s.AdmittedIn == nil {
		return list
	}
	list = s.AdmittedIn(q)
	if s.Admitted == nil {
		s.Admitted = map[string][]*Admitted{}
	}
	s.Admitted[q] = list
	return list
}

// removeAdmitted forgets victims as preemption candidates for the rest of
// a pass. Their quota stays charged.
func (s *Snapshot) removeAdmitted(victims []Victim) {
	for _, v := range victims {
		list := s.admittedIn(v.W.Queue)
		for i, a := range list {
			if a == v.Admitted {
				s.Admitted[v.W.Queue] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
}
