package queues

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// Config is a validated configuration: what one ConfigMap (or --config
// file) describes. It is immutable once built; a reload builds a new one.
type Config struct {
	Flavors       map[string]*flavors.Flavor
	ClusterQueues map[string]*ClusterQueue
	// QueueNames lists the ClusterQueues, sorted.
	QueueNames []string
	// Cohorts maps a cohort name to its member ClusterQueues (those that
	// name it as their cohort, not those of its child cohorts), sorted.
	Cohorts map[string][]string
	// CohortSpecs holds the cohorts that have a Cohort document, by name.
	// A cohort named only by a ClusterQueue's cohortName or by a Cohort's
	// parentName has none: it has no quota of its own and no parent, as in
	// Kueue. Without any Cohort document every cohort is flat.
	CohortSpecs map[string]*Cohort
	// LocalQueues maps "namespace/name" to a ClusterQueue.
	LocalQueues map[string]string
	// LocalQueueStops maps "namespace/name" to the stopPolicy of each
	// LocalQueue that has one other than None: Hold or HoldAndDrain.
	LocalQueueStops map[string]string
	// PriorityClasses maps a WorkloadPriorityClass name to its value.
	PriorityClasses map[string]int32
	// WorkloadKinds are the declared kinds of workload, in config order.
	WorkloadKinds []WorkloadKind
	// PodsReady is the waitForPodsReady section of Kueue's Configuration
	// document, with Kueue's defaults; nil when it is off or there is no
	// such document.
	PodsReady *PodsReady
	// DeviceClasses maps each DeviceClass of the Configuration
	// document's resources.deviceClassMappings to the resource its
	// devices are charged as (see ClaimRequests); nil when none is.
	DeviceClasses map[string]corev1.ResourceName
	// Topologies maps each Topology document's name to its levels; a
	// flavor names one in its TopologyName.
	Topologies map[string]*Topology
	// Warnings are non-fatal remarks, such as a deprecated alias.
	Warnings []string

	// idx caches lookups derived from the fields above, built on first use.
	idx atomic.Pointer[configIndex]
}

// configIndex holds what the admission core looks up on every decision.
type configIndex struct {
	// lendable is, per cohort, its subtree quota: its own nominal quota,
	// what its child cohorts can lend it (their subtree quota less the
	// part their lendingLimit keeps), and its members' lendable quota. In
	// a flat cohort, the sum of its members' lendable quota.
	lendable map[string]Usage
	// tree holds the cohort tree: parents, roots and the quotas of the
	// cohorts themselves.
	tree cohortTree
	// quotas is, per ClusterQueue, its quota cells.
	quotas map[string]map[FlavorResource]Quota
	// fair holds the cohorts with fair sharing.
	fair map[string]bool
	// local maps a namespace to the names of its LocalQueues, sorted.
	local map[string][]string
	// covered holds the resources some ClusterQueue covers.
	covered map[corev1.ResourceName]bool
	// drains: some queue's stopPolicy is HoldAndDrain (Drains).
	drains bool
	// groups lists the independent groups of ClusterQueues, each sorted:
	// the members of a cohort tree, or a queue without a cohort alone;
	// in the order of their first names.
	groups [][]string
}

func (c *Config) index() *configIndex {
	if ix := c.idx.Load(); ix != nil {
		return ix
	}
	ix := &configIndex{lendable: map[string]Usage{}, quotas: map[string]map[FlavorResource]Quota{}, fair: map[string]bool{}, local: map[string][]string{},
		covered: map[corev1.ResourceName]bool{}}
	for key := range c.LocalQueues {
		if ns, name, ok := strings.Cut(key, "/"); ok {
			ix.local[ns] = append(ix.local[ns], name)
		}
	}
	for _, names := range ix.local {
		sort.Strings(names)
	}
	for name, cq := range c.ClusterQueues {
		if cq.FairSharing && cq.Cohort != "" {
			ix.fair[cq.Cohort] = true
		}
		for gi := range cq.ResourceGroups {
			for _, r := range cq.ResourceGroups[gi].Covered {
				ix.covered[r] = true
			}
		}
		ix.quotas[name] = quotaCells(cq.ResourceGroups)
	}
	ix.tree = buildTree(c, ix)
	// Fair sharing holds for a whole tree: on when any of its
	// ClusterQueues or Cohorts has a fairSharing field.
	fairRoots := map[string]bool{}
	for name := range ix.fair {
		fairRoots[ix.tree.root[name]] = true
	}
	for name, co := range c.CohortSpecs {
		if co.FairSharing {
			fairRoots[ix.tree.root[name]] = true
		}
	}
	for name, r := range ix.tree.root {
		if fairRoots[r] {
			ix.fair[name] = true
		}
	}
	ix.drains = c.drains()
	seen := map[string]bool{}
	for _, name := range SortedKeys(c.ClusterQueues) {
		cq := c.ClusterQueues[name]
		if cq.Cohort == "" {
			ix.groups = append(ix.groups, []string{name})
			continue
		}
		root := cq.Cohort
		if r, ok := ix.tree.root[root]; ok {
			root = r
		}
		if !seen[root] {
			seen[root] = true
			ix.groups = append(ix.groups, ix.tree.members[root])
		}
	}
	c.idx.Store(ix)
	return ix
}

