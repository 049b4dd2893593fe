package queues

import (
	"strconv"
	"strings"
)

// UsageOf derives what an admitted Job holds from its tally.dev/flavors
// annotation: each resource is charged to the listed flavor that has quota
// for it in the Job's ClusterQueue (the first listed flavor when none has).
// A Job without the annotation (it ran before tally recorded it) is charged
// to its queue's first candidate flavors. cfg may be nil. An equal usage
// handed out before is that one (sharedUsages): the result must not be
// modified.
func UsageOf(cfg *Config, w *Workload, ann string) Usage {
	var names []string
	first, _, _ := strings.Cut(ann, ",")
	if _, v, ok := strings.Cut(first, "="); ok {
		names = strings.Split(v, "+")
	}
	var cq *ClusterQueue
	if cfg != nil {
		cq = cfg.ClusterQueues[w.Queue]
	}
	if len(names) == 0 || names[0] == "" {
		names = fallbackFlavors(cfg, cq, w)
	}
	total := w.Total()
	cells := make([]FlavorResource, 0, len(total))
	var key strings.Builder
	for _, r := range w.resourceNames() {
		f := names[0]
		if cq != nil {
			for _, n := range names {
				if _, ok := cq.Quota(FlavorResource{Flavor: n, Resource: r}); ok {
					f = n
					break
				}
			}
		}
		cells = append(cells, FlavorResource{Flavor: f, Resource: r})
		key.WriteString(f)
		key.WriteByte(0)
		key.WriteString(string(r))
		key.WriteByte(0)
		key.WriteString(strconv.FormatInt(int64(total[r]), 10))
		key.WriteByte(0)
	}
	if u, ok := sharedUsages.Get(key.String()); ok {
		return u
	}
	u := make(Usage, len(cells))
	for _, c := range cells {
		u[c] = total[c.Resource]
	}
	return sharedUsages.Of(key.String(), u)
}

// sharedUsages holds the usages UsageOf hands out: most admitted Jobs of
// a queue hold the same, and a Usage is never changed in place (Add and
// Sub change sums of them, which own their maps).
var sharedUsages Share[string, Usage]

// fallbackFlavors names the flavors of a Job that runs without an admission
// record: the first candidate combination of its queue.
func fallbackFlavors(cfg *Config, cq *ClusterQueue, w *Workload) []string {
	if cq != nil {
		if combos := cfg.Candidates(cq, w); len(combos) > 0 {
			names := make([]string, len(combos[0]))
			for i, f := range combos[0] {
				names[i] = f.Name
			}
			return names
		}
	}
	return []string{""}
}
