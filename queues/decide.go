package queues

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// Admission is a decision to admit a Workload with an Assignment.
type Admission struct {
	Workload   *Workload
	Assignment Assignment
}

// Decision is what one admission pass decided.
type Decision struct {
	Admissions  []Admission
	Preemptions []Preemption
	// Full says the pass stopped at Snapshot.Budget, and Rest lists
	// the queues it did not finish: Workloads it did not reach were not
	// decided.
	Full bool
	Rest []string
	// writes counts the writes decided: an admission's and a victim's.
	writes int
}

// spend counts n more writes decided, and marks the pass full at s.Budget.
func (d *Decision) spend(s *Snapshot, n int) {
	d.writes += n
	d.full(s)
}

// full says whether the pass has reached s.Budget, and marks it so.
func (d *Decision) full(s *Snapshot) bool {
	if s.Budget > 0 && d.writes >= s.Budget {
		d.Full = true
	}
	return d.Full
}

// Decide runs one admission pass. pending holds each ClusterQueue's pending
// Workloads in admission order (see Before). Within a cohort the queues'
// heads are merged in that same order, so priority and age decide across
// queues too. A Workload that fits is admitted and its quota charged to s
// before the next one is tried. observe is called once for every Workload
// examined, with its Verdict (Fits for those admitted) and its 1-based
// position in its queue's list, except the settled ends of lists that
// s.Settled lets a pass pass over (see Snapshot.Tails). A
// StrictFIFO queue stops at its first Workload that must wait; a
// BestEffortFIFO queue goes on to the ones behind it.
//
// A Workload that must wait may preempt, if its ClusterQueue's policy and
// s.Admitted (or s.AdmittedIn) allow. The preemptor's quota is charged at
// once, as a claim, so that no other Workload is decided on the room its
// victims will leave; the victims' quota is moved to that claim where it
// covers it (see claim), and the rest of it stays charged, since their
// pods run until the preemption takes effect. Victims are no longer
// candidates for other preemptors. The preemptor is admitted by a later
// pass, once the victims' quota is really free, and the caller keeps the
// claim until then. observe sees it with a Preempting verdict.
//
// Within a cohort, quota goes first to Workloads that fit in their own
// queue's nominal quota, as in Kueue: a first walk admits only those, and
// a second walk, in the same order, lets the rest borrow or preempt. So a
// Workload never borrows quota that its lender's own pending Workloads
// could use at once, which would only be reclaimed by preemption. Before
// both walks, the Workloads in s.Reserved (preemptors whose victims have
// gone) are tried: the quota their preemption freed is theirs. A victim
// in s.Yield waits until its preemptor is admitted (a StrictFIFO queue
// waits behind it): it neither takes that room back nor preempts.
//
// In a cohort with fair sharing (see Config.FairSharing), the queues take
// turns by share instead: the next Workload comes from the queue with the
// lowest current share (see Snapshot.Share), ties broken by order, and
// preemption across queues follows the share strategies (see fairChoose).
// In a tree of cohorts, a tournament down the tree picks it (see
// tournament).
//
// With s.Budget set, the pass stops once it has decided that many
// writes (admissions, and victims), and says so in Decision.Full, with
// the queues it did not finish in Decision.Rest; the Workloads it did not
// reach are not observed. The independent groups
// (cohort trees, and queues without a cohort) are then walked from the
// one s.Rotate picks, so that none waits behind the others pass after
// pass.
//
// Decide touches nothing but s: the caller makes the writes.
func Decide(s *Snapshot, pending map[string][]*Workload, observe Observer) Decision {
	var d Decision
	reserved := map[string][]*Workload{}
	for _, w := range s.Reserved {
		reserved[w.Queue] = append(reserved[w.Queue], w)
	}
	groups := s.groups(pending)
	start := 0
	if s.Budget > 0 && len(groups) > 0 {
		start = s.Rotate % len(groups)
	}
	for i := range groups {
		g := groups[(start+i)%len(groups)]
		if !d.full(s) {
			s.decideGroup(g, pending, reserved, observe, &d)
		}
		if d.Full {
			d.Rest = append(d.Rest, g...)
		}
	}
	return d
}

