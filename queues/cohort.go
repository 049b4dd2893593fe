package queues

import (
	"sort"
	"strings"

	"tally.dev/tally/flavors"
)

// Cohort is one validated Cohort document: a node of a cohort tree. Its
// own quota is lent to the ClusterQueues and cohorts below it, and, within
// its lendingLimit, to its parent; its borrowingLimit bounds what its
// subtree takes from its parent.
type Cohort struct {
	Name string
	// Parent is spec.parentName: "" for a root.
	Parent         string
	ResourceGroups []ResourceGroup
	// FairSharing is set when the document has spec.fairSharing; then
	// FairWeight is its weight in thousandths, the cohort's weight
	// against its siblings in fair sharing (1000 without it).
	FairSharing bool
	FairWeight  int64
}

// cohortTree is the shape of the cohorts and the quota arithmetic that
// does not depend on usage. Every map is keyed by cohort name; a cohort
// absent from one has nothing there (no parent, no quota of its own).
type cohortTree struct {
	// parent maps a cohort with a parent to it.
	parent map[string]string
	// root maps every cohort to the root of its tree.
	root map[string]string
	// members lists, per root, the ClusterQueues of its whole tree, sorted.
	members map[string][]string
	// cohorts lists, per root, the cohorts of its tree, root first.
	cohorts map[string][]string
	// quotas holds, per cohort with a Cohort document, its own quota.
	quotas map[string]map[FlavorResource]Quota
	// local is, per cohort with a lendingLimit, the part of its subtree
	// quota it never lends its parent.
	local map[string]Usage
	// potential is, per cohort, the most its subtree may use of each cell
	// with the whole tree idle, within every borrowingLimit above it.
	potential map[string]Usage
	// label names a cohort with a parent with its ancestors, for messages:
	// "ml (parent org)".
	label map[string]string
	// kids lists, per cohort, its child cohorts, sorted; direct its own
	// ClusterQueues, sorted; depth is its distance from its root.
	kids   map[string][]string
	direct map[string][]string
	depth  map[string]int
}

// buildTree derives the cohort tree of c. The ClusterQueues' quotas are
// in ix already. A parent chain that loops, which Parse refuses, is cut:
// its cohorts are roots.
func buildTree(c *Config, ix *configIndex) cohortTree {
	t := cohortTree{parent: map[string]string{}, root: map[string]string{}, members: map[string][]string{}, cohorts: map[string][]string{},
		quotas: map[string]map[FlavorResource]Quota{}, local: map[string]Usage{}, potential: map[string]Usage{}, label: map[string]string{},
		direct: map[string][]string{}, depth: map[string]int{}}
	names := map[string]bool{}
	direct := t.direct
	for _, name := range c.QueueNames {
		if cq := c.ClusterQueues[name]; cq != nil && cq.Cohort != "" {
			names[cq.Cohort] = true
			direct[cq.Cohort] = append(direct[cq.Cohort], name)
		}
	}
	for _, list := range direct {
		sort.Strings(list)
	}
	for name, co := range c.CohortSpecs {
		names[name] = true
		if co.Parent != "" {
			t.parent[name] = co.Parent
			names[co.Parent] = true
		}
		t.quotas[name] = quotaCells(co.ResourceGroups)
	}
	for name := range t.parent {
		if inCycle(name, t.parent) {
			delete(t.parent, name)
		}
	}
	children := map[string][]string{}
	t.kids = children
	for name := range names {
		r := name
		for p, ok := t.parent[r]; ok; p, ok = t.parent[r] {
			r = p
		}
		t.root[name] = r
		if p, ok := t.parent[name]; ok {
			children[p] = append(children[p], name)
		}
		if ix.lendable[name] == nil {
			ix.lendable[name] = Usage{}
		}
	}
	for _, r := range SortedKeys(t.root) {
		if t.root[r] == r {
			t.collect(r, r, children)
		}
	}
	// Subtree quotas, children first: a cohort's own nominal quota, its
	// members' lendable quota, and what its child cohorts lend it.
	for r, list := range t.cohorts {
		for i := len(list) - 1; i >= 0; i-- {
			name := list[i]
			sub := ix.lendable[name]
			for fr, q := range t.quotas[name] {
				sub[fr] = sub[fr].Add(q.Nominal)
			}
			for _, m := range direct[name] {
				for fr, q := range ix.quotas[m] {
					sub[fr] = sub[fr].Add(q.Lendable())
				}
				t.members[r] = append(t.members[r], m)
			}
			for _, child := range children[name] {
				for fr, a := range ix.lendable[child] {
					sub[fr] = sub[fr].Add(a.Sub(t.local[child][fr]))
				}
			}
			for fr, q := range t.quotas[name] {
				if q.LendingLimit != flavors.Unlimited {
					if t.local[name] == nil {
						t.local[name] = Usage{}
					}
					t.local[name][fr] = flavors.Max(0, sub[fr].Sub(q.LendingLimit))
				}
			}
		}
		sort.Strings(t.members[r])
	}
	for name := range t.root {
		t.potentialOf(name, ix)
		if _, ok := t.parent[name]; ok {
			t.label[name] = cohortLabel(name, t)
		}
	}
	return t
}

