package framework

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobBuilder makes plain batch/v1 Jobs, as a user would submit them.
type JobBuilder struct{ job *batchv1.Job }

// NewJob starts a one-pod Job that requests 100m CPU and runs for the
// simulated nodes' default time.
func NewJob(ns, name string) *JobBuilder {
	return &JobBuilder{job: &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "main",
						Image: "registry.example/e2e:v1",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
						},
					}},
				},
			},
		},
	}}
}

// Request sets a per-pod request (and the limit too, for extended
// resources such as nvidia.com/gpu, which need one).
func (b *JobBuilder) Request(name, quantity string) *JobBuilder {
	c := &b.job.Spec.Template.Spec.Containers[0]
	q := resource.MustParse(quantity)
	c.Resources.Requests[corev1.ResourceName(name)] = q
	if name == ResourceGPU {
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[corev1.ResourceName(name)] = q
	}
	return b
}

// GPUs requests n GPUs per pod.
func (b *JobBuilder) GPUs(n int) *JobBuilder {
	return b.Request(ResourceGPU, resource.NewQuantity(int64(n), resource.DecimalSI).String())
}

// Runtime sets how long each pod runs on the simulated nodes.
func (b *JobBuilder) Runtime(d time.Duration) *JobBuilder {
	if b.job.Spec.Template.Annotations == nil {
		b.job.Spec.Template.Annotations = map[string]string{}
	}
	b.job.Spec.Template.Annotations[AnnotationRuntime] = d.String()
	return b
}

// Parallelism runs n pods at once, n completions in all.
func (b *JobBuilder) Parallelism(n int32) *JobBuilder {
	b.job.Spec.Parallelism, b.job.Spec.Completions = &n, &n
	return b
}

// Label sets a label on the Job.
func (b *JobBuilder) Label(k, v string) *JobBuilder {
	if b.job.Labels == nil {
		b.job.Labels = map[string]string{}
	}
	b.job.Labels[k] = v
	return b
}

// Obj returns the Job.
func (b *JobBuilder) Obj() *batchv1.Job { return b.job.DeepCopy() }

// Suspended is spec.suspend == true.
func Suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

// Finished says whether the Job has the Complete or Failed condition.
func Finished(j *batchv1.Job) bool { return Completed(j) || hasCondition(j, batchv1.JobFailed) }

// Completed says whether the Job has the Complete condition.
func Completed(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete) }

func hasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// GPUsOf is what the Job's running pods request in GPUs: parallelism times
// the per-pod request (containers summed, init containers at their max).
func GPUsOf(j *batchv1.Job) int64 {
	return PodRequest(&j.Spec.Template.Spec, ResourceGPU) * int64(ptrOr(j.Spec.Parallelism, 1))
}

// PodRequest is one pod's effective request of a resource. A container's
// limit stands for a request it does not make, as the API server defaults
// a pod's requests (a pod template's are not defaulted).
func PodRequest(spec *corev1.PodSpec, name corev1.ResourceName) int64 {
	var sum, initMax int64
	for _, c := range spec.Containers {
		sum += containerRequest(c, name)
	}
	for _, c := range spec.InitContainers {
		initMax = max(initMax, containerRequest(c, name))
	}
	// The pod overhead (its RuntimeClass's) counts on top, as the
	// scheduler counts it.
	over := spec.Overhead[name]
	return max(sum, initMax) + over.Value()
}

// containerRequest is what c requests of a resource: its request, else
// its limit.
func containerRequest(c corev1.Container, name corev1.ResourceName) int64 {
	q, ok := c.Resources.Requests[name]
	if !ok {
		q = c.Resources.Limits[name]
	}
	return q.Value()
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
