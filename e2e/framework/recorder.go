package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
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
	c      client.WithWatch
	ns     string
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	jobs map[string]*JobHistory
	obs  []Observation
	err  error
	// gaps counts re-lists after the watch fell too far behind; transitions
	// in a gap may be missing.
	gaps int
}

// Record starts watching the Jobs of namespace ns. Call Stop when done.
func Record(ctx context.Context, c client.WithWatch, ns string) (*Recorder, error) {
	r := &Recorder{c: c, ns: ns, jobs: map[string]*JobHistory{}, done: make(chan struct{})}
	rv, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	go r.run(ctx, rv)
	return r, nil
}

func (r *Recorder) list(ctx context.Context) (string, error) {
	var l batchv1.JobList
	if err := r.c.List(ctx, &l, client.InNamespace(r.ns)); err != nil {
		return "", err
	}
	for i := range l.Items {
		r.observe(&l.Items[i], time.Now())
	}
	return l.ResourceVersion, nil
}

func (r *Recorder) run(ctx context.Context, rv string) {
	defer close(r.done)
	for ctx.Err() == nil {
		w, err := r.c.Watch(ctx, &batchv1.JobList{}, client.InNamespace(r.ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = r.relist(ctx)
				continue
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rv = r.drain(ctx, w, rv)
		w.Stop()
	}
}

func (r *Recorder) relist(ctx context.Context) string {
	r.mu.Lock()
	r.gaps++
	r.mu.Unlock()
	rv, err := r.list(ctx)
	if err != nil {
		r.setErr(err)
		time.Sleep(200 * time.Millisecond)
	}
	return rv
}

// drain handles events until the watch closes, and returns the resource
// version to resume from.
func (r *Recorder) drain(ctx context.Context, w watch.Interface, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			now := time.Now()
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				j, ok := ev.Object.(*batchv1.Job)
				if !ok {
					continue
				}
				rv = j.ResourceVersion
				if ev.Type != watch.Deleted {
					r.observe(j, now)
				}
			case watch.Bookmark:
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
			case watch.Error:
				if status, ok := ev.Object.(*metav1.Status); ok && status.Code == 410 {
					return r.relist(ctx)
				}
				r.setErr(fmt.Errorf("watch error: %v", ev.Object))
				return rv
			}
		}
	}
}

func (r *Recorder) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
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
func (r *Recorder) Stop() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
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

// Gaps says how many times the watch had to re-list.
func (r *Recorder) Gaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}
