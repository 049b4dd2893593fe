// Package queues owns tally's configuration and its pure admission core.
//
// It parses and validates the config documents (ResourceFlavor, ClusterQueue,
// LocalQueue, WorkloadPriorityClass) into a Config, describes Jobs as
// Workloads, and decides, as pure functions of (Config, usage Snapshot,
// Workloads), which flavor a Workload gets, whether it fits, may borrow, or
// must wait, and why. Nothing here talks to an API server.
//
// It may import tally's flavors package, the standard library and the
// Kubernetes API types; webhook, ledger and main import it.
package queues
