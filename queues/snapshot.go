package queues

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// Usage is the quota in use, per flavor and resource.
type Usage map[FlavorResource]flavors.Amount

// Add adds u2 into u.
func (u Usage) Add(u2 Usage) {
	for fr, a := range u2 {
		u[fr] = u[fr].Add(a)
	}
}

// Sub removes u2 from u, dropping cells that reach zero.
func (u Usage) Sub(u2 Usage) {
	for fr, a := range u2 {
		if v := u[fr].Sub(a); v != 0 {
			u[fr] = v
		} else {
			delete(u, fr)
		}
	}
}

// Equal says whether u and o hold the same amounts.
func (u Usage) Equal(o Usage) bool {
	if len(u) != len(o) {
		return false
	}
	for k, v := range u {
		if o[k] != v {
			return false
		}
	}
	return true
}

// Describe renders u as "nvidia.com/gpu=4, cpu=8 in flavor gpu", grouped
// by flavor, for Events and messages.
func (u Usage) Describe() string {
	byFlavor := map[string][]string{}
	for fr, a := range u {
		byFlavor[fr.Flavor] = append(byFlavor[fr.Flavor], fmt.Sprintf("%s=%s", fr.Resource, a.Format(fr.Resource)))
	}
	parts := make([]string, 0, len(byFlavor))
	for _, f := range SortedKeys(byFlavor) {
		res := byFlavor[f]
		sort.Strings(res)
		parts = append(parts, fmt.Sprintf("%s in flavor %s", strings.Join(res, ", "), f))
	}
	return strings.Join(parts, "; ")
}

// Clone copies u.
func (u Usage) Clone() Usage {
	out := make(Usage, len(u))
	for k, v := range u {
		out[k] = v
	}
	return out
}

// CloneUsages copies every ClusterQueue's usage, for a Snapshot to own.
func CloneUsages(m map[string]Usage) map[string]Usage {
	out := make(map[string]Usage, len(m))
	for q, u := range m {
		out[q] = u.Clone()
	}
	return out
}

// Snapshot is the state one admission pass decides on: the config, the
// usage of every ClusterQueue, and the labels of every bound namespace.
// Decide updates its usage as it admits, so later decisions in the same
// pass see the quota already spent.
type Snapshot struct {
	Config *Config
	// Usage maps a ClusterQueue to its usage. Missing means none.
	Usage map[string]Usage
	// Namespaces maps a namespace to its labels, for namespaceSelectors.
	Namespaces map[string]labels.Set
	// Admitted lists, per ClusterQueue, the Workloads holding quota that
	// preemption may choose from. Nil disables preemption, unless
	// AdmittedIn is set.
	Admitted map[string][]*Admitted
	// AdmittedIn, when set, lists a ClusterQueue's Admitted that Admitted
	// does not hold, when a preemption first looks at that queue; Admitted
	// keeps the list for the rest of the pass. A pass that preempts in a
	// few queues of many builds the lists of those only.
	AdmittedIn func(cq string) []*Admitted
	// Reserved lists preemptors whose victims are gone: they are tried
	// first, since the quota just freed was freed for them.
	Reserved []*Workload
	// Yield maps a preemption victim back in its queue to the preemptor
	// it waits for: it is not admitted, and preempts nothing, until that
	// preemptor is admitted (or gives up). Otherwise it could take back the
	// room it was preempted for, and be preempted again.
	Yield map[*Workload]*Workload
	// Budget, when positive, is the most writes the pass decides (see
	// Decide): the caller decides no further ahead than it can write, so
	// that what arrives meanwhile, of higher priority, is not decided
	// behind a backlog of writes. Rotate picks the group it starts at.
	Budget, Rotate int
	// Tails describes, by queue, the end of pending lists Decide is
	// given (NewTail of that very list), so that a pass need not walk
	// what waits behind a waiting Workload: a cohort's first walk drops
	// a queue whose rest could not fit either, and with Settled the
	// second walk passes over such a rest without observing it.
	// Settled reports whether every Workload of queue's list from index
	// from on was observed by an earlier pass with a verdict of code, so
	// that observing them again would change nothing. A queue without a
	// Tail, or a nil Settled, has every Workload examined.
	Tails   map[string]*Tail
	Settled func(queue string, from int, code string) bool
	// Domains maps each flavor with a topology to the tree of its
	// domains, which Decide only reads; a flavor missing from it has no
	// nodes yet. A nil Domains places nothing: workloads are admitted by
	// quota alone (an estimate that cannot foresee the domains).
	Domains map[string]*Domains

	// borrowed is, per cohort, the usage its members and child cohorts
	// take above what they keep (their guaranteed quota, or what a child
	// cohort's lendingLimit keeps): what they hold of the cohort's
	// subtree quota. It bubbles up the tree above what each cohort keeps.
	borrowed map[string]Usage
	// sharing says the Snapshot shares its Usages with whoever made it
	// (NewSnapshotPooled, cloneFor) but those in owned, which it copied
	// the first time it charged them.
	sharing bool
	owned   map[string]bool
	// charges counts, per cohort tree (by its root), the Charges to its
	// members since borrowers was made: an entry holds while it stays the
	// same.
	charges map[string]uint64
	// borrowers caches which members of a cohort tree use more than their
	// nominal quota of a cell, for findVictims, which asks that of every
	// member for every Workload that does not fit.
	borrowers map[cohortCell]*borrowerFlags
	// taken is what the pass's admissions took of each flavor's
	// domains.
	taken map[string]Taken
	// waitCodes holds the Verdict code of a wait for quota of a cell.
	waitCodes map[FlavorResource]string
	// cursorBuf holds the cursors of the walk under way, and walk their
	// heap (see cursors).
	cursorBuf []cursor
	walk      heads
}

