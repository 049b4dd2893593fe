package queues

import "strings"

// UsageOf derives what an admitted Job holds from its tally.dev/flavors
// annotation: each resource is charged to the listed flavor that has quota
// for it in the Job's ClusterQueue (the first listed flavor when none has).
// A Job without the annotation (it ran before tally recorded it) is charged
// to its queue's first candidate flavors. cfg may be nil.
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
	u := Usage{}
	for r, a := range w.Total() {
		f := names[0]
		if cq != nil {
			for _, n := range names {
				if _, ok := cq.Quota(FlavorResource{Flavor: n, Resource: r}); ok {
					f = n
					break
				}
			}
		}
		u[FlavorResource{Flavor: f, Resource: r}] = a
	}
	return u
}

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
