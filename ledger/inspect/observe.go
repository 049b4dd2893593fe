package inspect

import (
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
)

// StatusOf is what machine.Observe reads of o besides its Workload.
func StatusOf(o *kinds.Object) machine.Status {
	return machine.Status{Suspended: o.Suspended, Finished: o.Finished, Active: o.Active, Started: o.Started,
		StoppedSince: o.StoppedSince, Annotations: o.Meta.Annotations}
}
