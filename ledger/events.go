package ledger

import (
	"fmt"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// The Event reasons tally records (docs/operations.md, "Events" lists them).
const (
	ReasonQueued        = inspect.ReasonQueued
	ReasonPending       = "Pending"
	ReasonInadmissible  = "Inadmissible"
	ReasonAdmitted      = "Admitted"
	ReasonQuotaReleased = "QuotaReleased"
	ReasonPreempting    = "Preempting"
	ReasonPreempted     = inspect.ReasonPreempted
	// ReasonEvicted is on a workload tally suspended for another reason
	// than a preemption: its pods turned out larger than it was admitted
	// with (gated.go).
	ReasonEvicted = "Evicted"
	// ReasonPodOverhead is on a running workload charged in place for
	// pods larger than its pod sets (gated.go).
	ReasonPodOverhead = "PodOverhead"
	// ReasonExcessPod is on a running workload one of whose pods ran
	// beyond what it was admitted with, and was deleted (gated.go).
	ReasonExcessPod = "ExcessPod"
	// ReasonMisplacedPod is on a running workload one of whose pods, held
	// by the gate, could have run outside the flavors it holds, and was
	// deleted (gated.go).
	ReasonMisplacedPod = "MisplacedPod"
	// ReasonNodeReplaced is on a running workload whose pods, placed in a
	// topology on a node that failed, are given another node of the same
	// domain (topology.go).
	ReasonNodeReplaced  = "NodeReplaced"
	ReasonConfigInvalid = "InvalidConfig"
	ReasonConfigLoaded  = "ConfigLoaded"
	// ReasonNamespaceUnbound is on waiting Jobs whose namespace lost its
	// binding.
	ReasonNamespaceUnbound = "NamespaceUnbound"
)

// event records an Event on the workload a Workload describes. The recorder
// sends asynchronously, so this is safe under the ledger's lock. When the
// recorder is an EventQueue that is full, the Event is dropped before it
// is made (and before its message is, unless the dashboard keeps it).
func (l *Ledger) event(w *queues.Workload, eventType, reason, format string, args ...any) {
	recent := false
	switch reason {
	case ReasonAdmitted, ReasonPreempting, ReasonPreempted, ReasonEvicted, ReasonPodOverhead, ReasonExcessPod, ReasonQuotaReleased, ReasonInadmissible, ReasonNodeReplaced:
		recent = true
	}
	q, queued := l.recorder.(*EventQueue)
	full := queued && q.Full()
	if full {
		q.Drop()
		if !recent {
			return
		}
	}
	msg := fmt.Sprintf(format, args...)
	if !full {
		l.recorder.Event(kinds.Ref(w), eventType, reason, msg)
	}
	if recent {
		l.recent.add(inspect.Decision{At: l.opts.Clock.Now(), Reason: reason, Workload: kinds.GVKOf(w).Kind + " " + w.Key(),
			Queue: w.Queue, Message: msg})
	}
}
