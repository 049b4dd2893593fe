package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// ResumingInformers is the manager cache's NewInformer: client-go's shared
// informer whose watches, when the API server closes one at once with
// nothing sent, are opened again from the same resource version before
// the informer sees the close (resumeWatch).
//
// A watch that ends in under a second with nothing received is a "very
// short watch" to client-go's reflector, which then lists every object
// again. At 50,000 Jobs that is 50,000 objects sent, decoded and stored
// again for a watch that only had to start again. Under load the API
// server does close a watch it has just opened for a client that fell
// behind. The resource version is the one the reflector asked for, so
// the events the informer gets are the ones a second watch of its own
// would get.
//
// jobs, when not nil, opens the watches of the batch/v1 Jobs' informer in
// place of the cache's own, and is told that informer's store.
func ResumingInformers(log logr.Logger, jobs *JobWatch) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		viaJobs := false
		if l, ok := lw.(*toolscache.ListWatch); ok && l.WatchFuncWithContext != nil {
			open := l.WatchFuncWithContext
			if _, isJob := obj.(*batchv1.Job); isJob && jobs != nil {
				open, viaJobs = jobs.Open, true
			}
			resumed := *l
			resumed.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return resumeWatch(ctx, opts, open, log.WithValues("type", fmt.Sprintf("%T", obj)))
			}
			lw = &resumed
		}
		inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		if viaJobs {
			jobs.KnownFrom(inf.GetStore())
		}
		return inf
	}
}

// resumeWaits are the waits before each new watch from the same version.
// Their sum stays under the reflector's one second, so a server that
// keeps closing at once still gets client-go's own answer, a new list.
var resumeWaits = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// resumeWatch opens a watch with opts and, while the API server closes it
// within a second having sent nothing, opens it again after each of
// resumeWaits, as one stream to the caller. A watch that starts with the
// initial list (no resource version, or sendInitialEvents) is returned as
// it is: its version is not one to resume from.
func resumeWatch(ctx context.Context, opts metav1.ListOptions, open func(context.Context, metav1.ListOptions) (watch.Interface, error), log logr.Logger) (watch.Interface, error) {
	w, err := open(ctx, opts)
	if err != nil || opts.ResourceVersion == "" || opts.ResourceVersion == "0" || opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return w, err
	}
	r := &resumedWatch{out: make(chan watch.Event), done: make(chan struct{}), cur: w}
	go r.run(ctx, func(ctx context.Context) (watch.Interface, error) { return open(ctx, opts) }, log.WithValues("resourceVersion", opts.ResourceVersion))
	return r, nil
}

// resumedWatch is one watch to its reader over the watches resumeWatch opens.
type resumedWatch struct {
	out  chan watch.Event
	done chan struct{}
	stop sync.Once
	mu   sync.Mutex // guards cur for Stop; run, its only writer, reads it freely
	cur  watch.Interface
}

func (r *resumedWatch) ResultChan() <-chan watch.Event { return r.out }

func (r *resumedWatch) Stop() {
	r.stop.Do(func() {
		close(r.done)
		r.mu.Lock()
		r.cur.Stop()
		r.mu.Unlock()
	})
}

func (r *resumedWatch) run(ctx context.Context, open func(context.Context) (watch.Interface, error), log logr.Logger) {
	defer close(r.out)
	for i := 0; ; i++ {
		began := time.Now()
		if r.forward() || time.Since(began) >= time.Second || i == len(resumeWaits) {
			return
		}
		wait := resumeWaits[i]
		select {
		case <-r.done:
			return
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		log.Info("the API server closed a new watch at once; watching again from the same version", "after", wait)
		w, err := open(ctx)
		if err != nil {
			log.Info("watching again failed; the informer lists again", "err", err.Error())
			return
		}
		r.mu.Lock()
		select {
		case <-r.done:
			r.mu.Unlock()
			w.Stop()
			return
		default:
		}
		r.cur = w
		r.mu.Unlock()
	}
}

// forward passes the current watch's events on until it closes or the
// reader stops, and says whether it passed any.
func (r *resumedWatch) forward() bool {
	sent := false
	for ev := range r.cur.ResultChan() {
		select {
		case r.out <- ev:
			sent = true
		case <-r.done:
			return true
		}
	}
	return sent
}
