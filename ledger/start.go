package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// New returns a Ledger that reads Jobs, Namespaces and PriorityClasses from
// c (the manager's cache) and writes through cl.
func New(cl client.Client, c cache.Cache, store *queues.Store, recorder record.EventRecorder, log logr.Logger, opts Options) *Ledger {
	if opts.Recount <= 0 {
		opts.Recount = 5 * time.Minute
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.FinishedLabel == "" {
		opts.FinishedLabel = FinishedLabelEager
	}
	if opts.FinishedLabelRate <= 0 {
		opts.FinishedLabelRate = 100
	}
	if opts.Events == "" {
		opts.Events = EventsAll
	}
	if opts.AdmissionPatch == "" {
		opts.AdmissionPatch = AdmissionPatchMerge
	}
	l := &Ledger{
		client: cl, cache: c, store: store, recorder: recorder, opts: opts, log: log,
		jobs:       map[types.UID]*entry{},
		namespaces: map[string]*nsInfo{},
		preempt:    preemptions{waitingOn: map[types.UID]*entry{}, reserved: map[*entry]bool{}, yielding: map[*entry]*entry{}},
		late:       map[types.UID]*entry{},
		pods:       newPodBook[*entry](),
		inputs:     newPodInputs(),
		passCache:  newPassCache(),
		topo:       queues.NewFlavorDomains(),
		nodeLosses: map[string]clock.Timer{},
		echoes:     map[types.UID]awaitedVersion{},
		labels: labelQueues{
			jobs: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
				workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "tally_job_labels"}),
			finished: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
				workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "tally_finished_labels"}),
			namespaces: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
				workqueue.TypedRateLimitingQueueConfig[string]{Name: "tally_namespace_labels"}),
		},
		metrics: metrics.New(opts.Registry),
	}
	if opts.Held != nil {
		l.client = fenced{Client: cl, held: opts.Held, log: log}
	}
	l.books = newBooks(&l.passCache, l.metrics)
	l.writer = newWriter(opts.Workers, opts.Budget, opts.Clock, l.write)
	l.watches.list = func(ctx context.Context) ([]*kinds.Object, error) {
		return l.listWatched(ctx, "")
	}
	return l
}

// NeedLeaderElection: only the leader admits.
func (l *Ledger) NeedLeaderElection() bool { return true }

// Start registers the informer handlers, waits for them to sync, and runs
// admission passes until ctx ends.
func (l *Ledger) Start(ctx context.Context) error {
	defer l.labels.jobs.ShutDown()
	defer l.labels.finished.ShutDown()
	defer l.labels.namespaces.ShutDown()
	l.mu.Lock()
	l.cfg, l.started = l.store.Load(), true
	if l.cfg != nil {
		l.metrics.ObserveConfig(l.cfg, l.books.usage)
		l.topo.Configure(l.cfg)
	}
	l.mu.Unlock()
	// The work started outside the passes ends with ctx; whatever ends
	// Start, the writes and that work finish (or fail with their
	// context) before it returns, and none starts after.
	defer l.writer.finish()
	defer context.AfterFunc(ctx, l.writer.stop)()
	configChanged := l.store.Subscribe()

	if err := l.watch(ctx, &corev1.Namespace{}, l.onNamespace, l.onNamespaceDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &schedulingv1.PriorityClass{}, l.onPriorityClass, l.onPriorityClassDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &corev1.Pod{}, l.onPod, l.onPodDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &corev1.Node{}, l.onNode, l.onNodeDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &corev1.LimitRange{}, l.onLimitRange, l.onLimitRangeDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &nodev1.RuntimeClass{}, l.onRuntimeClass, l.onRuntimeClassDelete); err != nil {
		return err
	}
	if err := l.watch(ctx, &resourcev1.ResourceClaimTemplate{}, l.onClaimTemplate, l.onClaimTemplateDelete); err != nil {
		return err
	}
	if err := l.watchKinds(ctx); err != nil {
		return err
	}
	if err := l.watchBoundPods(ctx); err != nil {
		return err
	}
	if err := l.watchDevices(ctx); err != nil {
		return err
	}
	if err := l.watchNodePools(ctx); err != nil {
		return err
	}
	// The first pass waits until every handler has been given what the
	// informers listed: workloads, and the pods that hold quota.
	if !l.cache.WaitForCacheSync(ctx) || !toolscache.WaitForCacheSync(ctx.Done(), l.watches.synced...) {
		return fmt.Errorf("ledger: informers did not sync: %w", ctx.Err())
	}
	l.adoptOrphans(ctx)
	l.mu.Lock()
	l.synced = true
	jobs, namespaces := len(l.jobs), len(l.namespaces)
	l.mu.Unlock()
	l.captureManaged(ctx)
	l.log.Info("ledger synced", "workloads", jobs, "namespaces", namespaces, "kinds", len(l.watches.kinds))

	l.runLabelWorkers(ctx)
	if l.opts.FinishedLabel == FinishedLabelLazy {
		go l.runFinishedLabelWorker(ctx)
	}
	go l.runNamespaceWorker(ctx)
	l.writer.wakePass()

	recount := l.opts.Clock.NewTicker(l.opts.Recount)
	defer recount.Stop()
	// After a pass that decided nothing, a Job that starts waiting is
	// decided by the next pass that something else wakes (quota freed,
	// a victim gone, a config change), or arrivalDelay later: it may fit
	// where the waiting heads did not, but a storm of creates into full
	// queues then costs a pass per arrivalDelay, not one per Job, and
	// leaves the CPU to the API server that serves the creates.
	var (
		idle     bool
		arrivals <-chan time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-configChanged:
			if err := l.watchKinds(ctx); err != nil {
				l.log.Error(err, "watching the workload kinds of the new config")
			}
			l.reconfigure(l.store.Load())
			if err := l.watchBoundPods(ctx); err != nil {
				l.log.Error(err, "watching the pods bound to nodes, for the new config's topologies")
			}
			if err := l.watchDevices(ctx); err != nil {
				l.log.Error(err, "watching the nodes' devices, for the new config's topologies and device mappings")
			}
			if err := l.watchNodePools(ctx); err != nil {
				l.log.Error(err, "watching Karpenter's NodePools, for the new config's topologies")
			}
			l.captureManaged(ctx)
			l.adoptOrphans(ctx)
		case <-recount.C():
			l.recount(ctx)
			l.writer.wakePass()
		case <-l.writer.wake:
		case <-arrivals:
		case <-l.writer.arrive:
			if idle {
				if arrivals == nil {
					arrivals = l.opts.Clock.After(arrivalDelay)
				}
				continue
			}
		}
		arrivals = nil
		took, decided := l.pass(ctx)
		idle = !decided
		if rest := restAfter(took); rest > 0 {
			t := l.opts.Clock.NewTimer(rest)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
	}
}

