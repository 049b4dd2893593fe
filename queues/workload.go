package queues

import (
	"maps"
	"slices"
	"strconv"
	"time"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"tally.dev/tally/flavors"
)

// MainPodSet is the name of a batch/v1 Job's only pod set.
const MainPodSet = "main"

// Workload is what the admission core knows of one Job: who it is, where it
// queues, how much it needs and where its pods may run.
type Workload struct {
	// APIVersion and Kind name the workload's kind ("" for a batch/v1
	// Job).
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
	Queue      string
	// LocalQueue is the LocalQueue of its namespace it was submitted to,
	// by its kueue.x-k8s.io/queue-name label; "" for none.
	LocalQueue string
	Priority   int32
	Created    time.Time
	// Evicted is when it was last evicted because its pods were not
	// ready in time (waitForPodsReady), while that eviction is its
	// latest: see PodsReadyEvictedAt. Zero otherwise.
	Evicted time.Time
	// ByCreation orders it by Created even when Evicted is set:
	// requeuingStrategy.timestamp is Creation (see PodsReady.Order).
	ByCreation bool
	PodSets    []PodSet
	// NodeSelector, NodeAffinity and Tolerations say where the pods may
	// run: the pod template's nodeSelector and tolerations, and the terms
	// of the Job's own required node affinity (ORed). A flavor whose
	// node labels they rule out, or whose taints they do not tolerate,
	// is skipped. They are shared with the Job, or with other Workloads,
	// and must not be modified.
	NodeSelector map[string]string
	NodeAffinity []corev1.NodeSelectorTerm
	Tolerations  []corev1.Toleration
	// More holds, for a workload whose pod sets differ in where their
	// pods may run, the constraints of each other pod set (as sealed
	// Workloads of their own): a flavor must suit every one.
	More []*Workload
	// ClaimTemplates names the ResourceClaimTemplates its pods' claims
	// were charged from, with their UIDs, as AnnotationClaimTemplates
	// records them; "" when they claim nothing.
	ClaimTemplates string
	// Unresolved, when not empty, says why the workload's pod sets could
	// not be read (an object it names does not exist): it cannot be
	// admitted until they can, and Eligible says so.
	Unresolved string
	// Tag is the caller's own record of the Workload; the core never
	// reads it.
	Tag any

	total  flavors.Resources     // set by Seal
	vec    []cell                // total as a slice sorted by name, set by Seal
	names  []corev1.ResourceName // total's names, sorted, set by Seal
	queued int64                 // QueueTime in Unix nanoseconds, set by Seal
	// place is what NodeSelector and NodeAffinity allow, shared by the
	// Workloads that ask the same; set by Seal, nil when they ask nothing.
	place *placement
}

type cell struct {
	name   corev1.ResourceName
	amount flavors.Amount
}

// PodSet is a group of identical pods that are admitted together.
type PodSet struct {
	Name  string
	Count int64
	// Autoscaled is how many of the Count pods only an autoscaler starts
	// (see PodTemplate): the quota covers Count, waitForPodsReady waits
	// for the others.
	Autoscaled int64
	Requests   flavors.Resources // per pod
	// Uncharged is, per pod, what the pods' controller adds beyond
	// Requests in resources the workload's queue does not cover (see
	// PodDefaults.Uncharged): its pods may ask that much more, and it is
	// not charged. Usually nil.
	Uncharged flavors.Resources
	// Topology is where in a flavor's topology its pods ask to go (nil:
	// unconstrained, on a flavor that has one), and Group the pod sets
	// placed with it (podset-group-name); see TopologyRequestOf.
	Topology *TopologyRequest
	Group    string
}

// plain reports whether w may run on every flavor its taints allow: no
// nodeSelector, required node affinity or tolerations of its own narrow
// them. Decide compares the requests of sealed plain Workloads only, as
// only they compete for the same flavors.
func (w *Workload) plain() bool {
	return len(w.NodeSelector) == 0 && len(w.NodeAffinity) == 0 && len(w.Tolerations) == 0 && len(w.More) == 0 && w.vec != nil
}

// KindName names w's kind for messages: "Job" for a batch/v1 Job.
func (w *Workload) KindName() string {
	if w.Kind == "" {
		return "Job"
	}
	return w.Kind
}