// FairSharing reports whether a cohort shares by weighted dominant-resource
// share: when any ClusterQueue or Cohort of its tree has a fairSharing
// field.
func (c *Config) FairSharing(cohort string) bool { return cohort != "" && c.index().fair[cohort] }

// HasFairSharing reports whether any cohort shares by weighted
// dominant-resource share.
func (c *Config) HasFairSharing() bool { return len(c.index().fair) > 0 }

// Covers says whether some ClusterQueue covers resource r: a pod that
// asks for it runs on quota'd resources.
func (c *Config) Covers(r corev1.ResourceName) bool { return c.index().covered[r] }

// QuotaOf returns the quota of fr in the named ClusterQueue.
func (c *Config) QuotaOf(cq string, fr FlavorResource) (Quota, bool) {
	q, ok := c.index().quotas[cq][fr]
	return q, ok
}

// QueueingStrategy is a ClusterQueue's queueingStrategy.
type QueueingStrategy string

// The queueing strategies.
const (
	BestEffortFIFO QueueingStrategy = "BestEffortFIFO"
	StrictFIFO     QueueingStrategy = "StrictFIFO"
)

// ClusterQueue is one validated ClusterQueue document.
type ClusterQueue struct {
	Name              string
	Cohort            string
	NamespaceSelector labels.Selector
	Strategy          QueueingStrategy
	ResourceGroups    []ResourceGroup
	Preemption        PreemptionPolicy
	FlavorFungibility FlavorFungibility
	// FairWeight is fairSharing.weight in thousandths (1000 = 1).
	FairWeight int64
	// FairSharing is set when the document has a fairSharing field: its
	// cohort then shares by weighted dominant-resource share.
	FairSharing bool
	// StopPolicy is "None", "Hold" or "HoldAndDrain".
	StopPolicy string
}

// ResourceGroup is one of a ClusterQueue's resourceGroups.
type ResourceGroup struct {
	Covered []corev1.ResourceName
	Flavors []FlavorQuotas
}

// FlavorQuotas are the quotas of one flavor in a ResourceGroup.
type FlavorQuotas struct {
	Name   string
	Quotas map[corev1.ResourceName]Quota
}

// Quota is the quota of one resource in one flavor.
type Quota struct {
	Nominal flavors.Amount
	// BorrowingLimit is Unlimited when unset.
	BorrowingLimit flavors.Amount
	// LendingLimit is Unlimited when unset (the whole nominal quota may be
	// lent).
	LendingLimit flavors.Amount
}

// Lendable is how much of the nominal quota the cohort may use.
func (q Quota) Lendable() flavors.Amount { return flavors.Min(q.Nominal, q.LendingLimit) }

// Guaranteed is the part of the nominal quota that is never lent.
func (q Quota) Guaranteed() flavors.Amount { return q.Nominal.Sub(q.Lendable()) }

// PreemptionPolicy is a ClusterQueue's preemption policy.
type PreemptionPolicy struct {
	WithinClusterQueue  string
	ReclaimWithinCohort string
	BorrowWithinCohort  BorrowWithinCohort
}

// BorrowWithinCohort is preemption.borrowWithinCohort.
type BorrowWithinCohort struct {
	Policy               string
	MaxPriorityThreshold *int32
}

// FlavorFungibility is a ClusterQueue's flavorFungibility.
type FlavorFungibility struct {
	WhenCanBorrow  string // "Borrow" (default) or "TryNextFlavor"
	WhenCanPreempt string // "TryNextFlavor" (default) or "Preempt"
}

// The preemption policy values.
const (
	PreemptNever                     = "Never"
	PreemptLowerPriority             = "LowerPriority"
	PreemptLowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"
	PreemptAny                       = "Any"
)

// FlavorResource names a quota cell.
type FlavorResource struct {
	Flavor   string
	Resource corev1.ResourceName
}

