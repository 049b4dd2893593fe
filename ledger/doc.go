// Package ledger is tally's background controller. It keeps, from informer
// events, which workloads (Jobs, and every other kind of Options.Kinds
// the API server serves, read and written through the kinds seam; "Job"
// below stands for any of them) hold quota in which ClusterQueue and flavor, admits
// pending Jobs when quota frees, keeps the tally.dev/managed label on
// managed namespaces (annotated, or named by a LocalQueue of the config),
// and loads the config ConfigMap (declaring its WorkloadKinds). Books
// copies its books under its lock for the read-only dashboard, which
// package inspect builds and serves (Dashboard); package metrics keeps
// Kueue's metrics as the books change. modes.go holds the switches that
// trade writes away (the finished label, the Queued and Pending Events,
// the admission write's encoding); the defaults make every write below.
// Its Events, and the config's and the flavors', go through an EventQueue,
// which sends them as client-go's recorders do but drops an Event that
// finds its queue full before making it.
//
// # The rooms
//
// The Ledger (ledger.go) holds the jobs' entries, the namespaces and the
// config under its one lock, and beside them rooms, each a type that
// owns one kind of state and its invariants, does no I/O, holds no lock
// of its own, and uses nothing of the ledger's but the records it is
// given:
//
//	room                 file           state
//	books                books.go       pending trees, usage by queue and the cohorts' pools,
//	                                    the entries charged in each queue
//	podBook              podbook.go     the pods each workload counts, ready, unverified,
//	                                    gated or beyond its count; parts; ghosts
//	passCache            passcache.go   the queues changed since the last pass, pending
//	                     settled.go     lists and their settled ends, the pass's scratch
//	writer               writer.go      write slots, writes in flight, the client's budget,
//	                                    the pokes that ask for a pass, the work's lifetime
//	podInputs            podinputs.go   LimitRanges, RuntimeClasses, ResourceClaimTemplates,
//	                                    PriorityClasses, the pod defaults made of them
//	metrics.Metrics      metrics/       Kueue's metrics, per ClusterQueue and LocalQueue,
//	                                    and what they keep of each workload (metrics.Workload)
//	queues.FlavorDomains topology.go    the topologies' domains: nodes, bound pods (a second
//	                                    cache, BoundPods), the placements held; with device
//	                                    mappings, ResourceSlices, DeviceClasses, ResourceClaims
//	entry, write         entry.go       a workload's record beside its machine.Entry; a
//	                                    decided write
//	placement, pins      placement.go   where an entry's pod sets go in a topology, and
//	                                    the node labels that pins them to
//
// Who calls whom:
//
//	informers ──▶ onJob, onPod, on… (jobs.go, pods.go, defaults.go, labels.go, claims.go,
//	                 │                 topology.go: onNode, onBoundPod, onResourceSlice, onNodePool, …;
//	                 │                 a lost node's eviction)
//	                 │ read the object (machine.Observe), fold it (machine.React), or step
//	                 ▼
//	              step / foldLocked ──▶ apply (apply.go): the effects, in one place
//	                 │                    ├─▶ books.carry: trees, usage, holding; they note
//	                 │                    │   the changed queues in passCache
//	                 │                    ├─▶ writer (wake), Events (events.go), labels
//	                 │                    ├─▶ metrics.Note, followPlacement (the domains)
//	                 │                    └─▶ pods judged, ready timers (gated.go, podsready.go)
//	Start (start.go) ──▶ pass (admit.go): decide under the lock, on books and passCache,
//	                     queues.Decide ──▶ writer.writeAll ──▶ Ledger.write: admit,
//	                     capture, or evict (evict.go: a victim, a drained or requeued
//	                     workload) ──▶ step with the outcome
//
// New and Start (start.go) wire the rooms and the informers; nothing in
// the ledger calls back into them. go run ./hack/ledgermap measures the
// package: the Ledger's fields and methods, the strongly connected
// components of its files' uses, and the call walk from an informer
// event; its TestLedgerBounds keeps the Ledger to at most 30 fields and
// its files' components to at most 10, and the walks from onJob and
// apply from growing.
//
// # The state machine
//
// Each workload the ledger knows has an entry: a machine.Entry (its
// phase: pending, assumed, admitted, evicting, inadmissible, finished,
// unrecorded or capturing, with the diagram and the steps in package
// machine's documentation), and beside it what the ledger keeps of its
// object for its writes and its own bookkeeping of Events and metrics.
// One that has finished and holds nothing keeps only who its workload is
// (entry.forgetEnded) until it is labelled finished; a batch/v1 Job then
// leaves the watch (CacheOptions) and its entry goes, as on a delete.
// The machine decides; the ledger acts. What an informer shows is folded
// with machine.React (onJob, foldLocked); the ledger's own decisions and
// the outcomes of its writes are the machine's steps, each carried out by
// Ledger.step: Reject, Assume and Preempt in a pass (admit.go), Evict for
// a preemption's victims, EvictionFailed when its write fails (evict.go)
// and VictimGone when one has given its quota back, Rollback when an
// admission write fails, Requeue for a workload whose pods are larger
// (gated.go), not ready in time (podsready.go) or lost with a node
// (topology.go), each with its eviction write started by requeueLocked
// (evict.go), or drained by its stopped queue (evict.go), and
// RequeueFailed when its eviction write fails (evict.go), Grow and Shrink
// for one charged in place for larger pods (gated.go), Capture and Captured for a late capture (late.go), Forget
// when a workload is deleted and Rebuild when the pending trees are built
// again (jobs.go), Recheck when an evicted one's wait is over (apply.go,
// where its effect asks for it), Adopt for the ghost of a deleted
// workload whose pods are found running at start (pods.go). Every one of them returns the
// new entry and a closed set of effects, which Ledger.apply (apply.go)
// carries out in one place: no file of this package assigns a phase or
// a charge.
//
// A change in the count of a workload's live pods folds its last view
// again with the new count (pods.go). A pod counts for the workload its tally.dev/workload label names only when
// it is that workload's, by namespace and controller chain (the chain
// through the Jobs that are parts of it, see partOfQueuedLocked); a label
// is nobody's proof. A deleted workload whose pods still run is kept as a
// ghost that holds its quota until they are gone. Workloads are built with
// their namespace's LimitRange defaults and their RuntimeClass's overhead,
// as their pods get them (defaults.go), and charged the devices their
// pods' ResourceClaimTemplates ask for (claims.go); a waiting one is
// built again when one of these changes. An admission records the
// templates it charged (queues.AnnotationClaimTemplates). A gated pod that claims an
// admitted workload is one more than its count, and loses the gate when
// one of the workload's pods ends, or larger than the workload's pods:
// the workload is then charged the difference as its pod overhead, in
// place when its queue has room, else by an eviction after which it
// queues again at that size (gated.go). A running pod beyond the count an admitted workload was
// admitted with (two creates the pod gate judged at once) is deleted
// after a short grace, a pod once counted for it and since released by
// its controller included (gated.go). A single-pod workload (kinds.Pod) is admitted by taking its
// scheduling gate off and evicted by deleting it. inspect.Status folds
// each Job through machine.React too, from the entry its state label and
// flavors annotation describe (machine.FromLabels).
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
//     A pass decides, and reads, only the cohorts (and lone queues) with
//     a changed queue, on pending lists rebuilt only where a tree changed
//     (passcache.go); a config, priority, namespace-label change or a recount
//     has it decide every queue. Nor does it walk the end of a list that
//     waited in the pass before, for the same reason (settled.go).
//   - A pass decides no more writes than it can send at once: the free
//     write slots (Options.Workers) and the free tokens of the one client
//     budget all the ledger's writes share (budget.go). What it did not
//     reach stays changed for the next pass, and while passes want more
//     tokens than are free, the label writes wait. A write that patches
//     a workload is one HTTP request, past client-go's request machinery
//     but with its rate limiter, Retry-After and error kinds, and reads
//     back only the resourceVersion of the answer (patch.go).
//   - A watch the API server closes at once, having sent nothing, is
//     opened again from the same resource version (resume.go): client-go
//     would list every object again. The Jobs' watch reads its protobuf
//     frames itself, with no copy of an event before it is decoded,
//     leaves out the managedFields the informer would drop, and takes a
//     Job's spec from the informer's store when the event is of the
//     stored Job's UID and generation (jobwatch.go).
//   - Only the holder of the leader Lease writes. A leader that was paused
//     past its lease wakes up believing it still leads; with Options.Held
//     (Lease.Held) it decides no pass and sends no write once its last
//     renewal is as old as the renew deadline (fence.go).
//
// It may import tally's kinds, queues, queues/deviceclass, flavors,
// ledger/machine, ledger/metrics and ledger/inspect packages (machine.Observe reads a workload for the state
// machine, from the fields inspect.StatusOf copies out of a kinds.Object),
// the Kubernetes API machinery and controller-runtime; never webhook or
// main. Of its subpackages, metrics and inspect import only machine,
// and machine none of them.
package ledger