type cohortCell struct {
	cohort string
	fr     FlavorResource
}

// borrowerFlags says, by position in the cohort's member list, which
// members borrow, as of the cohort's charges count at.
type borrowerFlags struct {
	at uint64
	by []bool
}

// borrowerFlagsOf says, by position in members (those of the tree whose
// root is cohort), which members use more than their nominal quota of fr.
func (s *Snapshot) borrowerFlagsOf(cohort string, members []string, fr FlavorResource) []bool {
	key := cohortCell{cohort, fr}
	at := s.charges[cohort]
	b := s.borrowers[key]
	if b != nil && b.at == at {
		return b.by
	}
	if b == nil {
		if s.borrowers == nil {
			// Charges before the first entry do not matter: it is
			// made from the usage they left.
			s.borrowers, s.charges = map[cohortCell]*borrowerFlags{}, map[string]uint64{}
		}
		b = &borrowerFlags{by: make([]bool, len(members))}
		s.borrowers[key] = b
	}
	b.at = at
	for i, q := range members {
		b.by[i] = s.borrows(q, fr)
	}
	return b.by
}

// Pools keeps what the members of each cohort borrow of its pool (see
// Snapshot), as usage changes (Move), so that a pass's Snapshot takes it
// as it is (NewSnapshotPooled) instead of adding up every queue's usage.
// It holds for one Config.
type Pools struct {
	// s holds the Config and the pools (borrowed) only.
	s Snapshot
}

// NewPools adds up the pools of cfg's cohorts from usage, which it reads
// only.
func NewPools(cfg *Config, usage map[string]Usage) *Pools {
	p := &Pools{s: Snapshot{Config: cfg, borrowed: map[string]Usage{}}}
	p.s.addAll(usage)
	return p
}

// For says whether p holds for cfg.
func (p *Pools) For(cfg *Config) bool { return p != nil && p.s.Config == cfg }

// Move records that queue's usage of fr went from before to after.
func (p *Pools) Move(queue string, fr FlavorResource, before, after flavors.Amount) {
	if cq := p.s.Config.ClusterQueues[queue]; cq != nil && cq.Cohort != "" && before != after {
		p.s.addBorrowed(cq, fr, before, after)
	}
}

// NewSnapshotPooled builds a Snapshot that takes ownership of the map
// usage but not of its Usages: a queue's Usage is copied the first time
// the Snapshot charges it, so that a pass copies only what it charges.
// The cohorts' pools are copied from pools, which must hold for cfg and
// count the usage of which usage holds the queues the Snapshot decides,
// with their cohort trees whole.
func NewSnapshotPooled(cfg *Config, usage map[string]Usage, namespaces map[string]labels.Set, pools *Pools) *Snapshot {
	s := &Snapshot{Config: cfg, Usage: usage, Namespaces: namespaces, borrowed: make(map[string]Usage, len(pools.s.borrowed)), sharing: true}
	if s.Usage == nil {
		s.Usage = map[string]Usage{}
	}
	for c, u := range pools.s.borrowed {
		s.borrowed[c] = u.Clone()
	}
	return s
}

// NewSnapshot builds a Snapshot. It takes ownership of usage.
func NewSnapshot(cfg *Config, usage map[string]Usage, namespaces map[string]labels.Set) *Snapshot {
	s := &Snapshot{Config: cfg, Usage: usage, Namespaces: namespaces, borrowed: map[string]Usage{}}
	if s.Usage == nil {
		s.Usage = map[string]Usage{}
	}
	s.addAll(s.Usage)
	return s
}

// addAll adds the usage of every queue of usage to its cohorts' pools.
func (s *Snapshot) addAll(usage map[string]Usage) {
	for name, u := range usage {
		cq := s.Config.ClusterQueues[name]
		if cq == nil || cq.Cohort == "" {
			continue
		}
		for fr, a := range u {
			s.addBorrowed(cq, fr, 0, a)
		}
	}
}

