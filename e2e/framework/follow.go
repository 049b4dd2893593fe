package framework

import (
	"context"
	"fmt"
	batchv1 "k8s.io/api/batch/v1"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// follower keeps one list-and-watch going until it is stopped: it lists,
// hands the items to onList, then watches from the list's resourceVersion
// and hands every change to onChange. When the watch falls too far behind
// it lists again (a gap: changes in it may be missed) and goes on. The
// first error is kept for stop.
type follower struct {
	c        client.WithWatch
	newList  func() client.ObjectList
	opts     []client.ListOption
	onList   func(items []runtime.Object)
	onChange func(obj runtime.Object, deleted bool)

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	gaps   int
	err    error
}

// jobFollower follows Jobs (opts narrow the list and watch), calling
// observe with every Job listed or changed, and not with deleted ones.
func jobFollower(c client.WithWatch, observe func(*batchv1.Job), opts ...client.ListOption) follower {
	one := func(o runtime.Object) {
		if j, ok := o.(*batchv1.Job); ok {
			observe(j)
		}
	}
	return follower{c: c, newList: func() client.ObjectList { return &batchv1.JobList{} }, opts: opts,
		onList: func(items []runtime.Object) {
			for _, o := range items {
				one(o)
			}
		},
		onChange: func(o runtime.Object, deleted bool) {
			if !deleted {
				one(o)
			}
		}}
}

// start lists once, then watches in the background.
func (f *follower) start(ctx context.Context) error {
	rv, err := f.list(ctx)
	if err != nil {
		return err
	}
	ctx, f.cancel = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go f.run(ctx, rv)
	return nil
}

// stop ends the watch and returns its first error, if any.
func (f *follower) stop() error {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Gaps says how many times the watch had to list again.
func (f *follower) Gaps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gaps
}

func (f *follower) list(ctx context.Context) (string, error) {
	l := f.newList()
	if err := f.c.List(ctx, l, f.opts...); err != nil {
		return "", err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return "", err
	}
	f.onList(items)
	return l.GetResourceVersion(), nil
}

func (f *follower) run(ctx context.Context, rv string) {
	defer close(f.done)
	for ctx.Err() == nil {
		opts := append([]client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}}}, f.opts...)
		w, err := f.c.Watch(ctx, f.newList(), opts...)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = f.relist(ctx, rv)
				continue
			}
			f.setErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		rv = f.drain(ctx, w, rv)
		w.Stop()
	}
}

func (f *follower) relist(ctx context.Context, rv string) string {
	f.mu.Lock()
	f.gaps++
	f.mu.Unlock()
	nrv, err := f.list(ctx)
	if err != nil {
		if ctx.Err() == nil {
			f.setErr(err)
		}
		return rv
	}
	return nrv
}

// drain handles a watch's events until it closes and returns the
// resourceVersion to resume from.
func (f *follower) drain(ctx context.Context, w watch.Interface, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
					f.onChange(ev.Object, ev.Type == watch.Deleted)
				}
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			case watch.Error:
				if status, ok := ev.Object.(*metav1.Status); ok && (status.Code == 410 || status.Reason == metav1.StatusReasonExpired) {
					return f.relist(ctx, rv)
				}
				if ctx.Err() == nil {
					// Ending the watch with the context can surface as an
					// error event; only one while the watch should run
					// counts.
					f.setErr(fmt.Errorf("watch error: %v", ev.Object))
				}
				return rv
			}
		}
	}
}

func (f *follower) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}
