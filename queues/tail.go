package queues

import "tally.dev/tally/flavors"

// Tail describes the end of one queue's pending list, for a pass that
// would otherwise walk it to find that every Workload there waits for a
// reason already found (see Snapshot.Tails): the list's longest suffix
// whose Workloads share a queue and a namespace, the longest whose
// Workloads are also plain and ask for the same resources, and for each
// position of the latter the least of each resource asked for from
// there to the end. NewTail makes it in one walk of the list; a caller
// keeps it for as long as the list does not change.
type Tail struct {
	n           int
	first, last *Workload
	// sameFrom is where the suffix sharing queue and namespace starts,
	// plainFrom where the plain one with the same resources does.
	sameFrom, plainFrom int
	// least holds, for each position i from plainFrom on, at
	// (i-plainFrom)*width, the least amount of each resource (in the
	// Workloads' order of resources) that list[i:] asks for.
	least []flavors.Amount
	width int
}

// NewTail describes list's end. The Tail is list's for as long as list
// does not change.
func NewTail(list []*Workload) *Tail {
	n := len(list)
	t := &Tail{n: n, sameFrom: n, plainFrom: n}
	if n == 0 {
		return t
	}
	t.first, t.last = list[0], list[n-1]
	end := list[n-1]
	t.sameFrom = n - 1
	for t.sameFrom > 0 {
		w := list[t.sameFrom-1]
		if w.Queue != end.Queue || w.Namespace != end.Namespace {
			break
		}
		t.sameFrom--
	}
	t.width = len(end.vec)
	for t.plainFrom > t.sameFrom {
		w := list[t.plainFrom-1]
		if !w.plain() || !sameResources(w, end) {
			break
		}
		t.plainFrom--
	}
	t.least = make([]flavors.Amount, (n-t.plainFrom)*t.width)
	for i := n - 1; i >= t.plainFrom; i-- {
		at := (i - t.plainFrom) * t.width
		for k, c := range list[i].vec {
			t.least[at+k] = c.amount
			if i < n-1 {
				t.least[at+k] = min(c.amount, t.least[at+t.width+k])
			}
		}
	}
	return t
}

// of reports whether t describes list.
func (t *Tail) of(list []*Workload) bool {
	return t != nil && t.n == len(list) && (t.n == 0 || t.first == list[0] && t.last == list[t.n-1])
}

// sameResources reports whether a and b ask for the same resources.
func sameResources(a, b *Workload) bool {
	if len(a.vec) != len(b.vec) {
		return false
	}
	for i := range a.vec {
		if a.vec[i].name != b.vec[i].name {
			return false
		}
	}
	return true
}

// restWaits reports whether every Workload of c's list from index j on
// waits for a reason already found this pass, as waitsToo would find of
// each in turn, and the verdict it would give them all.
func (c *cursor) restWaits(t *Tail, j int) (Verdict, bool) {
	if c.cq == nil || j >= len(c.list) || !t.of(c.list) || j < t.sameFrom {
		return Verdict{}, false
	}
	if w := c.list[j]; w.Queue != c.cq.Name || c.lastNSKnown && c.lastNS != w.Namespace {
		return Verdict{}, false
	}
	if c.blocked != nil {
		return *c.blocked, true
	}
	if c.failed != nil && t.covers(j, c.failed) {
		return c.failedV, true
	}
	return Verdict{}, false
}

// covers reports whether each Workload of the list from index j on is
// plain and requests at least what b requests of every resource, and no
// other resources (see covers).
func (t *Tail) covers(j int, b *Workload) bool {
	if j < t.plainFrom || len(b.vec) != t.width || !sameResources(t.last, b) {
		return false
	}
	at := (j - t.plainFrom) * t.width
	for k, c := range b.vec {
		if t.least[at+k] < c.amount {
			return false
		}
	}
	return true
}
