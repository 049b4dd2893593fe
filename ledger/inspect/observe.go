package inspect

import (
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
	return v
}
