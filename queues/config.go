package queues

import (
	"sort"
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
	// Cohorts maps a cohort name to its member ClusterQueues, sorted.
	Cohorts map[string][]string
	// LocalQueues maps "namespace/name" to a ClusterQueue.
	LocalQueues map[string]string
	// PriorityClasses maps a WorkloadPriorityClass name to its value.
	PriorityClasses map[string]int32
	// Warnings are non-fatal remarks, such as a deprecated alias.
	Warnings []string

	// idx caches lookups derived from the fields above, built on first use.
	idx atomic.Pointer[configIndex]
}

// configIndex holds what the admission core looks up on every decision.
type configIndex struct {
	// lendable is, per cohort, the sum of its members' lendable quota.
	lendable map[string]Usage
	// quotas is, per ClusterQueue, its quota cells.
	quotas map[string]map[FlavorResource]Quota
	// fair holds the cohorts with fair sharing.
	fair map[string]bool
}

func (c *Config) index() *configIndex {
	if ix := c.idx.Load(); ix != nil {
		return ix
	}
	ix := &configIndex{lendable: map[string]Usage{}, quotas: map[string]map[FlavorResource]Quota{}, fair: map[string]bool{}}
	for name, cq := range c.ClusterQueues {
		if cq.FairSharing && cq.Cohort != "" {
			ix.fair[cq.Cohort] = true
		}
		cells := map[FlavorResource]Quota{}
		for gi := range cq.ResourceGroups {
			for _, fq := range cq.ResourceGroups[gi].Flavors {
				for r, q := range fq.Quotas {
					if _, dup := cells[FlavorResource{fq.Name, r}]; !dup {
						cells[FlavorResource{fq.Name, r}] = q
					}
				}
			}
		}
		ix.quotas[name] = cells
		if cq.Cohort == "" {
			continue
		}
		l := ix.lendable[cq.Cohort]
		if l == nil {
			l = Usage{}
			ix.lendable[cq.Cohort] = l
		}
		for fr, q := range cells {
			l[fr] = l[fr].Add(q.Lendable())
		}
	}
	c.idx.Store(ix)
	return ix
}

// FairSharing reports whether a cohort shares by weighted dominant-resource
// share: when any of its ClusterQueues has a fairSharing field.
func (c *Config) FairSharing(cohort string) bool { return cohort != "" && c.index().fair[cohort] }

// HasFairSharing reports whether any cohort shares by weighted
// dominant-resource share.
func (c *Config) HasFairSharing() bool { return len(c.index().fair) > 0 }

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

// Members returns the ClusterQueues that share cq's cohort, cq included.
func (c *Config) Members(cq *ClusterQueue) []string {
	if cq.Cohort == "" {
		return []string{cq.Name}
	}
	return c.Cohorts[cq.Cohort]
}

// Queue resolves the ClusterQueue of a Job from its labels and its
// namespace's binding: the tally.dev/cluster-queue label, then Kueue's
// queue-name label through a LocalQueue, then the namespace annotation.
func (c *Config) Queue(namespace string, jobLabels map[string]string, nsQueue string) string {
	if q := jobLabels[LabelQueue]; q != "" {
		return q
	}
	if lq := jobLabels[LabelKueueQueueName]; lq != "" {
		if q, ok := c.LocalQueues[namespace+"/"+lq]; ok {
			return q
		}
	}
	return nsQueue
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
