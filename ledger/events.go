package ledger

import (
	"fmt"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// The Event reasons DESIGN.md fixes.
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
	ReasonExcessPod     = "ExcessPod"
	ReasonConfigInvalid = "InvalidConfig"
	ReasonConfigLoaded  = "ConfigLoaded"
	// ReasonNamespaceUnbound is on waiting Jobs whose namespace lost its
	// binding.
	ReasonNamespaceUnbound = "NamespaceUnbound"
)

// event records an Event on the workload a Workload describes. The recorder
// sends asynchronously, so this is safe under the ledger's lock.
func (l *Ledger) event(w *queues.Workload, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.recorder.Event(kinds.Ref(w), eventType, reason, msg)
	switch reason {
	case ReasonAdmitted, ReasonPreempting, ReasonPreempted, ReasonEvicted, ReasonPodOverhead, ReasonExcessPod, ReasonQuotaReleased, ReasonInadmissible:
		l.recent.add(inspect.Decision{At: l.opts.Clock.Now(), Reason: reason, Workload: kinds.GVKOf(w).Kind + " " + w.Key(),
			Queue: w.Queue, Message: msg})
	}
}
