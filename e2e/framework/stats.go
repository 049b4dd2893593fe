package framework

import (
	"time"
)

// HandoffLatencies pairs each observed completion with the next observed
// admission (un-suspension) and returns the times between them. In a queue
// that holds one Job at a time, that is how long freed quota stays idle.
// A completion with no admission after it (the last one) is dropped.
func HandoffLatencies(obs []Observation) []time.Duration {
	var out []time.Duration
	var since time.Time
	waiting := false
	for _, o := range obs {
		switch o.Kind {
		case CompletedKind:
			if !waiting {
				since, waiting = o.At, true
			}
		case Unsuspended:
			if waiting {
				out = append(out, o.At.Sub(since))
				waiting = false
			}
		}
	}
	return out
}