// Observer sees each Workload a pass examines: its Verdict and its
// 1-based position in its queue's pending list.
type Observer func(w *Workload, v Verdict, position int)

// groups splits the queues with pending work into independent groups: the
// members of a cohort tree together, a queue without a cohort alone; in
// the order of their first names.
func (s *Snapshot) groups(pending map[string][]*Workload) [][]string {
	all := s.Config.index().groups
	names := make([]string, 0, len(pending))
	var groups [][]string
	for _, g := range all {
		from := len(names)
		for _, q := range g {
			if _, ok := pending[q]; ok {
				names = append(names, q)
			}
		}
		if len(names) > from {
			groups = append(groups, names[from:len(names):len(names)])
		}
	}
	if len(names) < len(pending) {
		// Queues the config does not hold: each alone.
		for q := range pending {
			if s.Config.ClusterQueues[q] == nil {
				groups = append(groups, []string{q})
			}
		}
	}
	// In the order of their first pending names, which is theirs unless a
	// group's first member waits for nothing.
	first := func(a, b []string) int { return strings.Compare(a[0], b[0]) }
	if !slices.IsSortedFunc(groups, first) {
		slices.SortFunc(groups, first)
	}
	return groups
}

// cursor walks one queue's pending list during a pass.
type cursor struct {
	list []*Workload
	i    int
	// blocked is, in a StrictFIFO queue whose head waits, the verdict of
	// everything behind that head: made once, given to each of them.
	blocked *Verdict
	// failed remembers the smallest plain request that had to wait this
	// pass: usage only grows within a pass, so any plain request at
	// least as large must wait too, for the same reason.
	failed  *Workload
	failedV Verdict
	cq      *ClusterQueue
	// In a cohort with fair sharing, queues take turns by share: key is
	// the queue's share, lowest first. In a tree of cohorts, tour is set
	// instead, shared by the walk's cursors, and a tournament picks the
	// next cursor (see heads.top).
	fair bool
	key  int64
	s    *Snapshot
	tour *tournament
	// The last namespace checked against the queue's selector.
	lastNS      string
	lastNSVerd  Verdict
	lastNSKnown bool
}

func (c *cursor) head() *Workload { return c.list[c.i] }

// heads is a heap of cursors ordered by their head Workload.
type heads []*cursor

