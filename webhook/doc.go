// Package webhook serves tally's admission webhooks and describes their
// configurations.
//
//   - Jobs (mutating, CREATE, managed namespaces only): route the Job to
//     its ClusterQueue (queues.Config.Route: Kueue's queue-name through a
//     LocalQueue, the tally.dev/cluster-queue label, the namespace's
//     annotation, its LocalQueue named default), then suspend it, label its
//     state and queue, and pin it to its candidate flavors. An unknown
//     LocalQueue is denied; a Job no rule routes is let through unqueued,
//     with a warning.
//   - Jobs (validating, UPDATE, managed namespaces only): only tally may
//     un-suspend a managed Job, touch its tally.dev/ labels and
//     annotations (tally.dev/priority-class aside), change where its pods may run, or raise the pod count of
//     a running one. Pod sets that the object only patches (a TrainJob's
//     runtime, through its runtimePatches) are compared as read, patches
//     applied. tally is known by its user name (JobGuard.Users).
//   - Workloads (validating, CREATE and UPDATE, outside the managed
//     namespaces, only for workloads that carry tally.dev/state): only
//     tally may create one with that label, or add or change it or the
//     queue label (UnmanagedGuard); the ledger takes it for tally's own.
//   - Pods (mutating, CREATE, managed namespaces only; called again after
//     other webhooks change the pod): the pod gate (PodGate). A pod that
//     asks for a covered resource must belong to an admitted workload and
//     fit its pod sets (queues.FitPods); a larger one is held by the
//     scheduling gate for the ledger to requeue its workload at its size,
//     and one more than its count is held for the ledger to let it run
//     when one of the workload's pods ends; any other is queued on its own
//     as a single-pod workload (kinds.Pod), through the Job handler's own
//     queueing.
//     A pod's devices from Dynamic Resource Allocation count: its claims'
//     ResourceClaimTemplates are read (from the API server for a pod of
//     an admitted workload, which is denied if one was replaced since the
//     workload was charged from it).
//   - ResourceClaimTemplates (validating, DELETE, managed namespaces
//     only): a template that a pod not yet done, or an admitted workload
//     that has not finished, names cannot be deleted (ClaimTemplateGuard).
//   - Pods (validating, UPDATE and pods/resize, only for the updates that
//     matter, by matchConditions): only tally may touch their tally.dev/
//     labels and annotations or take the scheduling gate off; a resize
//     may not raise a covered resource (GuardPod).
//   - Namespaces (mutating): keep the tally.dev/managed label in step with
//     the tally.dev/cluster-queue annotation and the config's LocalQueues.
//   - Namespaces (validating): deny an annotation that names an unknown
//     ClusterQueue.
//   - ConfigMaps (validating): deny a config that kinds.Accept refuses
//     (offline: it asks the API server nothing).
//
// Every request is bounded in body size and time (Limit) and, when it is
// the v1 AdmissionReview the API server sends, read in one pass instead of
// the decoder's two, as is the workload in it (Review); anything else gets
// the decoder's answer. The Job webhooks refuse a quantity whose text
// resource.ParseQuantity could spend minutes on before they decode the Job
// (checkQuantities).
//
// Handlers read in-memory state: the config Store and the manager's cache.
// The calls to the API server are the Job webhook's read of a Namespace
// its cache does not hold yet, of a new workload's owner, and the pod
// gate's read of an owner (or its pods) that the cache does not hold or
// holds as not admitted (or one pod too many): tally may have just
// admitted it; the pod gate's read of the ResourceClaimTemplates of a pod
// of an admitted workload, and the template guard's lists. If a read fails, the create is denied (retryable), never
// let through unqueued. WhoAmI runs once, at start-up.
//
// Every workload kind of the registry (kinds.Registry, Options.Kinds) but
// the Pod goes through the same two Job handlers, which read it and build
// its creation patch through the kinds seam; "Job" above stands for any
// of them.
//
// Setup wires it all into a controller-runtime manager: the handlers, the
// serving certificate (certs) and the webhook configurations. NewServer is
// the manager's webhook server: controller-runtime's, with room for
// MaxConcurrentStreams calls on one HTTP/2 connection.
//
// It may import tally's kinds, queues, flavors and certs packages, the
// Kubernetes API machinery and controller-runtime; never ledger or main.
package webhook
