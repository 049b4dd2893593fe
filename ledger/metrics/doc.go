// Package metrics keeps the ledger's Prometheus metrics. Those named
// after one of Kueue's (tally_X for kueue_X) have its labels and meaning,
// as far as tally's model allows (docs/operations.md, "Metrics", says
// where they differ); the others are tally's own. All move with the
// ledger's own events, under its lock, at the cost of the change: no
// metric walks the workloads. What they keep of one workload is a
// Workload, which the ledger's entry holds; of a ClusterQueue and a
// LocalQueue, their own records here (local.go has the LocalQueue
// metrics). Only the replica that leads runs the ledger, so only its
// series move.
//
// The ledger tells it what changed through the methods of Metrics and
// never reads it back. It may import tally's flavors, queues and
// ledger/machine packages and Prometheus; never the ledger.
package metrics
