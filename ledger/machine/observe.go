package machine

import (
	"strconv"
	"time"

	"tally.dev/tally/queues"
)

// Status is what Observe reads of a workload object besides its
// Workload: its suspend field, whether it finished, its pods' activity
// as its status reports them, and its annotations (its admission's, its
// requeues').
type Status struct {
	Suspended, Finished bool
	// Active counts pods that run or terminate; Started says the status
	// has a startTime; StoppedSince is when its controller last marked it
	// stopped, zero if it has not.
	Active       int32
	Started      bool
	StoppedSince time.Time
	Annotations  map[string]string
}

// Observe reads a workload of status s, whose Workload is w and of whose
// pods n are live, under cfg (which may be nil), for React. Restore is
// left to the caller, which knows the candidate flavors.
func Observe(cfg *queues.Config, s Status, w *queues.Workload, n int) Observed {
	v := Observed{
		W: w, Finished: s.Finished, Suspended: s.Suspended,
		Running:      s.Active > 0 || (s.Started && s.StoppedSince.IsZero()),
		Pods:         n,
		StoppedSince: s.StoppedSince,
	}
	if t, err := time.Parse(time.RFC3339, s.Annotations[queues.AnnotationAdmittedAt]); err == nil {
		v.AdmittedAt = t
	}
	if ann := s.Annotations[queues.AnnotationFlavors]; ann != "" || (!s.Finished && !s.Suspended) {
		v.Usage = queues.UsageOf(cfg, w, ann)
	}
	if cfg != nil && cfg.PodsReady != nil {
		if t, err := time.Parse(time.RFC3339, s.Annotations[queues.AnnotationRequeueAt]); err == nil {
			v.RequeueAt = t
		}
		limit := cfg.PodsReady.BackoffLimitCount
		v.GaveUp = limit != nil && Requeues(s.Annotations) > *limit
	}
	return v
}

// Requeues reads a workload's count of evictions for pods that were not
// ready in time from its annotations (queues.AnnotationRequeues).
func Requeues(annotations map[string]string) int32 {
	n, err := strconv.ParseInt(annotations[queues.AnnotationRequeues], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}