// Ended returns a sealed copy of w that keeps who it is (its kind,
// name, UID, queues, priority and times) and none of what it asks for:
// what is kept of a workload that has ended and holds nothing, which is
// never decided on again.
func (w *Workload) Ended() *Workload {
	return (&Workload{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID,
		Queue: w.Queue, LocalQueue: w.LocalQueue, Priority: w.Priority, Created: w.Created, Evicted: w.Evicted,
		ByCreation: w.ByCreation, Tag: w.Tag}).Seal()
}

// Key returns "namespace/name".
func (w *Workload) Key() string { return w.Namespace + "/" + w.Name }

// Seal computes the Workload's totals once, after which Total is free and
// the Workload must not change. WorkloadFromJob seals what it builds.
func (w *Workload) Seal() *Workload {
	w.total = shareResources(w.sum())
	w.vec = make([]cell, 0, len(w.total))
	w.names = w.total.Names()
	for i, n := range w.names {
		w.names[i] = intern(n)
		w.vec = append(w.vec, cell{w.names[i], w.total[n]})
	}
	w.queued = w.QueueTime().UnixNano()
	w.Queue, w.Namespace = intern(w.Queue), intern(w.Namespace)
	if w.place == nil && (len(w.NodeSelector) > 0 || len(w.NodeAffinity) > 0) {
		w.place, _ = placementOf(w.NodeSelector, EncodeUserTerms(w.NodeAffinity), w.NodeAffinity)
	}
	return w
}

// intern returns the one shared copy of s. A pass compares the queue,
// namespace and resource names of thousands of Workloads, and looks them
// up in the config's maps, whose names are interned too: equal strings
// that share their bytes compare without reading them.
func intern[S ~string](s S) S { return unique.Make(s).Value() }

// resourceNames returns the names of what the Workload requests, sorted.
// The result must not be modified.
func (w *Workload) resourceNames() []corev1.ResourceName {
	if w.total != nil {
		return w.names
	}
	return w.sum().Names()
}

// Total returns the Workload's requests summed over its pod sets. The
// result must not be modified.
func (w *Workload) Total() flavors.Resources {
	if w.total != nil {
		return w.total
	}
	return w.sum()
}

func (w *Workload) sum() flavors.Resources {
	total := flavors.Resources{}
	for _, ps := range w.PodSets {
		for r, a := range ps.Requests {
			total[r] = total[r].Add(a.Mul(ps.Count))
		}
	}
	return total
}

// PodTemplate is one pod set of a workload as its kind describes it: a
// name, a pod count and the pod spec. Autoscaled is how many of the Count
// pods the workload's controller does not start but an autoscaler may
// add (0: it starts them all).
type PodTemplate struct {
	Name       string
	Count      int64
	Autoscaled int64
	Spec       *corev1.PodSpec
	// Uncharged becomes the pod set's PodSet.Uncharged.
	Uncharged flavors.Resources
	// Claims is what each pod is charged for the devices of its resource
	// claims (PodDefaults.ClaimRequests), beyond what Spec requests.
	Claims flavors.Resources
	// Topology and Group become the pod set's (TopologyRequestOf).
	Topology *TopologyRequest
	Group    string
}

// JobCount is how many pods of a Job run at once: parallelism (default
// 1), capped by completions.
func JobCount(job *batchv1.Job) int64 {
	count := int64(1)
	if job.Spec.Parallelism != nil {
		count = int64(*job.Spec.Parallelism)
	}
	if job.Spec.Completions != nil && int64(*job.Spec.Completions) < count {
		count = int64(*job.Spec.Completions)
	}
	return max(count, 0)
}

// PodSetsFromJob describes a Job's pods: its one pod set.
func PodSetsFromJob(job *batchv1.Job) []PodSet {
	return podSets([]PodTemplate{{Name: MainPodSet, Count: JobCount(job), Spec: &job.Spec.Template.Spec}})
}

