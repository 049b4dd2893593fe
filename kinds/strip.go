package kinds

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StripJob is a cache transform that keeps only what the ledger reads of a
// Job: metadata, parallelism, completions, suspend, the pod template's
// labels, annotations, scheduling fields, resource requests and claims, and the
// status conditions. It cuts the informer's memory per Job several-fold.
// Writes never start from a cached Job: they are patches, so nothing
// stripped here can be lost. The JSON admission patch reads which of the
// objects it writes into exist (the ledger's jsonAdmission): those are all kept.
func StripJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	job.ManagedFields = nil
	spec := &job.Spec.Template.Spec
	kept := corev1.PodSpec{
		NodeSelector:      spec.NodeSelector,
		Tolerations:       spec.Tolerations,
		Affinity:          spec.Affinity,
		PriorityClassName: spec.PriorityClassName,
		Priority:          spec.Priority,
		Overhead:          spec.Overhead,
		Resources:         spec.Resources,
		ResourceClaims:    spec.ResourceClaims,
		Containers:        StripContainers(spec.Containers),
		InitContainers:    StripContainers(spec.InitContainers),
	}
	meta := job.Spec.Template.ObjectMeta
	job.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels, Annotations: meta.Annotations}, Spec: kept}
	job.Spec.Selector = nil
	job.Spec.PodFailurePolicy = nil
	job.Spec.SuccessPolicy = nil
	for i := range job.Status.Conditions {
		job.Status.Conditions[i].Message = ""
	}
	job.Status.UncountedTerminatedPods = nil
	return job, nil
}

// StripContainers keeps of each container its name, resources and restart
// policy: what the books read of it. Containers stripped already (no
// image, which the API server requires of every container it stores) are
// returned as they are: a watched Job's spec may be the stored one.
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
	return out
}

func hasImage(cs []corev1.Container) bool {
	for i := range cs {
		if cs[i].Image != "" {
			return true
		}
	}
	return false
}