func (l *Ledger) watch(ctx context.Context, obj client.Object, upsert func(any), del func(any)) error {
	return l.watchIn(ctx, l.cache, obj, upsert, del)
}

// watchIn is watch in cache c, its informer got with opts.
func (l *Ledger) watchIn(ctx context.Context, c cache.Cache, obj client.Object, upsert func(any), del func(any), opts ...cache.InformerGetOption) error {
	inf, err := c.GetInformer(ctx, obj, opts...)
	if err != nil {
		return fmt.Errorf("ledger: informer for %T: %w", obj, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, n any) { upsert(n) },
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			del(o)
		},
	})
	if err != nil {
		return fmt.Errorf("ledger: handler for %T: %w", obj, err)
	}
	l.watches.synced = append(l.watches.synced, reg.HasSynced)
	return nil
}

// watchKinds watches every kind of Options.Kinds (built in, or declared
// by the config) that the API server serves and that is not
// watched yet. It runs at the start and after each config change, so a
// kind declared, or whose CRD was installed, since then is picked up
// without a restart.
func (l *Ledger) watchKinds(ctx context.Context) error {
	for _, k := range l.opts.Kinds.All() {
		gvk := k.GVK()
		if slices.ContainsFunc(l.watches.kinds, func(w kinds.Kind) bool { return w.GVK() == gvk }) {
			continue
		}
		if _, typed := k.New().(*batchv1.Job); !typed {
			if _, err := l.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				l.log.Info("workload kind not served by the API server; not watched (it is once its CRD is installed and the config is reloaded)",
					"kind", gvk.String(), "reason", err.Error())
				continue
			}
		}
		if err := l.watch(ctx, k.New(), l.onJob, l.onJobDelete); err != nil {
			return err
		}
		l.mu.Lock()
		l.watches.kinds = append(l.watches.kinds, k)
		l.mu.Unlock()
		l.log.V(1).Info("watching a workload kind", "kind", gvk.String())
	}
	return l.watchReferences(ctx)
}

// reconfigure puts a new config in force: every Job's queue, priority and
// eligibility may have changed, so the pending trees are rebuilt.
func (l *Ledger) reconfigure(cfg *queues.Config) {
	if cfg == nil {
		return
	}
	l.mu.Lock()
	// What the waiting workloads' claims are charged may change: they are
	// observed again once this config is in force.
	remap := l.cfg != nil && !maps.Equal(l.cfg.DeviceClasses, cfg.DeviceClasses) && l.synced
	l.cfg = cfg
	// The pod defaults carry the config (what the queues cover).
	l.inputs.allChanged()
	l.metrics.ObserveConfig(cfg, l.books.usage)
	l.topo.Configure(cfg)
	l.warnDeviceClassesLocked()
	l.rebuildPendingLocked()
	l.relabelLocked()
	l.log.Info("config in force", "clusterQueues", len(cfg.QueueNames), "flavors", len(cfg.Flavors))
	l.mu.Unlock()
	if remap {
		l.writer.spawn(func() { l.reobserve("", nil) })
	}
}
