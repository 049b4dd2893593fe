// Package webhook serves tally's admission webhooks and describes their
// configurations.
//
//   - Jobs (mutating, CREATE, managed namespaces only): suspend the Job,
//     label its state and queue, and pin it to its candidate flavors.
//   - Jobs (validating, UPDATE, managed namespaces only): only tally may
//     un-suspend a managed Job, touch its tally.dev/ labels and
//     annotations (tally.dev/priority-class aside), change where its pods may run, or raise the pod count of
//     a running one. tally is known by its user name (JobGuard.Users).
//   - Namespaces (mutating): keep the tally.dev/managed label in step with
//     the tally.dev/cluster-queue annotation.
//   - Namespaces (validating): deny an annotation that names an unknown
//     ClusterQueue.
//   - ConfigMaps (validating): deny a config that does not validate.
//
// Handlers read only in-memory state: the config Store and the manager's
// cache. They never call the API server; WhoAmI runs once, at start-up.
//
// It may import tally's queues and flavors packages, the Kubernetes API
// machinery and controller-runtime; never ledger or main.
package webhook
