package kinds

import (
	"strings"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StripJob is a cache transform that keeps only what the ledger reads of a
// Job: metadata (but the values of annotations not tally's, see
// stripMeta), parallelism, completions, suspend, the pod template's
// labels (their keys, and the values of tally's), annotations,
// scheduling fields, resource requests and claims, and the status
// conditions. Label and annotation maps, containers, affinities,
// tolerations and the spec's pointers to counts and modes equal to
// another Job's are that Job's (shared.go), so a stripped Job is
// read-only, as an informer's objects are: copy it before changing it.
// It cuts the informer's memory per Job several-fold.
// Writes never start from a cached Job: they are patches, so nothing
// stripped here can be lost. The JSON admission patch reads which of the
// objects it writes into exist (the ledger's jsonAdmission): those are all kept.
func StripJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	stripMeta(&job.ObjectMeta)
	spec := &job.Spec.Template.Spec
	kept := corev1.PodSpec{
		NodeSelector:      shareMap(spec.NodeSelector),
		Tolerations:       shareTolerations(spec.Tolerations),
		Affinity:          shareAffinity(spec.Affinity),
		PriorityClassName: spec.PriorityClassName,
		Priority:          sharePtr(&sharedInt32s, spec.Priority),
		Overhead:          spec.Overhead,
		Resources:         spec.Resources,
		ResourceClaims:    spec.ResourceClaims,
		Containers:        StripContainers(spec.Containers),
		InitContainers:    StripContainers(spec.InitContainers),
	}
	meta := job.Spec.Template.ObjectMeta
	// Of the template's labels, the ledger reads none but that there are
	// some (the admission patch adds its own to them); the Job controller
	// sets four per Job (its UID and name, twice). Its annotations are
	// the pod sets' topology requests.
	job.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Labels:      shareMap(interned(meta.Labels, func(k string) bool { return strings.HasPrefix(k, tallyPrefix) })),
		Annotations: shareMap(interned(meta.Annotations, func(string) bool { return true })),
	}, Spec: kept}
	job.Spec.Selector = nil
	job.Spec.PodFailurePolicy = nil
	job.Spec.SuccessPolicy = nil
	sharePointers(&job.Spec, &job.Status)
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		c.Message = ""
		c.Type = batchv1.JobConditionType(unique.Make(string(c.Type)).Value())
		c.Status = corev1.ConditionStatus(unique.Make(string(c.Status)).Value())
		c.Reason = unique.Make(c.Reason).Value()
	}
	job.Status.UncountedTerminatedPods = nil
	if Ended(job) {
		// Nothing of an ended Job's spec is read again, and it holds most of
		// what is left of it: of all the Jobs a cluster keeps, most have
		// ended. What is still read of it is kept: its counts, its
		// suspension and its pods' PriorityClass (which its metrics are
		// labelled with), that it started, and when it ended.
		job.Spec.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: job.Spec.Template.Spec.PriorityClassName}}
		job.Status = batchv1.JobStatus{StartTime: job.Status.StartTime, Conditions: endConditions(job.Status.Conditions)}
	}
	return job, nil
}

// sharePointers makes the pointers of spec and status to values that
// most Jobs share (counts, limits, modes, suspend) point to shared
// copies: each of its own takes 8 to 16 bytes a Job.
func sharePointers(spec *batchv1.JobSpec, status *batchv1.JobStatus) {
	for _, p := range []**int32{&spec.Parallelism, &spec.Completions, &spec.BackoffLimit, &spec.BackoffLimitPerIndex,
		&spec.MaxFailedIndexes, &spec.TTLSecondsAfterFinished, &status.Ready, &status.Terminating} {
		*p = sharePtr(&sharedInt32s, *p)
	}
	spec.ActiveDeadlineSeconds = sharePtr(&sharedInt64s, spec.ActiveDeadlineSeconds)
	spec.ManualSelector, spec.Suspend = sharePtr(&sharedBools, spec.ManualSelector), sharePtr(&sharedBools, spec.Suspend)
	spec.CompletionMode = sharePtr(&sharedModes, spec.CompletionMode)
	spec.PodReplacementPolicy = sharePtr(&sharedPolicies, spec.PodReplacementPolicy)
	spec.ManagedBy = sharePtr(&sharedStrings, spec.ManagedBy)
}

// Ended says whether job has ended with none of its pods left: it is
// Complete or Failed (which the Job controller says only once its pods
// have terminated) and counts no pod active, terminating or ready. A Job
// that has ended never runs again, so its template is never read again;
// and once it has ended, every later view of it has too, so a spec taken
// from the informer's store for a later event of the same generation
// (JobWatch) is what stripping that event would make of it.
func Ended(job *batchv1.Job) bool {
	st := &job.Status
	if st.Active > 0 || st.Terminating != nil && *st.Terminating > 0 || st.Ready != nil && *st.Ready > 0 {
		return false
	}
	for _, c := range st.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}

// endConditions keeps of conditions the true ones Job.Read reads, with
// their type, status and transition time.
func endConditions(conditions []batchv1.JobCondition) []batchv1.JobCondition {
	var out []batchv1.JobCondition
	for _, c := range conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobSuspended) {
			out = append(out, batchv1.JobCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

// stripMeta keeps of a workload's metadata what the ledger reads, each
// repeated string shared: its labels whole; its annotations' keys, but
// the values of tally's own only (tally.dev/, which no user may set), as
// it reads no other, and another's may be large (kubectl's
// last-applied-configuration holds the whole object); no managedFields.
// The keys stay: the JSON admission patch adds to the annotations the
// object has, and must not take them for none. Most of a Job's labels
// and annotations, keys and values alike, are the same on many Jobs,
// and the namespace on all of one namespace's: the strings are interned,
// and a map equal to another Job's is that one (shareMap).
func stripMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Namespace = unique.Make(m.Namespace).Value()
	m.Labels = shareMap(interned(m.Labels, func(string) bool { return true }))
	m.Annotations = shareMap(interned(m.Annotations, func(k string) bool { return strings.HasPrefix(k, tallyPrefix) }))
}

// interned is a copy of m with its keys shared, and the values of the
// keys keep says to keep shared too; the others are "".
func interned(m map[string]string, keep func(string) bool) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if keep(k) {
			v = unique.Make(v).Value()
		} else {
			v = ""
		}
		out[unique.Make(k).Value()] = v
	}
	return out
}

// tallyPrefix begins the keys of the labels and annotations tally
// writes.
const tallyPrefix = "tally.dev/"

// StripContainers keeps of each container its name, resources and restart
// policy: what the books read of it. Containers stripped already (no
// image, which the API server requires of every container it stores) are
// returned as they are: a watched Job's spec may be the stored one.
// Containers equal to ones stripped before are those (shareContainers).
func StripContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	if !hasImage(cs) {
		return cs
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, Resources: cs[i].Resources, RestartPolicy: cs[i].RestartPolicy}
	}
	return shareContainers(out)
}

func hasImage(cs []corev1.Container) bool {
	for i := range cs {
		if cs[i].Image != "" {
			return true
		}
	}
	return false
}
