// Package queues owns tally's configuration and its pure admission core.
//
// It parses and validates the config documents (ResourceFlavor, Topology,
// ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, tally's
// WorkloadKind, which declares a kind of workload by its suspend field and
// pod sets, and Kueue's own Configuration, of which waitForPodsReady and
// resources.deviceClassMappings are read) into a Config,
// describes workloads of any kind as Workloads through their pod templates,
// and decides, as pure functions of (Config, usage Snapshot, Workloads),
// which flavor a Workload gets, whether it fits, may borrow, or must wait,
// and why. Nothing here talks to an API server.
//
// A config is read in steps, a file each: yaml.go splits the YAML stream
// into documents, schema.go holds the documents' raw types, validate.go
// checks them, errors.go words decoding errors, and parse.go drives the
// steps and converts valid documents into the Config. workloadkind.go
// does all of this for the WorkloadKind document, and podsready.go for
// the Configuration document: it applies Kueue's waitForPodsReady
// defaults, warns by field path about every section tally does not read,
// and computes the requeue backoff (PodsReady.Backoff); dra.go reads its
// resources.deviceClassMappings and charges a pod's claims of devices
// from their ResourceClaimTemplates (PodDefaults.ClaimRequests). refused.go lists
// Kueue's fields and kinds tally does not run, which the parser refuses
// with why (docs/kueue-fields.md lists them all). stop.go decides what a
// ClusterQueue's or LocalQueue's stopPolicy holds and drains, priority.go
// resolves a workload's priority as Kueue does, and UsageOf (usageof.go)
// reads what an admitted workload holds from its flavors annotation,
// handing out one Usage for all that hold the same (Share, share.go, which
// also gives the workloads of one size one map of requests, and kinds
// the Jobs' stripped copies their shared values).
// cohort.go derives the tree that Cohort documents make (validatecohort.go
// checks them): each cohort's subtree quota, what it keeps and what it may
// reach; the Snapshot bubbles usage up the tree as it charges, Pools keep
// what it bubbled up between passes as usage changes, and reclaim walks
// it (see ancestryOf). fair.go computes fair-sharing shares, of
// ClusterQueues and of cohorts in a tree, and walks the tree by them.
// topology.go keeps a flavor's topology (the Topology document its
// TopologyName names, in Config.Topologies) as a tree of domains, node by
// node (Domains.SetNode, Use, RemoveNode), and places a pod set in it as
// Kueue's topology-aware scheduling does (Domains.Place, PlaceAll): the domains
// and pod counts, or which level does not hold it and its largest domain
// (Domains.Room says how much each level's top domains hold).
// topologytrees.go keeps those trees for a config (FlavorDomains) from
// the nodes, the pods bound to them and the placements held, and
// topologydevices.go adds the nodes' devices of Dynamic Resource
// Allocation: those of mapped DeviceClasses in the nodes' ResourceSlices,
// less those ResourceClaims are allocated; whether a class selects a
// device is a DeviceSelector's answer (its subpackage deviceclass
// evaluates the class's CEL; this package does not import it).
//
// It may import tally's flavors package, the standard library, the
// Kubernetes API types and machinery, k8s.io/component-helpers and the
// sigs.k8s.io yaml and json decoders; kinds, webhook, ledger and main
// import it.
package queues
