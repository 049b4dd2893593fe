package queues

import (
	"time"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"tally.dev/tally/flavors"
)

// MainPodSet is the name of a batch/v1 Job's only pod set.
const MainPodSet = "main"

// Workload is what the admission core knows of one Job: who it is, where it
// queues, how much it needs and where its pods may run.
type Workload struct {
	Namespace string
	Name      string
	UID       types.UID
	Queue     string
	Priority  int32
	Created   time.Time
	PodSets   []PodSet
	// NodeSelector, NodeAffinity and Tolerations say where the pods may
	// run: the pod template's nodeSelector and tolerations, and the terms
	// of the Job's own required node affinity (ORed). A flavor whose
	// node labels they rule out, or whose taints they do not tolerate,
	// is skipped. They are shared with the Job, or with other Workloads,
	// and must not be modified.
	NodeSelector map[string]string
	NodeAffinity []corev1.NodeSelectorTerm
	Tolerations  []corev1.Toleration
	// Tag is the caller's own record of the Workload; the core never
	// reads it.
	Tag any

	total   flavors.Resources // set by Seal
	vec     []cell            // total as a slice sorted by name, set by Seal
	created int64             // Created in Unix nanoseconds, set by Seal
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
	Name     string
	Count    int64
	Requests flavors.Resources // per pod
}

// plain reports whether w may run on every flavor its taints allow: no
// nodeSelector, required node affinity or tolerations of its own narrow
// them. Decide compares the requests of sealed plain Workloads only, as
// only they compete for the same flavors.
func (w *Workload) plain() bool {
	return len(w.NodeSelector) == 0 && len(w.NodeAffinity) == 0 && len(w.Tolerations) == 0 && w.vec != nil
}

// Key returns "namespace/name".
func (w *Workload) Key() string { return w.Namespace + "/" + w.Name }

// Seal computes the Workload's totals once, after which Total is free and
// the Workload must not change. WorkloadFromJob seals what it builds.
func (w *Workload) Seal() *Workload {
	w.total = w.sum()
	w.vec = make([]cell, 0, len(w.total))
	for _, n := range w.total.Names() {
		w.vec = append(w.vec, cell{intern(n), w.total[n]})
	}
	w.created = w.Created.UnixNano()
	w.Queue, w.Namespace = intern(w.Queue), intern(w.Namespace)
	if w.place == nil && (len(w.NodeSelector) > 0 || len(w.NodeAffinity) > 0) {
		w.place, _ = placementOf(w.NodeSelector, EncodeUserTerms(w.NodeAffinity), w.NodeAffinity)
	}
	return w
}

// intern returns the one shared copy of s. A pass compares the queue,
// namespace and resource names of thousands of Workloads; equal strings
// that share their bytes compare without reading them.
func intern[S ~string](s S) S { return unique.Make(s).Value() }

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

// PodSetsFromJob describes a Job's pods: parallelism pods (capped by
// completions) with the effective pod requests, init containers, sidecars
// and overhead included, as the scheduler computes them.
func PodSetsFromJob(job *batchv1.Job) []PodSet {
	count := int64(1)
	if job.Spec.Parallelism != nil {
		count = int64(*job.Spec.Parallelism)
	}
	if job.Spec.Completions != nil && int64(*job.Spec.Completions) < count {
		count = int64(*job.Spec.Completions)
	}
	if count < 0 {
		count = 0
	}
	pod := &corev1.Pod{Spec: job.Spec.Template.Spec}
	reqs := flavors.FromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	for r, a := range reqs {
		if a == 0 {
			delete(reqs, r)
		}
	}
	return []PodSet{{Name: MainPodSet, Count: count, Requests: reqs}}
}

// WorkloadFromJob builds the Workload of a Job that queues in queue with the
// given priority.
//
// Its NodeAffinity is the Job's own required terms. Once the webhook has
// queued the Job, the pod template requires the candidate flavors' nodes
// instead, and the Job's own terms are in the AnnotationUserAffinity
// annotation ("" for none); before that (or for a Job tally never
// mutated), they are the pod template's. An annotation that does not parse
// leaves the pod template's terms, which the pods obey in any case.
func WorkloadFromJob(job *batchv1.Job, queue string, priority int32) *Workload {
	spec := &job.Spec.Template.Spec
	w := &Workload{
		Namespace:    job.Namespace,
		Name:         job.Name,
		UID:          job.UID,
		Queue:        queue,
		Priority:     priority,
		Created:      job.CreationTimestamp.Time,
		PodSets:      PodSetsFromJob(job),
		NodeSelector: spec.NodeSelector,
		Tolerations:  spec.Tolerations,
	}
	decoded := false
	if enc, ok := job.Annotations[AnnotationUserAffinity]; ok {
		if p, err := placementOf(spec.NodeSelector, enc, nil); err == nil {
			w.place, decoded = p, true
			if p != nil {
				w.NodeAffinity = p.aff.Terms
			}
		}
	}
	if !decoded {
		w.NodeAffinity = RequiredTerms(spec)
	}
	return w.Seal()
}

// Before is the admission order: higher priority first, then older, then
// by UID so the order is total.
func Before(a, b *Workload) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	ca, cb := a.created, b.created
	if a.total == nil || b.total == nil {
		ca, cb = a.Created.UnixNano(), b.Created.UnixNano()
	}
	if ca != cb {
		return ca < cb
	}
	return a.UID < b.UID
}
