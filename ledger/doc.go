// Package ledger is tally's background controller. It keeps, from informer
// events, which workloads (Jobs, and every other kind of kinds.Registered
// the API server serves, read through that seam; "Job" below stands for
// any of them) hold quota in which ClusterQueue and flavor, admits
// pending Jobs when quota frees, keeps the tally.dev/managed label on
// managed namespaces (annotated, or named by a LocalQueue of the config), and loads the config ConfigMap. Status rebuilds the same
// books from a list of Jobs, for `tally status`.
//
// # State machine of a Job
//
//		pending ──pass decides──▶ assumed ──write lands──▶ admitted ──Complete/Failed or deleted──▶ released
//		   ▲                        │ write fails: roll back           │
//		   └────────────────────────┘◀─────────── suspended again ─────┘
//
//	  - pending: suspended, queued in its ClusterQueue's pending tree.
//	  - assumed: chosen by a pass; its quota is charged before the API write,
//	    so the next pass cannot spend it twice. A failed write rolls it back.
//	  - admitted: the informer shows it un-suspended; its quota is charged
//	    from its tally.dev/flavors annotation.
//	  - released: finished or deleted, and the last of its pods (those
//	    labelled tally.dev/workload with its UID by its admission) has
//	    terminated or is gone; the quota is returned. Until then it holds
//	    it: a finished workload's workers may still run, and a deleted
//	    workload lives on as a ghost (pods.go).
//	  - inadmissible: cannot fit under the config in force; set aside until
//	    the config changes.
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
//     pending tree and one usage cell set.
//   - Only the holder of the leader Lease writes. A leader that was paused
//     past its lease wakes up believing it still leads; with Options.Held
//     (Lease.Held) it decides no pass and sends no write once its last
//     renewal is as old as the renew deadline (fence.go).
//
// It may import tally's kinds, queues and flavors packages, the Kubernetes
// API machinery and controller-runtime; never webhook or main.
package ledger
