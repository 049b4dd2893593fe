// Package machine is the ledger's state machine of a workload: the
// phases, the entry that records one workload's place in them, and every
// transition, each a pure step (entry, input) → (entry, effects). The
// ledger (package ledger) feeds it what its informers show and what its
// writes did, and carries out the effects in one place (its apply); no
// other code changes a phase.
//
//		               ┌──────────── Rollback ────────────┐
//		               ▼                                  │
//		 New ──▶ pending ──── Assume ────▶ assumed ── React: un-suspended ──▶ admitted
//		         │ ▲ ▲ ▲                                                      │  │  ▲
//		         │ │ │ └─ React/Recheck: pods gone ─ evicting ◀─ Evict, Requeue,   │  │
//		         │ │ │                                 │    React: suspended ───┘  │
//		         │ │ │                                 └─ EvictionFailed, ─────────┘
//		         │ │ │                                    RequeueFailed
//		         │ │ └── VictimGone: the last one ── pending with a claim ◀── Preempt
//		         │ └──── Rebuild (config or priorities change) ────┐
//		         └── Reject (a pass: never fits) ──▶ inadmissible ─┘
//
//		 New(Unrecorded) ── Capture ──▶ capturing ── Captured ─┬─ fits ──▶ unrecorded, captured ── React ──▶ admitted
//		        ▲                                             └─ does not fit ──▶ pending
//		        └────────────── Captured: write failed ───────┘
//
//		 any ── React: Complete/Failed ──▶ finished     any ── Forget (deleted) ──▶ gone, or a Ghost while its pods last
//
//	  - pending: suspended, queued in its ClusterQueue's pending tree. It
//	    waits out of the tree after a conflicting admission write (until
//	    its next version) and, as a preemptor, while it has a claim: the
//	    quota it preempts for counts in its queue until its victims are gone,
//	    and it is tried first in the pass after.
//	  - assumed: chosen by a pass; its quota is charged before the API write,
//	    so the next pass cannot spend it twice. A failed write rolls it back.
//	  - admitted: the informer shows it un-suspended; its quota is charged
//	    from its tally.dev/flavors annotation.
//	  - evicting: suspended (preempted by a pass, requeued at a larger
//	    size, or suspended by its owner) while its status or its counted
//	    pods show pods that may still run; it keeps its quota until they
//	    are gone (and, for a preemption its controller shows no sign of
//	    having seen, for suspendGrace), then pending again.
//	  - inadmissible: cannot fit under the config in force; set aside until
//	    the config (or its shape) changes.
//	  - finished: complete or failed; its quota is returned once the last
//	    of its pods has terminated or is gone: a finished workload's
//	    workers may still run.
//	  - unrecorded, capturing: late capture of a workload running without
//	    tally's record: the next pass decides it, one write records it
//	    admitted or suspends it.
//
// React folds one informer view (Observed); the other steps (steps.go)
// are the ledger's own decisions and the outcomes of its writes. The
// effects are a closed set (Started, Shrunk, LeaveTree, JoinTree, Arrive, Pass, Charge,
// Release, Yield, Unyield, Reserve, Unreserve, Grew, Shrank, TryFirst,
// Relabel, Freed, RecheckLater, FoldAgain). FromLabels
// builds the entry a workload's labels describe, for the read side
// (tally status, tally explain), which folds it with React as the ledger
// would.
//
// The ledger's golden scenarios (ledger/testdata/scenarios) drive these
// steps through the ledger; this package's tests drive them one by one.
//
// It may import tally's queues and flavors packages and the Kubernetes API
// types; never client-go, controller-runtime or prometheus
// (TestNoClientLibrary), nor kinds, ledger, webhook or main.
package machine