// Quota returns the quota of fr in cq, and whether cq has one.
func (cq *ClusterQueue) Quota(fr FlavorResource) (Quota, bool) {
	for gi := range cq.ResourceGroups {
		for fi := range cq.ResourceGroups[gi].Flavors {
			f := &cq.ResourceGroups[gi].Flavors[fi]
			if f.Name == fr.Flavor {
				q, ok := f.Quotas[fr.Resource]
				return q, ok
			}
		}
	}
	return Quota{}, false
}

// GroupFor returns the index of the resource group covering r, or -1.
func (cq *ClusterQueue) GroupFor(r corev1.ResourceName) int {
	for gi := range cq.ResourceGroups {
		for _, c := range cq.ResourceGroups[gi].Covered {
			if c == r {
				return gi
			}
		}
	}
	return -1
}

// FlavorNames returns every flavor the ClusterQueue lists, in order.
func (cq *ClusterQueue) FlavorNames() []string {
	var out []string
	for gi := range cq.ResourceGroups {
		for _, f := range cq.ResourceGroups[gi].Flavors {
			out = append(out, f.Name)
		}
	}
	return out
}

// Members returns the ClusterQueues of cq's cohort tree, cq included:
// those of its cohort, when the cohort is flat.
func (c *Config) Members(cq *ClusterQueue) []string {
	if cq.Cohort == "" {
		return []string{cq.Name}
	}
	return c.index().tree.members[c.CohortRoot(cq.Cohort)]
}

// LocalQueuesIn returns the names of the LocalQueues the config defines in
// namespace ns, sorted. cfg may be nil.
func (c *Config) LocalQueuesIn(ns string) []string {
	if c == nil {
		return nil
	}
	return c.index().local[ns]
}

// Route resolves the ClusterQueue a new workload of namespace ns goes to,
// from its labels, the namespace's tally.dev/cluster-queue annotation and
// the LocalQueues of the config, in this order:
//
//  1. kueue.x-k8s.io/queue-name names a LocalQueue of the namespace; an
//     unknown name is an error, never a fall-back;
//  2. the tally.dev/cluster-queue label names the ClusterQueue directly,
//     but only one the namespace is bound to (see Bound): any other is an
//     error, so that a user never spends another team's quota;
//  3. the namespace's annotation;
//  4. the namespace's LocalQueue named default.
//
// It returns "" with no error when none applies: the workload is not
// queued. cfg may be nil before any config has loaded; only the labels and
// the annotation can be read then.
func (c *Config) Route(ns, annotation string, labels map[string]string) (string, error) {
	if lq := labels[LabelKueueQueueName]; lq != "" {
		path := "metadata.labels[" + LabelKueueQueueName + "]"
		if c == nil {
			return "", fmt.Errorf("%s: tally has not loaded a valid config yet, so LocalQueue %q cannot be looked up", path, lq)
		}
		if q, ok := c.LocalQueues[ns+"/"+lq]; ok {
			return q, nil
		}
		known := "it has none"
		if names := c.LocalQueuesIn(ns); len(names) > 0 {
			known = "its LocalQueues: " + strings.Join(names, ", ")
		}
		return "", fmt.Errorf("%s: LocalQueue %q does not exist in namespace %s; %s", path, lq, ns, known)
	}
	if q := labels[LabelQueue]; q != "" {
		bound := c.Bound(ns, annotation)
		if slices.Contains(bound, q) {
			return q, nil
		}
		path := "metadata.labels[" + LabelQueue + "]"
		switch {
		case c == nil:
			return "", fmt.Errorf("%s: tally has not loaded a valid config yet, so it cannot tell whether namespace %s may use ClusterQueue %q; retry the request", path, ns, Shorten(q))
		case len(bound) == 0:
			return "", fmt.Errorf("%s: namespace %s may not use ClusterQueue %q: it is bound to no ClusterQueue", path, ns, Shorten(q))
		}
		return "", fmt.Errorf("%s: namespace %s may not use ClusterQueue %q; it may use: %s", path, ns, Shorten(q), strings.Join(bound, ", "))
	}
	if annotation != "" {
		return annotation, nil
	}
	if c != nil {
		return c.LocalQueues[ns+"/"+DefaultLocalQueue], nil
	}
	return "", nil
}

// Bound returns the ClusterQueues namespace ns is bound to, sorted: its
// annotation's (annotation), and those of its LocalQueues. cfg may be nil
// before any config has loaded; only the annotation is known then.
func (c *Config) Bound(ns, annotation string) []string {
	var out []string
	if annotation != "" {
		out = append(out, annotation)
	}
	if c != nil {
		for _, lq := range c.LocalQueuesIn(ns) {
			out = append(out, c.LocalQueues[ns+"/"+lq])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SortedKeys returns the keys of m, sorted.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// UnionKeys is the set of the keys of a and b.
func UnionKeys[V any](a, b map[string]V) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