func (h heads) Len() int { return len(h) }
func (h heads) Less(i, j int) bool {
	if h[i].fair && h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return Before(h[i].head(), h[j].head())
}
func (h heads) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heads) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *heads) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func (s *Snapshot) decideGroup(group []string, pending map[string][]*Workload, reserved map[string][]*Workload, observe Observer, d *Decision) {
	taken := map[*Workload]bool{}
	// lastTaken is, by queue, the position of its last Workload taken
	// before the second walk: a settled end is passed over only behind it.
	lastTaken := map[string]int{}
	admit := func(cq *ClusterQueue, w *Workload, a Assignment, pos int) {
		s.Charge(cq.Name, a.Usage, +1)
		s.takeTopology(a)
		d.Admissions = append(d.Admissions, Admission{Workload: w, Assignment: a})
		d.spend(s, 1)
		taken[w] = true
		lastTaken[cq.Name] = max(lastTaken[cq.Name], pos)
		observe(w, Verdict{Kind: Fits}, pos)
	}
	for _, name := range group {
		cq := s.Config.ClusterQueues[name]
		for _, w := range reserved[name] {
			if d.full(s) {
				return
			}
			// Its place in the list is not known: nothing of this
			// queue is passed over.
			lastTaken[name] = len(pending[name])
			// Even a Workload of higher priority that arrived in its own
			// queue meanwhile comes after it: the room is the one this
			// Workload preempted for, and were it taken, this Workload
			// would preempt again for the same quota. The newcomer may
			// preempt in turn, by its own right.
			if cq == nil || w.Queue != name || !cq.NamespaceSelector.Matches(s.Namespaces[w.Namespace]) {
				continue
			}
			if a, v := s.assignIn(cq, w); v.Kind == Fits {
				admit(cq, w, a, 1)
			}
		}
	}
	preempt := func(cq *ClusterQueue, w *Workload, a Assignment, victims []Victim) Verdict {
		s.removeAdmitted(victims)
		p := Preemption{Preemptor: w, Assignment: a, Victims: victims}
		p.Moved = s.claim(cq.Name, a.Usage, victims)
		d.Preemptions = append(d.Preemptions, p)
		d.spend(s, len(victims))
		taken[w] = true
		return Verdict{Kind: Preempting, Code: "preempting", message: p.Message()}
	}
	if cq := s.Config.ClusterQueues[group[0]]; cq != nil && cq.Cohort != "" {
		s.admitWithinNominal(group, pending, taken, func() bool { return d.full(s) }, admit, func(cq *ClusterQueue, w *Workload, a Assignment, victims []Victim, pos int) {
			lastTaken[cq.Name] = max(lastTaken[cq.Name], pos)
			observe(w, preempt(cq, w, a, victims), pos)
		})
	}
	h := s.cursors(group, pending)
	for h.Len() > 0 && !d.full(s) {
		c := h.top()
		w := c.head()
		if taken[w] {
			h.advance()
			continue
		}
		v, a, victims := s.try(c, w)
		switch {
		case v.Kind == Fits && len(victims) == 0:
			s.Charge(c.cq.Name, a.Usage, +1)
			s.takeTopology(a)
			d.Admissions = append(d.Admissions, Admission{Workload: w, Assignment: a})
			d.spend(s, 1)
		case v.Kind == Fits:
			v = preempt(c.cq, w, a, victims)
		}
		observe(w, v, c.i+1)
		// What waits behind a Workload that had to wait, for a reason
		// that holds for it too, is decided here without the merge:
		// usage only grows within a pass, so the order among waiting
		// Workloads changes nothing. Where all of it does, and an earlier
		// pass saw it wait for that reason, it is passed over.
		if s.Settled != nil && c.cq != nil && lastTaken[c.cq.Name] <= c.i+1 {
			if rv, ok := c.restWaits(s.Tails[c.cq.Name], c.i+1); ok && s.Settled(c.cq.Name, c.i+1, rv.Code) {
				c.i = len(c.list) - 1
			}
		}
		for c.i+1 < len(c.list) {
			next := c.list[c.i+1]
			wv, ok := c.waitsToo(next)
			if !ok || taken[next] {
				break
			}
			c.i++
			observe(next, wv, c.i+1)
		}
		h.advance()
	}
}

// waitsToo reports whether w, next in c's queue, must wait for a reason
// already found this pass: behind a StrictFIFO blocker, or because an
// earlier plain request no larger than w's had to wait.
func (c *cursor) waitsToo(w *Workload) (Verdict, bool) {
	if c.cq == nil || w.Queue != c.cq.Name || c.lastNSKnown && c.lastNS != w.Namespace {
		return Verdict{}, false
	}
	if c.blocked != nil {
		return *c.blocked, true
	}
	plain := w.plain()
	if plain && c.failed != nil && covers(w, c.failed) {
		return c.failedV, true
	}
	return Verdict{}, false
}

// blockBehind makes head, which waits, block the rest of c's StrictFIFO
// queue for the pass: try returns before it can be called again.
func (c *cursor) blockBehind(head *Workload) {
	v := waitf("strict-fifo", "Waiting behind %s, the head of StrictFIFO ClusterQueue %s", head.Key(), c.cq.Name)
	c.blocked = &v
}

