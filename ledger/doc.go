// Package ledger is tally's background controller. It keeps, from informer
// events, which workloads (Jobs, and every other kind of Options.Kinds
// the API server serves, read and written through the kinds seam; "Job"
// below stands for any of them) hold quota in which ClusterQueue and flavor, admits
// pending Jobs when quota frees, keeps the tally.dev/managed label on
// managed namespaces (annotated, or named by a LocalQueue of the config),
// and loads the config ConfigMap (declaring its WorkloadKinds). Books
// copies its books under its lock for the read-only dashboard, which
// package inspect builds and serves (Dashboard); metrics.go keeps
// Kueue's metrics as the books change. modes.go holds the switches that
// trade writes away (the finished label, the Queued and Pending Events,
// the admission write's encoding); the defaults make every write below.
//
// # State machine of a workload
//
// Each workload the ledger knows has an entry whose phase (machine.go) is
// one of:
//
//		               ┌───────── write fails ─────────┐
//		               ▼                               │
//		 created ──▶ pending ──── pass: fits ────▶ assumed ── seen un-suspended ──▶ admitted
//		             │ ▲ ▲ ▲                                                         │   ▲
//		             │ │ │ └── pods gone ── evicting ◀── preempted, or suspended ────┘   │
//		             │ │ │                     │         by its owner                    │
//		             │ │ │                     └────── preemption write fails ───────────┘
//		             │ │ └── victims gone ── pending with a claim ◀── pass: preempts
//		             │ └────── config changes ─────┐
//		             └── pass: never fits ──▶ inadmissible
//
//		 unrecorded ── pass ──▶ capturing ── write lands ─┬─ fits ──▶ unrecorded, captured ── seen ──▶ admitted
//		      ▲                    │                      └─ does not fit ──▶ pending
//		      └─── write fails ────┘
//
//		 any ── seen Complete/Failed ──▶ finished          any ── deleted ──▶ forgotten (a ghost while its pods last)
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
//	  - evicting: suspended (preempted by a pass, or by its owner) while its
//	    status or its counted pods show pods that may still run; it keeps its quota until they are gone (and, for
//	    a preemption its controller shows no sign of having seen, for
//	    suspendGrace), then pending again.
//	  - inadmissible: cannot fit under the config in force; set aside until
//	    the config (or its shape) changes.
//	  - finished: complete or failed; its quota is returned once the last
//	    of its pods (those its admission labelled tally.dev/workload with
//	    its UID) has terminated or is gone: a finished workload's workers
//	    may still run.
//	  - unrecorded, capturing: late capture (late.go) of a workload running
//	    without tally's record: the next pass decides it, one write records
//	    it admitted or suspends it.
//
// The reaction to an informer view is a pure function, react: (entry,
// observed view) → (new entry, effects), the effects a closed set
// (joinTree, leaveTree, charge, release, relabel, freed, recheck, arrive)
// that Ledger.apply carries out. A change in the count of a workload's
// live pods folds its last view again with the new count (pods.go). A
// pod counts for the workload its tally.dev/workload label names only when
// it is that workload's, by namespace and controller chain (the chain
// through the Jobs that are parts of it, see partOfQueuedLocked); a label
// is nobody's proof. A deleted workload whose pods still run is kept as a
// ghost that holds its quota until they are gone. Workloads are built with
// their namespace's LimitRange defaults and their RuntimeClass's overhead,
// as their pods get them (defaults.go). A gated pod that claims an
// admitted workload is larger than the workload's pods: the workload is
// charged the difference as its pod overhead, in place when its queue has
// room, else by an eviction after which it queues again at that size
// (gated.go). A single-pod workload (kinds.Pod) is admitted
// by taking its scheduling gate off and evicted by deleting it. inspect.Status folds each Job through react too,
// from the entry its state label and flavors annotation describe.
//
// testdata/scenarios/*.txt drive the ledger through these states step by
// step (what the informers show, what the writes do) and
// testdata/scenarios/*.out record what it does at each step: the writes a
// pass decides, the Events, every workload's state and each queue's usage
// (TestScenarios; regenerate with go test ./ledger -run TestScenarios
// -rewrite, and review the diff).
//
// # Assumptions
//
//   - The API server is the only source of truth. Everything here is rebuilt
//     from the informers on start, and no pass runs before they have synced,
//     so a restart never admits twice.
//   - Events can be missed or reordered: a periodic recount compares the
//     ledger with the informer's Jobs, replays what it missed (once the
//     difference has lasted recountSettle), and rebuilds usage, logging and
//     counting what it repaired.
//   - Event handling is O(change): a handler touches one Job's entry, one
//     pending tree and one usage cell set, and notes its queue as changed.
//     A pass decides only the cohorts (and lone queues) with a changed
//     queue, on pending lists rebuilt only where a tree changed (dirty.go);
//     a config, priority, namespace-label change or a recount has it
//     decide every queue.
//   - Only the holder of the leader Lease writes. A leader that was paused
//     past its lease wakes up believing it still leads; with Options.Held
//     (Lease.Held) it decides no pass and sends no write once its last
//     renewal is as old as the renew deadline (fence.go).
//
// It may import tally's kinds, queues, flavors and inspect packages
// (inspect.Observe reads a workload for the state machine), the
// Kubernetes API machinery and controller-runtime; never webhook or main.
package ledger