// addBorrowed moves the cohort's pooled usage of fr as cq's usage goes from
// before to after, and that of each cohort above it as the part beyond
// what the one below keeps changes.
func (s *Snapshot) addBorrowed(cq *ClusterQueue, fr FlavorResource, before, after flavors.Amount) {
	q, _ := s.Config.QuotaOf(cq.Name, fr)
	g := q.Guaranteed()
	delta := flavors.Max(0, after.Sub(g)).Sub(flavors.Max(0, before.Sub(g)))
	t := &s.Config.index().tree
	for c := cq.Cohort; delta != 0; {
		b := s.borrowed[c]
		if b == nil {
			b = Usage{}
			s.borrowed[c] = b
		}
		old := b[fr]
		b[fr] = old.Add(delta)
		p, ok := t.parent[c]
		if !ok {
			return
		}
		keep := t.local[c][fr]
		delta = flavors.Max(0, b[fr].Sub(keep)).Sub(flavors.Max(0, old.Sub(keep)))
		c = p
	}
}

// Charge adds u to cq's usage (a negative amount releases).
func (s *Snapshot) Charge(cqName string, u Usage, sign int) {
	cq := s.Config.ClusterQueues[cqName]
	cur := s.Usage[cqName]
	if s.sharing && !s.owned[cqName] {
		if s.owned == nil {
			s.owned = map[string]bool{}
		}
		s.owned[cqName] = true
		if cur != nil {
			cur = cur.Clone()
			s.Usage[cqName] = cur
		}
	}
	if cur == nil {
		cur = Usage{}
		s.Usage[cqName] = cur
	}
	for fr, a := range u {
		before := cur[fr]
		after := before.Add(a)
		if sign < 0 {
			after = before.Sub(a)
		}
		cur[fr] = after
		if cq != nil && cq.Cohort != "" {
			s.addBorrowed(cq, fr, before, after)
		}
	}
	if s.borrowers != nil && cq != nil && cq.Cohort != "" {
		s.charges[s.Config.CohortRoot(cq.Cohort)]++
	}
}

// CohortLendable is the pool a cohort holds for fr, its subtree quota: in a
// flat cohort, the sum of its members' lendable quota; in a tree, also its
// own nominal quota and what its child cohorts lend it.
func (s *Snapshot) CohortLendable(cohort string, fr FlavorResource) flavors.Amount {
	return s.Config.index().lendable[cohort][fr]
}

// CohortFree is what is left of the cohort's pool for fr, not counting
// what it could borrow from its parent.
func (s *Snapshot) CohortFree(cohort string, fr FlavorResource) flavors.Amount {
	return flavors.Max(0, s.CohortLendable(cohort, fr).Sub(s.borrowed[cohort][fr]))
}

// Available is how much more of fr cq may use now: its unused guaranteed
// quota plus what the cohort can still lend it, within its borrowingLimit.
func (s *Snapshot) Available(cq *ClusterQueue, fr FlavorResource) flavors.Amount {
	q, ok := s.Config.QuotaOf(cq.Name, fr)
	if !ok {
		return 0
	}
	used := s.Usage[cq.Name][fr]
	if cq.Cohort == "" {
		return flavors.Max(0, q.Nominal.Sub(used))
	}
	local := flavors.Max(0, q.Guaranteed().Sub(used))
	fromCohort := s.cohortAvailable(cq.Cohort, fr)
	if q.BorrowingLimit != flavors.Unlimited {
		inPool := flavors.Max(0, used.Sub(q.Guaranteed()))
		fromCohort = flavors.Min(fromCohort, q.Lendable().Sub(inPool).Add(q.BorrowingLimit))
	}
	return local.Add(flavors.Max(0, fromCohort))
}

// cohortAvailable is how much more of fr cohort c's subtree may use now:
// at a root, what is left of its pool; below, what it keeps and has not
// used, plus what its parent can still give it, within its borrowingLimit.
func (s *Snapshot) cohortAvailable(c string, fr FlavorResource) flavors.Amount {
	t := &s.Config.index().tree
	p, ok := t.parent[c]
	if !ok {
		return s.CohortFree(c, fr)
	}
	used, keep := s.borrowed[c][fr], t.local[c][fr]
	fromParent := s.cohortAvailable(p, fr)
	if q := t.cohortQuota(c, fr); q.BorrowingLimit != flavors.Unlimited {
		inParent := flavors.Max(0, used.Sub(keep))
		fromParent = flavors.Min(fromParent, s.CohortLendable(c, fr).Sub(keep).Sub(inParent).Add(q.BorrowingLimit))
	}
	return flavors.Max(0, keep.Sub(used)).Add(flavors.Max(0, fromParent))
}

// Ceiling is the most of fr cq could ever use, with every other queue of
// its cohort tree idle: nominal plus what it may borrow, within the
// borrowingLimits of cq and of each cohort on the way up.
func (s *Snapshot) Ceiling(cq *ClusterQueue, fr FlavorResource) (total, nominal, borrow flavors.Amount) {
	q, ok := s.Config.QuotaOf(cq.Name, fr)
	if !ok {
		return 0, 0, 0
	}
	if cq.Cohort == "" {
		return q.Nominal, q.Nominal, 0
	}
	others := s.Config.index().tree.potential[cq.Cohort][fr].Sub(q.Lendable())
	borrow = flavors.Min(flavors.Max(0, others), q.BorrowingLimit)
	return q.Nominal.Add(borrow), q.Nominal, borrow
}