// cursors makes the heap of the group's queues with pending Workloads.
func (s *Snapshot) cursors(group []string, pending map[string][]*Workload) *heads {
	// One allocation for the pass's cursors and their heap: a walk's are
	// done with before the next walk makes its own, each written whole.
	if cap(s.cursorBuf) < len(group) {
		s.cursorBuf = make([]cursor, 0, len(group))
		s.walk = make(heads, 0, len(group))
	}
	h := s.walk[:0]
	cs := s.cursorBuf[:0]
	var tour *tournament
	for _, name := range group {
		if len(pending[name]) > 0 {
			cs = append(cs, cursor{list: pending[name], cq: s.Config.ClusterQueues[name]})
			c := &cs[len(cs)-1]
			switch {
			case c.cq == nil || !s.Config.FairSharing(c.cq.Cohort):
			case s.Config.inTree(c.cq.Cohort):
				if tour == nil {
					tour = s.newTournament(c.cq.Cohort)
				}
				c.tour = tour
			default:
				c.fair, c.s, c.key = true, s, s.Share(c.cq)
			}
			h = append(h, c)
		}
	}
	s.walk = h
	heap.Init(&s.walk)
	return &s.walk
}

// top is the cursor whose head goes next: the heap's first, or in a tree
// of cohorts with fair sharing the tournament's winner, moved to the front
// (the heap's order is then not used).
func (h *heads) top() *cursor {
	c := (*h)[0]
	if c.tour != nil && len(*h) > 1 {
		i := c.tour.pick(*h)
		(*h)[0], (*h)[i] = (*h)[i], c
	}
	return (*h)[0]
}

// advance moves the top cursor past its head. Its queue is the only one
// whose usage can have changed since it was keyed.
func (h *heads) advance() {
	c := (*h)[0]
	c.i++
	if c.i < len(c.list) {
		if c.fair {
			c.key = c.s.Share(c.cq)
		}
		heap.Fix(h, 0)
	} else {
		heap.Pop(h)
	}
}

// admitWithinNominal is a pass's first walk over a cohort: it admits the
// Workloads that fit without borrowing, in order, and lets those that
// would fit within their nominal quota after preempting do so. A queue drops out of the
// walk when it has no nominal quota left, and at its first Workload that
// could fit only by borrowing: that one keeps its place ahead of the rest
// of its queue for the second walk. A StrictFIFO queue also drops out at
// its first Workload that must wait.
func (s *Snapshot) admitWithinNominal(group []string, pending map[string][]*Workload, taken map[*Workload]bool, full func() bool, admit func(*ClusterQueue, *Workload, Assignment, int),
	preempt func(*ClusterQueue, *Workload, Assignment, []Victim, int)) {
	h := s.cursors(group, pending)
	for h.Len() > 0 && !full() {
		c := h.top()
		w := c.head()
		cq := c.cq
		if cq == nil || !s.hasNominalLeft(cq) || cq.StopPolicy == StopHold || cq.StopPolicy == StopHoldAndDrain {
			heap.Pop(h)
			continue
		}
		if w.LocalQueue != "" && s.Config.StopOf(w).Stopped() {
			h.advance()
			continue
		}
		if s.Yield[w] != nil && cq.Strategy == StrictFIFO {
			heap.Pop(h)
			continue
		}
		if taken[w] || w.Queue != cq.Name || s.Yield[w] != nil {
			h.advance()
			continue
		}
		plain := w.plain()
		if plain && c.failed != nil && covers(w, c.failed) {
			if _, all := c.restWaits(s.Tails[cq.Name], c.i); all {
				// So is everything behind it: the walk would only pass.
				heap.Pop(h)
				continue
			}
			h.advance()
			continue
		}
		if !cq.NamespaceSelector.Matches(s.Namespaces[w.Namespace]) {
			h.advance()
			continue
		}
		a, v := s.assignIn(cq, w)
		if v.Kind == Wait && s.mayPreempt() && preemptsAtAll(cq) && s.mayFindVictims(cq, w) {
			// Reclaiming or preempting to fit within its own nominal
			// quota also goes before what borrows.
			if pa, pv, vs := s.assignOrPreempt(cq, w, true); pv.Kind == Fits && len(vs) > 0 && !pa.Borrowing {
				preempt(cq, w, pa, vs, c.i+1)
				h.advance()
				continue
			}
		}
		switch {
		case v.Kind == Fits && !a.Borrowing:
			admit(cq, w, a, c.i+1)
		case v.Kind == Fits, cq.Strategy == StrictFIFO:
			heap.Pop(h)
			continue
		case plain && !v.topology() && (c.failed == nil || covers(c.failed, w)):
			c.failed = w
		}
		h.advance()
	}
}