// inCycle reports whether following parents from name comes back to it.
func inCycle(name string, parent map[string]string) bool {
	at := name
	for range len(parent) + 1 {
		p, ok := parent[at]
		if !ok {
			return false
		}
		if p == name {
			return true
		}
		at = p
	}
	return true
}

// collect lists the cohorts of root's tree below name, depth first.
func (t *cohortTree) collect(root, name string, children map[string][]string) {
	if p, ok := t.parent[name]; ok {
		t.depth[name] = t.depth[p] + 1
	}
	t.cohorts[root] = append(t.cohorts[root], name)
	kids := children[name]
	sort.Strings(kids)
	for _, k := range kids {
		t.collect(root, k, children)
	}
}

// potentialOf is, per cell, the most cohort co's subtree may use with the
// tree idle: its subtree quota at a root, else what it keeps plus what its
// parent may use, within its borrowingLimit.
func (t *cohortTree) potentialOf(co string, ix *configIndex) Usage {
	if p := t.potential[co]; p != nil {
		return p
	}
	sub := ix.lendable[co]
	parent, ok := t.parent[co]
	if !ok {
		t.potential[co] = sub
		return sub
	}
	out := make(Usage, len(sub))
	t.potential[co] = out
	above := t.potentialOf(parent, ix)
	for fr, a := range sub {
		v := t.local[co][fr].Add(above[fr])
		if q, ok := t.quotas[co][fr]; ok && q.BorrowingLimit != flavors.Unlimited {
			v = flavors.Min(v, a.Add(q.BorrowingLimit))
		}
		out[fr] = v
	}
	return out
}

// cohortLabel names co with its ancestors: "ml (parent org)", or
// "ml (parents org, top)".
func cohortLabel(co string, t cohortTree) string {
	var up []string
	for c, ok := t.parent[co]; ok; c, ok = t.parent[c] {
		up = append(up, c)
	}
	if len(up) == 1 {
		return co + " (parent " + up[0] + ")"
	}
	return co + " (parents " + strings.Join(up, ", ") + ")"
}

// quotaCells lists the quota cells of resource groups; a flavor listed
// twice keeps its first.
func quotaCells(groups []ResourceGroup) map[FlavorResource]Quota {
	cells := map[FlavorResource]Quota{}
	for gi := range groups {
		for _, fq := range groups[gi].Flavors {
			for r, q := range fq.Quotas {
				if _, dup := cells[FlavorResource{fq.Name, r}]; !dup {
					cells[FlavorResource{fq.Name, r}] = q
				}
			}
		}
	}
	return cells
}

// CohortRoot names the root of cohort's tree: cohort itself when it has no
// parent.
func (c *Config) CohortRoot(cohort string) string {
	if r, ok := c.index().tree.root[cohort]; ok {
		return r
	}
	return cohort
}

// CohortParent names cohort's parent, or "" at a root.
func (c *Config) CohortParent(cohort string) string { return c.index().tree.parent[cohort] }

// CohortLabel names cohort for messages, with its ancestors when it has a
// parent: "ml (parent org)".
func (c *Config) CohortLabel(cohort string) string {
	if l, ok := c.index().tree.label[cohort]; ok {
		return l
	}
	return cohort
}

// CohortQuota is the quota cohort holds itself of fr, from its Cohort
// document; ok is false when it has none.
func (c *Config) CohortQuota(cohort string, fr FlavorResource) (Quota, bool) {
	q, ok := c.index().tree.quotas[cohort][fr]
	return q, ok
}

// cohortQuota is cohort's own quota of fr: nominal 0 and no limits when
// its document sets none.
func (t *cohortTree) cohortQuota(cohort string, fr FlavorResource) Quota {
	if q, ok := t.quotas[cohort][fr]; ok {
		return q
	}
	return Quota{BorrowingLimit: flavors.Unlimited, LendingLimit: flavors.Unlimited}
}

// HasCohortTree reports whether the config has any Cohort document: only
// then do its cohorts have parents or quota of their own.
func (c *Config) HasCohortTree() bool { return len(c.CohortSpecs) > 0 }

// CohortOrder lists every cohort with its depth in its tree (0 at a
// root): the roots sorted, each followed by its subtree, depth first.
func (c *Config) CohortOrder() (names []string, depth []int) {
	t := &c.index().tree
	for _, r := range SortedKeys(t.cohorts) {
		for _, name := range t.cohorts[r] {
			d := 0
			for p, ok := t.parent[name]; ok; p, ok = t.parent[p] {
				d++
			}
			names, depth = append(names, name), append(depth, d)
		}
	}
	return names, depth
}

// CohortCells lists the cells of cohort's subtree quota, by flavor then
// resource.
func (c *Config) CohortCells(cohort string) []FlavorResource {
	sub := c.index().lendable[cohort]
	out := make([]FlavorResource, 0, len(sub))
	for fr := range sub {
		out = append(out, fr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Flavor != out[j].Flavor {
			return out[i].Flavor < out[j].Flavor
		}
		return out[i].Resource < out[j].Resource
	})
	return out
}
