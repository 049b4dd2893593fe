package perf

import (
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// sighting is what a watch saw of one workload, a Job of tally's or a
// Workload of Kueue's: when it first saw it, and when it first and last
// saw it admitted (zero: never).
type sighting struct {
	class             int // in the plan's Classes
	seen, first, last time.Time
}

// AdmissionTimes are one class's average times to admission as a watch
// saw them, from each workload's first sighting: to its first admission,
// as tally's runner counts, and to its last, as Kueue's recorder counts
// (a re-admission after an eviction overwrites its time). The two differ
// only for workloads that were preempted. Averages are over the admitted
// workloads.
type AdmissionTimes struct {
	Admitted          int     `json:"admitted"`
	AvgToFirstSeconds float64 `json:"avgToFirstSeconds"`
	AvgToLastSeconds  float64 `json:"avgToLastSeconds"`
}

// admissionTimes averages the sightings by class name.
func admissionTimes(p *scenario.Plan, ss []sighting) map[string]AdmissionTimes {
	type acc struct {
		n           int
		first, last time.Duration
	}
	accs := make([]acc, len(p.Classes))
	for _, s := range ss {
		if s.seen.IsZero() || s.first.IsZero() || s.class < 0 || s.class >= len(accs) {
			continue
		}
		a := &accs[s.class]
		a.n++
		a.first += s.first.Sub(s.seen)
		a.last += s.last.Sub(s.seen)
	}
	out := make(map[string]AdmissionTimes, len(accs))
	for i, a := range accs {
		t := AdmissionTimes{Admitted: a.n}
		if a.n > 0 {
			t.AvgToFirstSeconds = a.first.Seconds() / float64(a.n)
			t.AvgToLastSeconds = a.last.Seconds() / float64(a.n)
		}
		out[p.Classes[i].Name] = t
	}
	return out
}