// hasNominalLeft reports whether cq uses less than its nominal quota of
// some flavor and resource.
func (s *Snapshot) hasNominalLeft(cq *ClusterQueue) bool {
	for _, g := range cq.ResourceGroups {
		for _, f := range g.Flavors {
			for r, q := range f.Quotas {
				if s.Usage[cq.Name][FlavorResource{f.Name, r}] < q.Nominal {
					return true
				}
			}
		}
	}
	return false
}

// try decides one Workload at the head of cursor c: it fits (with victims
// to preempt, or none), or it waits, or it never fits.
func (s *Snapshot) try(c *cursor, w *Workload) (Verdict, Assignment, []Victim) {
	if c.cq == nil || w.Queue != c.cq.Name || w.Unresolved != "" {
		_, v := s.Eligible(w)
		return v, Assignment{}, nil
	}
	if !c.lastNSKnown || c.lastNS != w.Namespace {
		_, c.lastNSVerd = s.Eligible(w)
		c.lastNS, c.lastNSKnown = w.Namespace, true
	}
	if c.lastNSVerd.Kind != Fits {
		return c.lastNSVerd, Assignment{}, nil
	}
	cq := c.cq
	if st := s.Config.StopOf(w); st.Stopped() {
		return st.Held(), Assignment{}, nil
	}
	if c.blocked != nil {
		return *c.blocked, Assignment{}, nil
	}
	if p := s.Yield[w]; p != nil {
		if cq.Strategy == StrictFIFO {
			c.blockBehind(w)
		}
		return waitf("yield", "Waiting for %s, which preempted this %s, to be admitted first", p.Key(), w.KindName()), Assignment{}, nil
	}
	// Within a queue, later Workloads have no higher priority and are no
	// older, so they have no more preemption candidates either: a plain
	// request at least as large as one that waited waits too.
	plain := w.plain()
	if plain && c.failed != nil && covers(w, c.failed) {
		return c.failedV, Assignment{}, nil
	}
	mayPreempt := s.mayPreempt() && preemptsAtAll(cq)
	preemptFirst := mayPreempt && cq.FlavorFungibility.WhenCanPreempt == "Preempt"
	a, v, victims := s.assignOrPreempt(cq, w, preemptFirst)
	if v.Kind == Wait && mayPreempt && !preemptFirst && s.mayFindVictims(cq, w) {
		if pa, pv, vs := s.assignOrPreempt(cq, w, true); pv.Kind == Fits && len(vs) > 0 {
			return pv, pa, vs
		}
	}
	if v.Kind == Wait {
		if cq.Strategy == StrictFIFO {
			c.blockBehind(w)
		}
		if plain && !v.topology() && (c.failed == nil || covers(c.failed, w)) {
			c.failed, c.failedV = w, v
		}
	}
	return v, a, victims
}

// covers reports whether a requests at least what b requests of every
// resource, and no other resources.
func covers(a, b *Workload) bool {
	if !sameResources(a, b) {
		return false
	}
	for i := range a.vec {
		if a.vec[i].amount < b.vec[i].amount {
			return false
		}
	}
	return true
}

// Position describes a Workload's place for the Queued event.
func Position(cq *ClusterQueue, pos, total int) string {
	if cq.Cohort != "" {
		return fmt.Sprintf("Queued in ClusterQueue %s (cohort %s), position %d of %d", cq.Name, cq.Cohort, pos, total)
	}
	return fmt.Sprintf("Queued in ClusterQueue %s, position %d of %d", cq.Name, pos, total)
}
