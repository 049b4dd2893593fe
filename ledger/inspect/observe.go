package inspect

import (
	"strconv"
	"time"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Observe reads o, whose Workload is w and of whose pods n are live,
// under cfg (which may be nil). restore is left to the caller, which
// knows the candidate flavors.
func Observe(cfg *queues.Config, o *kinds.Object, w *queues.Workload, n int) machine.Observed {
	v := machine.Observed{
		W: w, Finished: o.Finished, Suspended: o.Suspended,
		Running:      o.Active > 0 || (o.Started && o.StoppedSince.IsZero()),
		Pods:         n,
		StoppedSince: o.StoppedSince,
	}
	if t, err := time.Parse(time.RFC3339, o.Meta.Annotations[queues.AnnotationAdmittedAt]); err == nil {
		v.AdmittedAt = t
	}
	if ann := o.Meta.Annotations[queues.AnnotationFlavors]; ann != "" || (!o.Finished && !o.Suspended) {
		v.Usage = queues.UsageOf(cfg, w, ann)
	}
	if cfg != nil && cfg.PodsReady != nil {
		if t, err := time.Parse(time.RFC3339, o.Meta.Annotations[queues.AnnotationRequeueAt]); err == nil {
			v.RequeueAt = t
		}
		limit := cfg.PodsReady.BackoffLimitCount
		v.GaveUp = limit != nil && Requeues(o.Meta.Annotations) > *limit
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
