package kinds

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// Job is batch/v1 Job: one pod set, "main", of parallelism pods (capped by
// completions); suspended by spec.suspend; finished when Complete or
// Failed. It is read typed, so the ledger's cache can strip it (see
// StripJob).
type Job struct{}

// The paths of a Job's fields, shared by every Job.
var (
	jobTemplate  = []string{"spec", "template"}
	jobTemplates = [][]string{jobTemplate}
	jobCount     = []string{"spec", "parallelism"}
	jobSuspend   = []string{"spec", "suspend"}
)

func (Job) GVK() schema.GroupVersionKind { return batchv1.SchemeGroupVersion.WithKind("Job") }
func (Job) Resource() string             { return "jobs" }
func (Job) New() client.Object           { return &batchv1.Job{} }
func (Job) NewList() client.ObjectList   { return &batchv1.JobList{} }
func (Job) Shape() any                   { return &batchv1.Job{} }
func (Job) SuspendPath() []string        { return jobSuspend }

func (k Job) Read(obj client.Object) (*Object, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{
		Kind: k, Obj: job, Meta: &job.ObjectMeta,
		PodSets:       []PodSet{{Name: queues.MainPodSet, Count: queues.JobCount(job), Template: &job.Spec.Template, Path: jobTemplate, CountPath: jobCount}},
		Suspended:     job.Spec.Suspend != nil && *job.Spec.Suspend,
		Active:        job.Status.Active,
		Started:       job.Status.StartTime != nil,
		suspendParent: true,
		templates:     jobTemplates,
	}
	if job.Status.Terminating != nil {
		o.Active += *job.Status.Terminating
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobFailed:
			o.Finished, o.FinishedAt = true, c.LastTransitionTime.Time
		case batchv1.JobSuspended:
			o.StoppedSince = c.LastTransitionTime.Time
		}
	}
	return o, nil
}
