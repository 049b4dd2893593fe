package machine

import (
	"time"

	"tally.dev/tally/queues"
)

// Entry is the state machine's record of one workload: its phase, and
// what the transitions read and change besides. Only this package's
// steps change its phase; the ledger keeps what it needs for its writes
// and its Events beside it.
type Entry struct {
	// W is the workload as last built from its object.
	W     *queues.Workload
	phase Phase
	// InTree says whether it is in its queue's pending tree.
	InTree bool
	// Claim, for a preemptor, is what it waits for: it rejoins its queue
	// when its last victim is gone.
	Claim *Claim
	// Captured: tally recorded it late, as it ran unrecorded.
	Captured bool
	// Charged is the usage it holds in ChargedQueue. It is replaced, never
	// changed in place: others keep it (the LocalQueue metrics, the
	// preemption candidates).
	Charged      queues.Usage
	ChargedQueue string
	// LabelState is the tally.dev/state label on the object.
	LabelState string
	// AdmittedAt is when it was admitted, from its
	// tally.dev/admitted-at annotation.
	AdmittedAt time.Time
	// EvictedAt is when tally decided to evict it.
	EvictedAt time.Time
	// Restore: a stopped victim still carries the node affinity of the
	// flavor it ran in; it gets its candidate affinity back.
	Restore bool
}

// Phase is where e is in the state machine.
func (e *Entry) Phase() Phase { return e.phase }

// New is the entry of a workload the ledger starts to record: Pending for
// one that carries tally's record (its first view is folded next),
// Unrecorded for one that runs without it.
func New(p Phase) Entry { return Entry{phase: p} }

// Ghost is the entry of a deleted workload first seen through its pods,
// which still run: finished, it holds what it is charged until they are
// gone.
func Ghost(w *queues.Workload) Entry { return Entry{W: w, phase: Finished} }

// FromLabels is the entry a workload's labels describe, for readers of
// the API server that have no ledger (tally status): in the phase its
// state label names, and charged with usage in queue unless it is
// inadmissible. Folding its view with React then says whether it still
// holds that quota.
func FromLabels(w *queues.Workload, state queues.State, queue string, usage queues.Usage) Entry {
	e := Entry{W: w, phase: Pending}
	switch state {
	case queues.StateAdmitted:
		e.phase = Admitted
	case queues.StateInadmissible:
		e.phase = Inadmissible
	case queues.StateFinished:
		e.phase = Finished
	}
	if e.phase != Inadmissible {
		e.Charged, e.ChargedQueue = usage, queue
	}
	return e
}
