// Package kinds is the seam between tally and the kinds of workload it
// queues. A kind says, for an object of that kind: its group, version,
// kind and resource; its pod sets (name, count, pod template and the
// template's JSON path); whether it is suspended, finished or still has
// active pods; and the path of its suspend field. Each built-in kind has
// a file of its own (job.go, jobset.go, rayjob.go, pod.go, mpijob.go,
// trainjob.go),
// but the training operator's five (PyTorchJob, TFJob, XGBoostJob,
// PaddleJob, JAXJob) share kubeflow.go: they are one type, Kubeflow,
// with five values. The guard, the informers and the webhook and RBAC
// rules are built from that.
//
// # Writes
//
// The seam also builds every write tally makes to a workload, so that
// neither the webhook nor the ledger asks what kind it is (writes.go):
//
//   - at creation, the webhook's JSON patch: Object.Fields before
//     tally's changes, Object.TakeOwnTerms for each pod set's own
//     required node terms, and Object.CreationPatch after them; the pod
//     gate's patch of a pod that is part of a workload (PartPatch);
//   - at admission, Target.Admit: a merge patch that un-suspends the
//     workload and narrows its pod templates to the chosen flavors
//     (Target.MergeOnly: no other write mode expresses it);
//   - at eviction, Target.Evict: a merge patch that suspends it, or its
//     deletion; once it has stopped, Target.Restore narrows it back to
//     its candidate flavors, when Object.RestoreDue says so; a gated
//     pod's release, UngatePatch.
//
// The template kinds' writes are the default: tally narrows their pod
// templates by required node affinity. A kind overrides them with a
// method writes() writes: JobSet's controller allows no change to a
// suspended JobSet's templates but the nodeSelector, so tally narrows
// it by nodeSelector, and moves the user's own nodeSelector into the
// required node affinity at creation (selectorWrites); a Pod (a
// single-pod workload) is narrowed so too, its suspension is a
// scheduling gate (Object.SuspendValue), and its eviction a deletion
// (podWrites, EvictsByDeletion).
//
// # Pod sets read from other objects
//
// A kind's pod sets may come from another object its workloads name (a
// TrainJob's runtime: its pods are made from the runtime's template,
// with the TrainJob's overrides). Such a kind (refs.go) has two unexported
// methods: references, the kinds of object it reads (References), and
// withLookup, the kind reading them through a Lookup, a function that
// gets one by kind, namespace and name. Registry.SetLookup gives the
// registry's kinds the Lookup: main gives one that reads the manager's
// cache (ReaderLookup), which the webhook and the ledger share, and the
// read side's commands one that reads the API server. Read then records
// in Object.Refs the objects it read (or tried to), their
// resourceVersions in Object.RefsVersion, and in Object.Unresolved why
// it could not read them (`ClusterTrainingRuntime "x" not found`); the
// Workload of an unresolved workload carries that reason
// (queues.Workload.Unresolved), and the queues find it inadmissible with
// it. The ledger watches the References of its kinds and reads again the
// waiting workloads whose Refs name an object that changed
// (Object.DependsOn); neither it nor the webhook knows which kinds read
// what.
//
// # The registry
//
// A Registry holds the kinds tally queues: the built-in ones and those a
// config declares. main makes one and hands it to the webhook and the
// ledger; the ledger's config loader declares into it. A WorkloadKind
// document of the config declares any other kind with a suspend field
// (Declared): its suspend path, its pod sets as template and count
// paths, and the conditions that mean finished. Accept is the one
// acceptance of a config, for every reader of one (the ConfigMap's
// webhook, the ledger's config loader, serve's --config and the
// commands): it parses it, refuses a declaration of a built-in kind,
// checks the declared paths against their CRDs' schemas when it can list
// them, and resolves the declared kinds' resource names. The config loader
// declares them (Registry.Declare) with the resource names the API
// server serves them under, the ledger watches them once they are
// declared, and the webhook's rules follow (webhook.RuleSync), all
// without a restart. A built-in kind is such a declaration plus its
// special cases: pod sets that depend on the object (a map of replica
// specs, a list of replicated Jobs or worker groups), status fields, its
// writes, the kinds of object its operator makes its pods through
// (PodParents: a RayJob's RayCluster), and, for the Pod, its own webhook
// (IsPodKind).
//
// # Adding a kind
//
//  1. Write kinds/<kind>.go: a type that implements Kind. A kind served
//     by a CRD reads *unstructured.Unstructured objects (see JobSet):
//     only its pod templates are converted to corev1 types, so tally
//     follows no operator's Go API module. A kind whose suspended
//     workloads' pod templates may change needs no writes of its own.
//  2. Write kinds/<kind>_test.go: Read on a literal object.
//  3. Add it to the list builtin (registry.go).
//  4. Run make manifests: hack/manifests writes the kind's RBAC rules
//     (Rules) and its webhook rules (webhook.Configurations) into
//     deploy/base and the Helm chart, and its test fails while the
//     committed files differ.
//
// StripJob (strip.go) is the cache transform that cuts a Job to what the
// books read of it; the ledger's cache and the read side's lists apply it.
//
// It may import tally's queues and flavors packages, the Kubernetes API
// machinery and controller-runtime's client package (for client.Object);
// webhook, ledger, inspect and main import it, queues and flavors never do.
package kinds
