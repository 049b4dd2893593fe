package framework

import (
	"time"
)

// HandoffLatencies pairs each observed completion with the next
// observation of kind next (Unsuspended: the next admission; PodsCreated:
// the next workload's first pod) and returns the times between them. In a
// queue that holds one workload at a time, that is how long freed quota
// stays idle. A completion with nothing after it (the last one) is dropped.
func HandoffLatencies(obs []Observation, next ObservationKind) []time.Duration {
	var out []time.Duration
	var since time.Time
	waiting := false
	for _, o := range obs {
		switch o.Kind {
		case CompletedKind:
			if !waiting {
				since, waiting = o.At, true
			}
		case next:
			if waiting {
				out = append(out, o.At.Sub(since))
				waiting = false
			}
		}
	}
	return out
}
