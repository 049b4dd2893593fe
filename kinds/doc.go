// Package kinds is the seam between tally and the kinds of workload it
// queues. Each kind is one file that says, for an object of that kind:
// its group, version, kind and resource; its pod sets (name, count, pod
// template and the template's JSON path); whether it is suspended,
// finished or still has active pods; and the path of its suspend field.
// The webhook's patch, the guard, the admission and eviction writes, the
// informers and the webhook and RBAC rules are all built from that.
//
// # Declared kinds
//
// A WorkloadKind document of the config declares any other kind with a
// suspend field (Declared): its suspend path, its pod sets as template
// and count paths, and the conditions that mean finished. Accept is the
// one acceptance of a config, for every reader of one (the ConfigMap's
// webhook, the ledger's config loader, serve's --config and the
// commands): it parses it, refuses a declaration of a built-in kind,
// checks the declared paths against their CRDs' schemas when it can list
// them, and resolves the declared kinds' resource names. The config
// loader declares them (Declare) with the resource names the API server
// serves them under, the ledger watches them once they are declared, and
// the webhook's rules follow (webhook.RuleSync), all without a restart. A
// built-in kind is such a declaration plus its special cases: pod sets
// that depend on the object (a map of replica specs, a list of replicated
// Jobs or worker groups), status fields, JobSet's narrowing by
// nodeSelector (NarrowsBySelector), the kinds of object its operator
// makes its pods through (PodParents: a RayJob's RayCluster), and, for
// the Pod (a single-pod workload), a suspension that is a scheduling gate
// (Object.SuspendValue), an eviction that is a deletion
// (EvictsByDeletion) and its own webhook (IsPodKind).
//
// # Adding a kind
//
//  1. Write kinds/<kind>.go: a type that implements Kind. A kind served
//     by a CRD reads *unstructured.Unstructured objects (see PyTorchJob):
//     only its pod templates are converted to corev1 types, so tally
//     follows no operator's Go API module.
//  2. Write kinds/<kind>_test.go: Read on a literal object.
//  3. Add it to the list builtin (see Registered).
//  4. Add its resource to deploy/base/rbac.yaml (get, list, watch, patch)
//     and to both workload webhooks of deploy/base/webhooks.yaml. Tests
//     keep each in step with Registered (kinds.TestDeployedRBAC,
//     webhook.TestConfigurationsDeployed).
//
// It may import tally's queues and flavors packages, the Kubernetes API
// machinery and controller-runtime's client package (for client.Object);
// webhook, ledger, ledger/inspect and main import it, queues and flavors
// never do.
package kinds
