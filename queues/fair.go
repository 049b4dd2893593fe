package queues

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// MaxShare is the share of a borrowing ClusterQueue whose fairSharing
// weight is 0: it yields to every other queue.
const MaxShare = math.MaxInt64

// Share is a ClusterQueue's weighted dominant-resource share, as Kueue
// computes it: for each resource, what the queue uses beyond its nominal
// quota (summed over flavors) per thousand of what its cohort can lend of
// that resource; the largest of these, divided by fairSharing.weight. A
// queue within its nominal quota has share 0. It is meaningful only in a
// cohort with fair sharing.
func (s *Snapshot) Share(cq *ClusterQueue) int64 { return s.shareWith(cq, nil, nil) }

// shareWith is cq's share with extra added to its usage and less taken
// away.
func (s *Snapshot) shareWith(cq *ClusterQueue, extra, less Usage) int64 {
	if cq.Cohort == "" {
		return 0
	}
	borrowed := map[corev1.ResourceName]float64{}
	lendable := map[corev1.ResourceName]float64{}
	for fr, q := range s.Config.index().quotas[cq.Name] {
		use := s.Usage[cq.Name][fr].Add(extra[fr]).Sub(less[fr])
		if use > q.Nominal {
			borrowed[fr.Resource] += float64(use.Sub(q.Nominal))
		}
		lendable[fr.Resource] += float64(s.CohortLendable(cq.Cohort, fr))
	}
	var drs float64
	for r, b := range borrowed {
		if lendable[r] == 0 {
			drs = math.Inf(1)
			break
		}
		drs = math.Max(drs, 1000*b/lendable[r])
	}
	switch {
	case drs == 0:
		return 0
	case cq.FairWeight == 0 || math.IsInf(drs, 1):
		return MaxShare
	}
	share := drs * 1000 / float64(cq.FairWeight)
	if share >= MaxShare {
		return MaxShare
	}
	return int64(math.Ceil(share))
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
// withinClusterQueue policy allows. It stops as soon as fits holds.
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
	for _, strategy := range []int{lessThanOrEqualToFinalShare, lessThanInitialShare} {
		refused := map[string]bool{}
		for !fits(chosen) {
			target, best := "", int64(-1)
			for _, q := range SortedKeys(byQueue) {
				if len(byQueue[q]) == 0 || refused[q] || !sim.borrowingIn(q, cells) {
					continue
				}
				if sh := sim.Share(s.Config.ClusterQueues[q]); sh > best {
					target, best = q, sh
				}
			}
			if target == "" {
				break
			}
			v := byQueue[target][0]
			mine := sim.shareWith(cq, wUsage, nil)
			ok := mine < best
			if strategy == lessThanOrEqualToFinalShare {
				ok = mine <= sim.shareWith(s.Config.ClusterQueues[target], nil, v.Usage)
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
