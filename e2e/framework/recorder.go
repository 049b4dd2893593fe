package framework

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Observation is one change the Recorder saw on a Job, with the time the
// watch delivered it.
type Observation struct {
	Job  string
	Kind ObservationKind
	At   time.Time
}

// ObservationKind is what changed.
type ObservationKind string

const (
	// Unsuspended: spec.suspend went from true to false (an admission).
	Unsuspended ObservationKind = "Unsuspended"
	// Suspended again: spec.suspend went from false to true (a preemption).
	Resuspended ObservationKind = "Resuspended"
	// CompletedKind: the Complete condition appeared (for a PyTorchJob,
	// Succeeded).
	CompletedKind ObservationKind = "Completed"
	// PodsCreated: the first pod of the workload appeared (RecordPyTorchJobs
	// only).
	PodsCreated ObservationKind = "PodsCreated"
)

// JobHistory is what the Recorder saw of one Job, from its creation on.
type JobHistory struct {
	// States are the values of tally.dev/state in the order seen, without
	// repeats ("" when the label is absent).
	States []string
	// Unsuspends counts admissions: suspend true → false.
	Unsuspends int
	// FirstSuspend is spec.suspend as first seen (nil: unset).
	FirstSuspend *bool
	// Last is the Job as last seen (nil for other kinds).
	Last *batchv1.Job

	suspended, completed bool
}

// view is what the Recorder reads of one workload object.
type view struct {
	name      string
	suspend   *bool
	completed bool
	state     string
	job       *batchv1.Job
}

// Recorder watches the Jobs (or PyTorchJobs) of one namespace and keeps
// every transition, so that short-lived states (an admitted Job that
// finishes within a poll interval) are not missed.
type Recorder struct {
	f follower
	// pods follows the workloads' pods, for PodsCreated and podNodes
	// (PyTorchJobs).
	pods *follower

	mu   sync.Mutex
	jobs map[string]*JobHistory
	obs  []Observation
	// podNodes maps a workload's name to its pods' names and nodes.
	podNodes map[string]map[string]string
}

// Record starts watching the Jobs of namespace ns. Call Stop when done.
func Record(ctx context.Context, c client.WithWatch, ns string) (*Recorder, error) {
	r := &Recorder{jobs: map[string]*JobHistory{}}
	r.f = jobFollower(c, func(j *batchv1.Job) {
		r.observe(view{name: j.Name, suspend: j.Spec.Suspend, completed: Completed(j), state: j.Labels[LabelState], job: j}, time.Now())
	}, client.InNamespace(ns))
	if err := r.f.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Recorder) observe(v view, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.jobs[v.name]
	suspended := v.suspend != nil && *v.suspend
	if h == nil {
		h = &JobHistory{suspended: suspended, completed: v.completed}
		if v.suspend != nil {
			s := *v.suspend
			h.FirstSuspend = &s
		}
		r.jobs[v.name] = h
	}
	if len(h.States) == 0 || h.States[len(h.States)-1] != v.state {
		h.States = append(h.States, v.state)
	}
	switch was, is := h.suspended, suspended; {
	case was && !is:
		h.Unsuspends++
		r.obs = append(r.obs, Observation{Job: v.name, Kind: Unsuspended, At: now})
	case !was && is:
		r.obs = append(r.obs, Observation{Job: v.name, Kind: Resuspended, At: now})
	}
	if !h.completed && v.completed {
		r.obs = append(r.obs, Observation{Job: v.name, Kind: CompletedKind, At: now})
	}
	h.suspended, h.completed = suspended, v.completed
	if v.job != nil {
		h.Last = v.job.DeepCopy()
	}
}

// Stop ends the watches and returns the first error, if any.
func (r *Recorder) Stop() error {
	err := r.f.stop()
	if r.pods != nil {
		if perr := r.pods.stop(); err == nil {
			err = perr
		}
	}
	return err
}

// History returns a copy of what was seen of Job name (nil if nothing).
func (r *Recorder) History(name string) *JobHistory {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.jobs[name]
	if h == nil {
		return nil
	}
	c := *h
	c.States = append([]string(nil), h.States...)
	return &c
}

// Histories returns copies of every Job's history.
func (r *Recorder) Histories() map[string]*JobHistory {
	r.mu.Lock()
	names := make([]string, 0, len(r.jobs))
	for n := range r.jobs {
		names = append(names, n)
	}
	r.mu.Unlock()
	out := make(map[string]*JobHistory, len(names))
	for _, n := range names {
		out[n] = r.History(n)
	}
	return out
}

// Observations returns the transitions seen so far, in order.
func (r *Recorder) Observations() []Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Observation(nil), r.obs...)
}

// Gaps says how many times the watches had to re-list.
func (r *Recorder) Gaps() int {
	if r.pods != nil {
		return r.f.Gaps() + r.pods.Gaps()
	}
	return r.f.Gaps()
}
