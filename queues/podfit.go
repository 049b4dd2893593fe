package queues

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// The pod gate's question: may a new pod of an admitted workload run on
// what the workload was admitted with? It may when the workload's live
// pods and the new one can each be given a pod set whose per-pod requests
// cover their own, in every resource some ClusterQueue covers (not only
// those of the workload's own queue: a pod may ask for nothing its
// workload was not admitted with that quota anywhere counts), with no
// pod set given more pods than its count. Its callers pass Config.Covers.

// PodFit is the answer for one new pod.
type PodFit int

const (
	// PodFits: the pods fit the pod sets.
	PodFits PodFit = iota
	// PodTooMany: the new pod is no larger than some pod set's pods, but
	// the pod sets have no room left for it.
	PodTooMany
	// PodTooLarge: the new pod asks for more than any pod set's pods.
	PodTooLarge
)

// maxHallSets bounds the pod sets FitPods weighs exactly; with more, a
// pod takes the first pod set with room that covers it.
const maxHallSets = 16

// FitPods says whether pod, a new pod of a workload with pod sets sets
// whose live pods ask for live, fits what the workload was admitted
// with. Only the resources covered says are compared.
func FitPods(sets []PodSet, live []flavors.Resources, pod flavors.Resources, covered func(corev1.ResourceName) bool) PodFit {
	maskOf := func(p flavors.Resources) uint64 {
		var m uint64
		for i := range sets {
			if i < 64 && sets[i].within(p, covered) {
				m |= 1 << i
			}
		}
		return m
	}
	newMask := maskOf(pod)
	if newMask == 0 {
		return PodTooLarge
	}
	masks := make([]uint64, 0, len(live)+1)
	masks = append(masks, newMask)
	for _, p := range live {
		masks = append(masks, maskOf(p))
	}
	if hall(sets, masks) {
		return PodFits
	}
	return PodTooMany
}

// hall says whether every pod, given as the mask of the pod sets that
// may take it, can be given one, within the sets' counts. For up to
// maxHallSets sets it checks Hall's condition: for every subset T of the
// sets, the pods that only T's sets may take number no more than T's
// counts. With more it assigns greedily, which may say no when a
// cleverer assignment exists.
func hall(sets []PodSet, masks []uint64) bool {
	n := len(sets)
	if n > maxHallSets {
		room := make([]int64, n)
		for i, s := range sets {
			room[i] = s.Count
		}
	next:
		for _, m := range masks {
			for i := range min(n, 64) {
				if m&(1<<i) != 0 && room[i] > 0 {
					room[i]--
					continue next
				}
			}
			return false
		}
		return true
	}
	// need[T] counts the pods whose mask lies within T; capacity[T] sums
	// the counts of T's sets.
	need := make([]int64, 1<<n)
	for _, m := range masks {
		if m == 0 {
			return false
		}
		need[m]++
	}
	for i := range n {
		for t := range need {
			if t&(1<<i) != 0 {
				need[t] += need[t^(1<<i)]
			}
		}
	}
	capacity := make([]int64, 1<<n)
	for t := 1; t < len(capacity); t++ {
		low := t & -t
		i := 0
		for low>>i != 1 {
			i++
		}
		capacity[t] = capacity[t^low] + sets[i].Count
		if need[t] > capacity[t] {
			return false
		}
	}
	return true
}

// within says whether p asks for no more than a pod of s may of any
// covered resource.
func (s *PodSet) within(p flavors.Resources, covered func(corev1.ResourceName) bool) bool {
	for r, a := range p {
		if a > s.Requests[r]+s.Uncharged[r] && covered(r) {
			return false
		}
	}
	return true
}