// podSets describes each pod set with the effective pod requests, init
// containers, sidecars and overhead included, as the scheduler computes
// them.
func podSets(sets []PodTemplate) []PodSet {
	out := make([]PodSet, 0, len(sets))
	for _, t := range sets {
		count := max(t.Count, 0)
		out = append(out, PodSet{Name: t.Name, Count: count, Autoscaled: min(max(t.Autoscaled, 0), count), Requests: shareResources(WithClaims(PodRequests(t.Spec), t.Claims)), Uncharged: t.Uncharged,
			Topology: t.Topology, Group: t.Group})
	}
	return out
}

// shareResources is r, or an equal map handed out before: the pod sets'
// requests and the totals of workloads of one size are one map, which no
// one changes (a Workload is sealed).
func shareResources(r flavors.Resources) flavors.Resources {
	if len(r) == 0 {
		return r
	}
	// The key, the names in order with their amounts, is built on the
	// stack for the few resources a pod asks for: an event of a Job
	// whose requests are shared already allocates nothing here.
	var nameBuf [8]corev1.ResourceName
	names := r.AppendNames(nameBuf[:0])
	var keyBuf [256]byte
	key := keyBuf[:0]
	for _, n := range names {
		key = append(key, n...)
		key = append(key, 0)
		key = strconv.AppendInt(key, int64(r[n]), 10)
		key = append(key, 0)
	}
	return ofBytes(&sharedResources, key, r)
}

// sharedResources holds the maps shareResources hands out.
var sharedResources Share[string, flavors.Resources]

// PodRequests is what one pod of spec requests, as the scheduler computes
// it (init containers, sidecars, overhead and pod-level resources
// included), without the resources that it requests none of. A container's (and
// the pod's own) limit stands for its request of a resource it requests
// nothing of, as the API server defaults a pod's requests from its limits
// (pod templates are not defaulted so): a GPU is usually asked as a limit
// only. A pod of one container, with no init containers, overhead or
// pod-level resources, requests what its container does: that, the common
// case, is read directly, without building the pod and the resource lists
// that the general rule sums.
func PodRequests(spec *corev1.PodSpec) flavors.Resources {
	var reqs flavors.Resources
	if len(spec.Containers) == 1 && len(spec.InitContainers) == 0 && spec.Overhead == nil && spec.Resources == nil {
		c := &spec.Containers[0].Resources
		reqs = flavors.FromList(c.Requests)
		for n, q := range c.Limits {
			if _, ok := c.Requests[n]; !ok {
				reqs[n] = flavors.FromQuantity(n, q)
			}
		}
	} else {
		reqs = flavors.FromList(resourcehelper.PodRequests(&corev1.Pod{Spec: *limitsAsRequests(spec)}, resourcehelper.PodResourcesOptions{}))
	}
	maps.DeleteFunc(reqs, func(_ corev1.ResourceName, a flavors.Amount) bool { return a == 0 })
	return reqs
}

// WithClaims returns reqs, what a pod requests, with what it is charged
// for the devices of its claims added (see PodDefaults.ClaimRequests); reqs
// itself, changed, when reqs is not nil.
func WithClaims(reqs, claims flavors.Resources) flavors.Resources {
	if len(claims) == 0 {
		return reqs
	}
	if reqs == nil {
		reqs = flavors.Resources{}
	}
	for r, a := range claims {
		reqs[r] = reqs[r].Add(a)
	}
	return reqs
}

// limitsAsRequests returns spec, or a copy of it whose containers and pod
// resources request what they limit where they request nothing.
func limitsAsRequests(spec *corev1.PodSpec) *corev1.PodSpec {
	missing := func(r *corev1.ResourceRequirements) bool {
		for n := range r.Limits {
			if _, ok := r.Requests[n]; !ok {
				return true
			}
		}
		return false
	}
	fill := func(r *corev1.ResourceRequirements) {
		reqs := r.Requests.DeepCopy()
		if reqs == nil {
			reqs = corev1.ResourceList{}
		}
		for n, q := range r.Limits {
			if _, ok := reqs[n]; !ok {
				reqs[n] = q
			}
		}
		r.Requests = reqs
	}
	needed := spec.Resources != nil && missing(spec.Resources)
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			needed = needed || missing(&cs[i].Resources)
		}
	}
	if !needed {
		return spec
	}
	out := *spec
	if spec.Resources != nil {
		r := *spec.Resources
		fill(&r)
		out.Resources = &r
	}
	for _, cs := range []*[]corev1.Container{&out.InitContainers, &out.Containers} {
		cp := slices.Clone(*cs)
		for i := range cp {
			fill(&cp[i].Resources)
		}
		*cs = cp
	}
	return &out
}

