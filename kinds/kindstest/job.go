package kindstest

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// JobBuilder builds a batch/v1 Job.
type JobBuilder struct{ job *batchv1.Job }

// Job starts a Job of namespace ns named name.
func Job(ns, name string) *JobBuilder {
	return &JobBuilder{&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

// Obj returns the Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job }

// TypeMeta sets the Job's apiVersion and kind, as in a request's JSON.
func (b *JobBuilder) TypeMeta() *JobBuilder {
	b.job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	return b
}

// UID sets the Job's UID.
func (b *JobBuilder) UID(uid string) *JobBuilder { b.job.UID = types.UID(uid); return b }

// ResourceVersion sets the Job's resourceVersion.
func (b *JobBuilder) ResourceVersion(rv string) *JobBuilder { b.job.ResourceVersion = rv; return b }

// Generation sets the Job's generation.
func (b *JobBuilder) Generation(g int64) *JobBuilder { b.job.Generation = g; return b }

// Created sets the Job's creationTimestamp.
func (b *JobBuilder) Created(t time.Time) *JobBuilder {
	b.job.CreationTimestamp = metav1.NewTime(t)
	return b
}

// Label sets a label.
func (b *JobBuilder) Label(key, value string) *JobBuilder {
	if b.job.Labels == nil {
		b.job.Labels = map[string]string{}
	}
	b.job.Labels[key] = value
	return b
}

// Annotation sets an annotation.
func (b *JobBuilder) Annotation(key, value string) *JobBuilder {
	if b.job.Annotations == nil {
		b.job.Annotations = map[string]string{}
	}
	b.job.Annotations[key] = value
	return b
}

// ControlledBy adds a controller owner reference.
func (b *JobBuilder) ControlledBy(apiVersion, kind, name string, uid types.UID) *JobBuilder {
	b.job.OwnerReferences = append(b.job.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)})
	return b
}

// Suspend sets spec.suspend.
func (b *JobBuilder) Suspend(s bool) *JobBuilder { b.job.Spec.Suspend = ptr.To(s); return b }

// Parallelism sets spec.parallelism.
func (b *JobBuilder) Parallelism(n int32) *JobBuilder { b.job.Spec.Parallelism = ptr.To(n); return b }

// Completions sets spec.completions.
func (b *JobBuilder) Completions(n int32) *JobBuilder { b.job.Spec.Completions = ptr.To(n); return b }

// RestartPolicy sets the pod template's restartPolicy.
func (b *JobBuilder) RestartPolicy(p corev1.RestartPolicy) *JobBuilder {
	b.job.Spec.Template.Spec.RestartPolicy = p
	return b
}

// Image sets the image of the pod template's container "c", which it
// adds if there is none.
func (b *JobBuilder) Image(image string) *JobBuilder {
	b.container().Image = image
	return b
}

// Request sets a request of the pod template's container "c", which it
// adds if there is none.
func (b *JobBuilder) Request(name corev1.ResourceName, quantity string) *JobBuilder {
	c := b.container()
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[name] = resource.MustParse(quantity)
	return b
}

// container is the pod template's first container, added as "c" when
// there is none.
func (b *JobBuilder) container() *corev1.Container {
	spec := &b.job.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		spec.Containers = []corev1.Container{{Name: "c"}}
	}
	return &spec.Containers[0]
}