// PodExcess is what pod asks for beyond the pod set of sets that it
// exceeds least (in the fewest covered resources, then the least in
// all), in covered resources only: the pod overhead that the workload
// must be charged for its pods to fit. It is empty when pod fits a pod
// set.
func PodExcess(sets []PodSet, pod flavors.Resources, covered func(corev1.ResourceName) bool) flavors.Resources {
	var best flavors.Resources
	var bestSum flavors.Amount
	for _, s := range sets {
		ex := flavors.Resources{}
		var sum flavors.Amount
		for r, a := range pod {
			if d := a - s.Requests[r] - s.Uncharged[r]; d > 0 && covered(r) {
				ex[r] = d
				sum += d
			}
		}
		if best == nil || len(ex) < len(best) || len(ex) == len(best) && sum < bestSum {
			best, bestSum = ex, sum
		}
	}
	return best
}

// WithPodOverhead returns a copy of w whose pods each ask extra more, in
// every pod set, sealed.
func (w *Workload) WithPodOverhead(extra flavors.Resources) *Workload {
	out := *w
	out.PodSets = make([]PodSet, len(w.PodSets))
	for i, ps := range w.PodSets {
		reqs := make(flavors.Resources, len(ps.Requests)+len(extra))
		for r, a := range ps.Requests {
			reqs[r] = a
		}
		for r, a := range extra {
			reqs[r] = reqs[r].Add(a)
		}
		out.PodSets[i] = PodSet{Name: ps.Name, Count: ps.Count, Autoscaled: ps.Autoscaled, Requests: reqs, Uncharged: ps.Uncharged}
	}
	out.total, out.vec = nil, nil
	return out.Seal()
}

// PodCount is w's pods summed over its pod sets: what its quota covers.
func (w *Workload) PodCount() int64 {
	n := int64(0)
	for _, ps := range w.PodSets {
		n += ps.Count
	}
	return n
}

// AdmittedFlavors names the flavors of an AnnotationFlavors value: those
// its pod sets were admitted in (they share one combination). None when
// ann is empty (admitted before tally recorded its flavors).
func AdmittedFlavors(ann string) []string {
	first, _, _ := strings.Cut(ann, ",")
	_, v, found := strings.Cut(first, "=")
	if !found || v == "" {
		return nil
	}
	return strings.Split(v, "+")
}

// NodeLabelsOf are the node labels that the pods of a workload admitted
// in the named flavors must run on: those of every one of them ("" names
// none). ok is false when a flavor is not in c (missing names it); labels
// is empty when the flavors label no nodes.
func (c *Config) NodeLabelsOf(names []string) (labels map[string]string, missing string, ok bool) {
	for _, name := range names {
		if name == "" {
			continue
		}
		f := c.Flavors[name]
		if f == nil {
			return nil, name, false
		}
		for k, val := range f.NodeLabels {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = val
		}
	}
	return labels, "", true
}

// PodConfined says whether a pod with spec can run only on nodes that
// carry every one of labels: it names no node (a pod with spec.nodeName
// skips the scheduler, which is what would hold it to them), and each
// label is in its nodeSelector or required, with that value alone, by
// every term of its required node affinity (the terms are ORed).
func PodConfined(spec *corev1.PodSpec, labels map[string]string) bool {
	if len(labels) == 0 {
		return true
	}
	if spec.NodeName != "" {
		return false
	}
	var terms []corev1.NodeSelectorTerm
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	for k, v := range labels {
		if sel, ok := spec.NodeSelector[k]; ok {
			if sel != v {
				return false
			}
			continue
		}
		if len(terms) == 0 {
			return false
		}
		for _, t := range terms {
			if !termPins(t, k, v) {
				return false
			}
		}
	}
	return true
}

// termPins says whether every node that term t matches has label k with
// value v.
func termPins(t corev1.NodeSelectorTerm, k, v string) bool {
	for _, e := range t.MatchExpressions {
		if e.Key == k && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) > 0 && !slices.ContainsFunc(e.Values, func(x string) bool { return x != v }) {
			return true
		}
	}
	return false
}

// StartCount is how many of w's pods its controller starts: PodCount,
// less those only an autoscaler adds. waitForPodsReady waits for these.
func (w *Workload) StartCount() int64 {
	n := int64(0)
	for _, ps := range w.PodSets {
		n += ps.Count - ps.Autoscaled
	}
	return n
}