// WorkloadFromJob builds the Workload of a Job that queues in queue with the
// given priority (see NewWorkload).
func WorkloadFromJob(job *batchv1.Job, queue string, priority int32) *Workload {
	return NewWorkload(&job.ObjectMeta, "", "", []PodTemplate{{Name: MainPodSet, Count: JobCount(job), Spec: &job.Spec.Template.Spec}}, queue, priority)
}

// NewWorkload builds the Workload of a workload object of kind
// apiVersion/kind ("" for a batch/v1 Job) with pod sets sets, that queues
// in queue with the given priority.
//
// Its NodeAffinity is each pod set's own required terms. Once the webhook
// has queued the workload, the pod templates require the candidate
// flavors' nodes instead, and the pod sets' own terms are in the
// AnnotationUserAffinity annotation (see PodSetTerms); before that (or for
// a workload tally never mutated), they are the pod templates'. An
// annotation that does not parse leaves the pod templates' terms, which
// the pods obey in any case.
func NewWorkload(meta *metav1.ObjectMeta, apiVersion, kind string, sets []PodTemplate, queue string, priority int32) *Workload {
	w := &Workload{
		APIVersion: intern(apiVersion),
		Kind:       intern(kind),
		Namespace:  meta.Namespace,
		Name:       meta.Name,
		UID:        meta.UID,
		Queue:      queue,
		LocalQueue: meta.Labels[LabelKueueQueueName],
		Priority:   priority,
		Created:    meta.CreationTimestamp.Time,
		Evicted:    PodsReadyEvictedAt(meta),
		PodSets:    podSets(sets),
	}
	ann, annotated := meta.Annotations[AnnotationUserAffinity]
	for i, t := range sets {
		c := w
		if i > 0 {
			c = &Workload{}
		}
		c.NodeSelector, c.Tolerations = t.Spec.NodeSelector, t.Spec.Tolerations
		decoded := false
		if annotated {
			if enc, err := PodSetTerms(ann, t.Name); err == nil {
				if p, err := placementOf(t.Spec.NodeSelector, enc, nil); err == nil {
					c.place, decoded = p, true
					if p != nil {
						c.NodeAffinity = p.aff.Terms
					}
				}
			}
		}
		if !decoded {
			c.NodeAffinity = RequiredTerms(t.Spec)
		}
		if i > 0 && !c.sameConstraints(w) {
			w.More = append(w.More, c.Seal())
		}
	}
	return w.Seal()
}

// sameConstraints says whether w and o ask the same of where their pods
// run.
func (w *Workload) sameConstraints(o *Workload) bool {
	return equality.Semantic.DeepEqual(w.NodeSelector, o.NodeSelector) &&
		equality.Semantic.DeepEqual(w.NodeAffinity, o.NodeAffinity) &&
		equality.Semantic.DeepEqual(w.Tolerations, o.Tolerations)
}

// QueueTime is the time w is ordered by in its queue, after its priority
// (Kueue's queue-order timestamp): the time of its eviction for pods not
// ready in time when Evicted is set and ByCreation is not, else its
// creation.
func (w *Workload) QueueTime() time.Time {
	if w.Evicted.IsZero() || w.ByCreation {
		return w.Created
	}
	return w.Evicted
}

// queueKey is QueueTime in Unix nanoseconds: sealed, or computed.
func (w *Workload) queueKey() int64 {
	if w.total != nil {
		return w.queued
	}
	return w.QueueTime().UnixNano()
}

// Before is the admission order: higher priority first, then earlier by
// QueueTime (its creation, or its eviction for pods not ready in time),
// then by UID so the order is total.
func Before(a, b *Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	ca, cb := a.queued, b.queued
	if a.total == nil || b.total == nil {
		ca, cb = a.queueKey(), b.queueKey()
	}
	if ca != cb {
		return ca < cb
	}
	return a.UID < b.UID
}
