package perf

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"tally.dev/tally/e2e/perf/scenario"
)

// Warming the API server's watch cache of Jobs.
//
// The API server serves each watch from its cache of recent events and
// gives the watch a buffer of about one second of that history: the
// cache's capacity over 75 seconds, at least 10 events and at most 100.
// A watch whose buffer is full when an event arrives is cut off. The
// cache starts with room for 100 events and doubles while its events are
// all recent, so on an API server that has just started, the watches that
// tally and the runner open before a run get buffers of 10, and the
// creation storm cuts them off in its first seconds. A watch that falls
// behind replays its backlog when it opens again, while new events fill
// its buffer, and can be cut off again and again: in the large scenario
// the runner's view of the Jobs fell a minute behind in about half the
// runs, so that it completed Jobs late and tally preempted hundreds that
// should have finished. A cluster that has been running Jobs holds a
// longer history. warmWatchCache gives the API server one before tally
// starts. Runs still differ: with it, the runner's view has fallen up to
// 18 s behind by the end of the storm, and in some runs stayed within 3.
const (
	warmNamespace = "bench-warm"
	// warmJobs are created and deleted: two events each, enough to grow
	// the cache from 100 events, doubling, past 6,400 to 12,800.
	warmJobs = 3500
	// warmCapacity is the least capacity at which a watch gets a buffer
	// of 100 events.
	warmCapacity = 100 * 75
)

// warmWatchCache creates warmJobs suspended Jobs in a namespace that no
// ClusterQueue serves, deletes them, and checks that the API server's
// watch cache of Jobs grew to warmCapacity.
func warmWatchCache(ctx context.Context, cs kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: warmNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range warmJobs {
		g.Go(func() error {
			job := newJob(&scenario.Job{Namespace: warmNamespace, Name: fmt.Sprintf("warm-%d", i), CPUMilli: 1}, scenario.Class{Name: "warm"})
			job.Spec.Suspend = ptr.To(true)
			_, err := cs.BatchV1().Jobs(warmNamespace).Create(gctx, job, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("warming the watch cache: %w", err)
	}
	// Background: with the orphaning that Jobs default to, each would
	// wait for a garbage collector that this control plane does not run.
	if err := cs.BatchV1().Jobs(warmNamespace).DeleteCollection(ctx,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("warming the watch cache: %w", err)
	}
	m, err := apiServerMetrics(ctx, cs, "")
	if err != nil {
		return err
	}
	if got := m.sum("watch_cache_capacity", map[string]string{"group": "batch", "resource": "jobs"}); got < warmCapacity {
		return fmt.Errorf("warming the watch cache: the API server's cache of Jobs has room for %v events, want at least %d", got, warmCapacity)
	}
	return nil
}
