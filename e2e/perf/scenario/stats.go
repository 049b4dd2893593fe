package scenario

import (
	"cmp"
	"math"
	"slices"
	"time"
)

func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
}

// Outcome is what happened to one Job, in times from the start of the run.
type Outcome struct {
	// Created is when the Job was created (submitted).
	Created time.Duration
	// Admitted is its first admission; Finished when it completed. Both
	// are Never until they happen.
	Admitted, Finished time.Duration
	// Held is how long the Job held quota in all, preempted runs included.
	Held time.Duration
	// Admissions counts its admissions, Preemptions how many of them were
	// cut short.
	Admissions, Preemptions int
}

// Never marks an Outcome time that did not happen.
const Never = time.Duration(math.MinInt64)

// NewOutcome is the Outcome of a Job created at created that nothing has
// happened to yet.
func NewOutcome(created time.Duration) Outcome {
	return Outcome{Created: created, Admitted: Never, Finished: Never}
}

// Stats summarise the outcomes of a plan's Jobs.
type Stats struct {
	Jobs, Admitted, Finished int
	// Wall is from the first creation to the last completion.
	Wall time.Duration
	// UsagePercent is the cpu-time the Jobs held quota for, divided by the
	// total nominal quota times Wall, in percent. Borrowed quota is
	// included (Kueue's measure), so one ClusterQueue can pass 100%.
	UsagePercent float64
	// CohortUsagePercent is the same per cohort (its members' nominal
	// quota), and QueueUsagePercent per ClusterQueue.
	CohortUsagePercent map[string]float64
	QueueUsagePercent  map[string]float64
	Admissions         int
	Preemptions        int
	Classes            []ClassStats
}

// ClassStats are the times to first admission of one class's Jobs.
type ClassStats struct {
	Name                string
	Jobs, Admitted      int
	AvgTimeToAdmission  time.Duration
	P50TimeToAdmission  time.Duration
	P99TimeToAdmission  time.Duration
	MaxTimeToAdmission  time.Duration
	AvgCreateToFinished time.Duration
}

// Compute summarises outcomes, which are parallel to p.Jobs.
func Compute(p *Plan, outcomes []Outcome) Stats {
	st := Stats{Jobs: len(p.Jobs), CohortUsagePercent: map[string]float64{}, QueueUsagePercent: map[string]float64{}}
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	held := make([]float64, len(p.Queues)) // cpu-seconds per ClusterQueue
	tta := make([][]time.Duration, len(p.Classes))
	finish := make([]time.Duration, len(p.Classes))
	finished := make([]int, len(p.Classes))
	for i, o := range outcomes {
		j := p.Jobs[i]
		first = min(first, o.Created)
		st.Admissions += o.Admissions
		st.Preemptions += o.Preemptions
		held[j.Queue] += float64(j.CPUMilli) / 1000 * o.Held.Seconds()
		if o.Admitted != Never {
			st.Admitted++
			tta[j.Class] = append(tta[j.Class], o.Admitted-o.Created)
		}
		if o.Finished != Never {
			st.Finished++
			last = max(last, o.Finished)
			finish[j.Class] += o.Finished - o.Created
			finished[j.Class]++
		}
	}
	if st.Finished > 0 {
		st.Wall = last - first
	}
	var total float64
	cohortHeld, cohortNominal := map[string]float64{}, map[string]float64{}
	for qi, q := range p.Queues {
		total += held[qi]
		nominal := float64(q.NominalMilli) / 1000
		st.QueueUsagePercent[q.Name] = percent(held[qi], nominal*st.Wall.Seconds())
		if q.Cohort != "" {
			cohortHeld[q.Cohort] += held[qi]
			cohortNominal[q.Cohort] += nominal
		}
	}
	for c, h := range cohortHeld {
		st.CohortUsagePercent[c] = percent(h, cohortNominal[c]*st.Wall.Seconds())
	}
	st.UsagePercent = percent(total, float64(p.NominalMilli())/1000*st.Wall.Seconds())
	for ci, c := range p.Classes {
		cs := ClassStats{Name: c.Name, Admitted: len(tta[ci])}
		for _, j := range p.Jobs {
			if j.Class == ci {
				cs.Jobs++
			}
		}
		if len(tta[ci]) > 0 {
			var sum time.Duration
			for _, d := range tta[ci] {
				sum += d
			}
			cs.AvgTimeToAdmission = sum / time.Duration(len(tta[ci]))
			cs.P50TimeToAdmission = Percentile(tta[ci], 50)
			cs.P99TimeToAdmission = Percentile(tta[ci], 99)
			cs.MaxTimeToAdmission = Percentile(tta[ci], 100)
		}
		if finished[ci] > 0 {
			cs.AvgCreateToFinished = finish[ci] / time.Duration(finished[ci])
		}
		st.Classes = append(st.Classes, cs)
	}
	return st
}

func percent(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part / whole
}

// Percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
