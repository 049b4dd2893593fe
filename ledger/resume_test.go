package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// opener hands out the watches of a test in order, recording the options
// of each open.
type opener struct {
	watches []*watch.FakeWatcher
	opts    []metav1.ListOptions
}

func (o *opener) open(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	o.opts = append(o.opts, opts)
	w := o.watches[len(o.opts)-1]
	return w, nil
}

func pod(rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: rv}}
}

// closedAtOnce is a watch the server has closed before sending anything.
func closedAtOnce() *watch.FakeWatcher {
	w := watch.NewFake()
	w.Stop()
	return w
}

func shortWaits(t *testing.T) {
	saved := resumeWaits
	resumeWaits = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	t.Cleanup(func() { resumeWaits = saved })
}

func receive(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no event and no close in 10 s")
		return watch.Event{}, false
	}
}

func TestResumeWatchAfterAnImmediateClose(t *testing.T) {
	shortWaits(t)
	second := watch.NewFake()
	o := &opener{watches: []*watch.FakeWatcher{closedAtOnce(), second}}
	w, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "42"}, o.open, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	go second.Add(pod("43"))
	ev, ok := receive(t, w)
	if !ok || ev.Type != watch.Added || ev.Object.(*corev1.Pod).ResourceVersion != "43" {
		t.Fatalf("got %v %v, want the second watch's ADDED at 43", ev, ok)
	}
	if len(o.opts) != 2 || o.opts[1].ResourceVersion != "42" {
		t.Fatalf("opens %+v, want a second one from version 42", o.opts)
	}
	second.Stop()
	if _, ok := receive(t, w); ok {
		t.Fatal("the resumed watch stays open after a watch that sent events closed")
	}
	w.Stop()
}

func TestResumeWatchEndsWithAWatchThatSentEvents(t *testing.T) {
	shortWaits(t)
	first := watch.NewFake()
	o := &opener{watches: []*watch.FakeWatcher{first}}
	w, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "42"}, o.open, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		first.Modify(pod("43"))
		first.Stop()
	}()
	if ev, ok := receive(t, w); !ok || ev.Type != watch.Modified {
		t.Fatalf("got %v %v, want MODIFIED", ev, ok)
	}
	if _, ok := receive(t, w); ok {
		t.Fatal("still open after the server closed a watch that sent an event")
	}
	if len(o.opts) != 1 {
		t.Fatalf("%d opens, want 1: a watch that sent events is not resumed", len(o.opts))
	}
}

func TestResumeWatchGivesUpWithinTheReflectorsSecond(t *testing.T) {
	o := &opener{}
	for range len(resumeWaits) + 1 {
		o.watches = append(o.watches, closedAtOnce())
	}
	began := time.Now()
	w, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "42"}, o.open, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := receive(t, w); ok {
		t.Fatal("an event from watches that sent none")
	}
	// The reflector lists again only after a watch of under a second.
	if took := time.Since(began); took >= time.Second {
		t.Fatalf("gave up after %v: the reflector would not list again", took)
	}
	if len(o.opts) != len(resumeWaits)+1 {
		t.Fatalf("%d opens, want %d", len(o.opts), len(resumeWaits)+1)
	}
}

func TestResumeWatchLeavesTheInitialListAlone(t *testing.T) {
	for _, opts := range []metav1.ListOptions{
		{ResourceVersion: ""},
		{ResourceVersion: "0"},
		{ResourceVersion: "42", SendInitialEvents: ptr.To(true)},
	} {
		first := watch.NewFake()
		o := &opener{watches: []*watch.FakeWatcher{first}}
		w, err := resumeWatch(context.Background(), opts, o.open, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		if w != watch.Interface(first) {
			t.Errorf("%+v: wrapped; a watch that starts with the list is returned as it is", opts)
		}
	}
}

func TestResumeWatchStopsWhileWaiting(t *testing.T) {
	saved := resumeWaits
	resumeWaits = []time.Duration{time.Hour}
	t.Cleanup(func() { resumeWaits = saved })
	o := &opener{watches: []*watch.FakeWatcher{closedAtOnce()}}
	w, err := resumeWatch(context.Background(), metav1.ListOptions{ResourceVersion: "42"}, o.open, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if _, ok := receive(t, w); ok {
		t.Fatal("an event after Stop")
	}
	if len(o.opts) != 1 {
		t.Fatalf("%d opens after Stop, want 1", len(o.opts))
	}
}

// TestResumingInformersOpenJobWatches: the Jobs' informer watches through
// the JobWatch, which is told its store, and every other informer through
// its own.
func TestResumingInformersOpenJobWatches(t *testing.T) {
	for _, tc := range []struct {
		obj     runtime.Object
		list    runtime.Object
		viaJobs bool
	}{
		{&batchv1.Job{}, &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, true},
		{&corev1.Pod{}, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, false},
	} {
		opened := make(chan string, 10)
		watchVia := func(name string) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				opened <- name
				return watch.NewFake(), nil
			}
		}
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return tc.list.DeepCopyObject(), nil
			},
			WatchFuncWithContext: watchVia("own"),
		}
		jobs := &JobWatch{open: watchVia("jobs")}
		inf := ResumingInformers(logr.Discard(), jobs)(lw, tc.obj, 0, toolscache.Indexers{})
		if told := jobs.store.Load() != nil && *jobs.store.Load() == toolscache.KeyGetter(inf.GetStore()); told != tc.viaJobs {
			t.Errorf("%T: the JobWatch was told the informer's store: %t, want %t", tc.obj, told, tc.viaJobs)
		}
		stop := make(chan struct{})
		go inf.Run(stop)
		want := map[bool]string{true: "jobs", false: "own"}[tc.viaJobs]
		select {
		case got := <-opened:
			if got != want {
				t.Errorf("%T: the informer watched through %s, want %s", tc.obj, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%T: the informer opened no watch", tc.obj)
		}
		close(stop)
	}
}
