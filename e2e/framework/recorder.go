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
	// CompletedKind: the Complete condition appeared.
	CompletedKind ObservationKind = "Completed"
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
	Last         *batchv1.Job
}

// Recorder watches the Jobs of one namespace and keeps every transition,
// so that short-lived states (an admitted Job that finishes within a poll
// interval) are not missed.
type Recorder struct {
	f follower

	mu   sync.Mutex
	jobs map[string]*JobHistory
	obs  []Observation
}

// Record starts watching the Jobs of namespace ns. Call Stop when done.
func Record(ctx context.Context, c client.WithWatch, ns string) (*Recorder, error) {
	r := &Recorder{jobs: map[string]*JobHistory{}}
	r.f = jobFollower(c, func(j *batchv1.Job) { r.observe(j, time.Now()) }, client.InNamespace(ns))
	if err := r.f.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Recorder) observe(j *batchv1.Job, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.jobs[j.Name]
	if h == nil {
		h = &JobHistory{}
		if j.Spec.Suspend != nil {
			s := *j.Spec.Suspend
			h.FirstSuspend = &s
		}
		r.jobs[j.Name] = h
	}
	state := j.Labels[LabelState]
	if len(h.States) == 0 || h.States[len(h.States)-1] != state {
		h.States = append(h.States, state)
	}
	if h.Last != nil {
		switch was, is := Suspended(h.Last), Suspended(j); {
		case was && !is:
			h.Unsuspends++
			r.obs = append(r.obs, Observation{Job: j.Name, Kind: Unsuspended, At: now})
		case !was && is:
			r.obs = append(r.obs, Observation{Job: j.Name, Kind: Resuspended, At: now})
		}
		if !Completed(h.Last) && Completed(j) {
			r.obs = append(r.obs, Observation{Job: j.Name, Kind: CompletedKind, At: now})
		}
	}
	h.Last = j.DeepCopy()
}

// Stop ends the watch and returns its first error, if any.
func (r *Recorder) Stop() error { return r.f.stop() }

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

// Gaps says how many times the watch had to re-list.
func (r *Recorder) Gaps() int { return r.f.Gaps() }
