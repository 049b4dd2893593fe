package queues

// The labels and annotations tally reads and writes: the contract with users
// and their tools (docs/kinds.md, "What tally writes on a Job").
const (
	// AnnotationNamespaceQueue on a Namespace binds it to a ClusterQueue.
	AnnotationNamespaceQueue = "tally.dev/cluster-queue"
	// LabelManaged marks the namespaces the Job webhook handles.
	LabelManaged = "tally.dev/managed"

	// LabelState is a Job's state: one of the State values.
	LabelState = "tally.dev/state"
	// LabelQueue is a Job's ClusterQueue.
	LabelQueue = "tally.dev/cluster-queue"
	// LabelPriorityClass names a WorkloadPriorityClass.
	LabelPriorityClass = "tally.dev/priority-class"
	// LabelKueueQueueName is Kueue's LocalQueue label, resolved through
	// LocalQueue documents.
	LabelKueueQueueName = "kueue.x-k8s.io/queue-name"
	// LabelKueuePriorityClass is Kueue's WorkloadPriorityClass label.
	LabelKueuePriorityClass = "kueue.x-k8s.io/priority-class"
	// LabelWorkload, set on every pod template at admission, is the
	// workload's UID: its pods carry it, and the workload holds its quota
	// until the last of them is gone.
	LabelWorkload = "tally.dev/workload"
	// LabelPodSet, on the pod templates of a workload placed in a
	// topology, names their pod set: the pod gate gives each pod of a pod
	// set spread over several domains its own (TopologyAssignment.NextLeaf).
	LabelPodSet = "tally.dev/podset"
	// PodWorkload is the LabelWorkload of a pod that tally queues on its
	// own (a single-pod workload) until its admission, which sets the
	// label to the pod's own UID.
	PodWorkload = "pod"
	// SchedulingGate holds a single-pod workload until tally admits it.
	SchedulingGate = "tally.dev/admission"
	// AnnotationPodOverhead, on a workload, is what each of its pods asks
	// for beyond its pod template (a container another admission webhook
	// adds), as "cpu=100m,memory=64Mi": tally learns it from the first
	// pod larger than its pod set and charges every pod for it.
	AnnotationPodOverhead = "tally.dev/pod-overhead"

	// AnnotationFlavors maps each pod set to its flavor: "main=gpu".
	AnnotationFlavors = "tally.dev/flavors"
	// AnnotationTopology records where an admission placed each pod set
	// in its flavor's topology (Assignment.TopologyAnnotation).
	AnnotationTopology = "tally.dev/topology"
	// AnnotationPodQueue, on the pod templates of an admitted workload
	// (with AnnotationFlavors), names the ClusterQueue its pods count in.
	AnnotationPodQueue = "tally.dev/cluster-queue"
	// AnnotationAdmittedAt is the RFC 3339 time of admission.
	AnnotationAdmittedAt = "tally.dev/admitted-at"
	// AnnotationClaimTemplates records, on an admitted workload whose
	// pods claim devices, the ResourceClaimTemplates it was charged from:
	// "name=uid,..." (Workload.ClaimTemplates). The pod gate denies a pod
	// that names one of them that was replaced since.
	AnnotationClaimTemplates = "tally.dev/claim-templates"
	// AnnotationRequeues counts a workload's evictions for pods that were
	// not ready in time (waitForPodsReady), and AnnotationRequeueAt is
	// the RFC 3339 time before which it is not admitted again (its
	// backoff). AnnotationEvictedAt is the RFC 3339 time of that
	// eviction: the time the workload is ordered by in its queue, under
	// requeuingStrategy.timestamp Eviction, until it is admitted again
	// (see PodsReadyEvictedAt). All three are written with the eviction.
	AnnotationRequeues  = "tally.dev/requeues"
	AnnotationRequeueAt = "tally.dev/requeue-at"
	AnnotationEvictedAt = "tally.dev/evicted-at"
	// AnnotationUserAffinity keeps the Job's own required node affinity
	// terms (JSON), so admission and preemption can rebuild the flavor
	// affinity around them. Absent when the Job had none.
	AnnotationUserAffinity = "tally.dev/user-affinity"

	// FieldManagerAdmission, FieldManagerPreemption and FieldManagerState
	// name tally's writes to the API (the fieldManager of each request):
	// admissions (and captures of Jobs that run unrecorded), preemptions,
	// and the state and managed labels.
	FieldManagerAdmission  = "tally-admission"
	FieldManagerPreemption = "tally-preemption"
	FieldManagerState      = "tally-state"

	// ConfigName is the name of the config ConfigMap in tally's
	// namespace; ConfigKey its key that holds the config documents.
	ConfigName = "tally-config"
	ConfigKey  = "queues.yaml"
)

// State is the value of LabelState.
type State string

// The Job states.
const (
	StatePending      State = "pending"
	StateAdmitted     State = "admitted"
	StateInadmissible State = "inadmissible"
	StateFinished     State = "finished"
)

// DefaultLocalQueue is the LocalQueue a workload that names none goes to,
// in a namespace bound by LocalQueues alone, as in Kueue.
const DefaultLocalQueue = "default"

// Managed says whether a namespace is managed, and so carries LabelManaged:
// when it has the binding annotation (annotation is its value), or when a
// LocalQueue of the config names it. kube-system and tally's own namespace
// (own) never are. cfg may be nil before any config has loaded.
func Managed(cfg *Config, name, annotation, own string) bool {
	if name == "kube-system" || name == own {
		return false
	}
	return annotation != "" || len(cfg.LocalQueuesIn(name)) > 0
}

// WantsManagedLabel says whether a namespace that carries LabelManaged or
// not (has) should carry it: when it is Managed, except that before any
// config has loaded a label is never removed, since LocalQueues the
// namespace cannot see yet may name it.
func WantsManagedLabel(cfg *Config, name, annotation, own string, has bool) bool {
	if Managed(cfg, name, annotation, own) {
		return true
	}
	return cfg == nil && has
}
