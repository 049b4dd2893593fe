// Package webhook serves tally's admission webhooks and describes their
// configurations.
//
//   - Jobs (mutating, CREATE, managed namespaces only): suspend the Job,
//     label its state and queue, and pin it to its candidate flavors.
//   - Namespaces (mutating): keep the tally.dev/managed label in step with
//     the tally.dev/cluster-queue annotation.
//   - Namespaces (validating): deny an annotation that names an unknown
//     ClusterQueue.
//   - ConfigMaps (validating): deny a config that does not validate.
//
// Handlers read only in-memory state: the config Store and the manager's
// cache. They never call the API server.
//
// It may import tally's queues and flavors packages, the Kubernetes API
// machinery and controller-runtime; never ledger or main.
package webhook
