package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/btree"
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// DefaultWorkers is how many admission and preemption writes a ledger
// has in flight at once unless told otherwise. The writes of a busy API
// server take seconds each, and the admissions a ledger makes a second
// are at most its writes in flight over their latency; the client's QPS
// limit bounds the rate besides.
const DefaultWorkers = 128

// Options configure a Ledger.
type Options struct {
	// Namespace is tally's own namespace, never managed.
	Namespace string
	// Recount is how often usage is recounted from scratch (drift repair).
	Recount time.Duration
	// Workers is how many admission writes run at once;
	// DefaultWorkers when not positive.
	Workers int
	// Budget, if set, says how many requests the writes' client may send
	// at once now (its rate limiter's free tokens) and how many a second:
	// a pass decides no more writes than that, nor than free Workers, and
	// while passes want more of it than is free, the label writes wait.
	Budget func() (tokens, qps float64)
	// Clock is what every time and timer of the ledger is read from;
	// the real clock when nil.
	Clock clock.WithTickerAndDelayedExecution
	// Held, when set, is asked before every write, which is refused
	// while it returns an error (see Lease.Held).
	Held func() error
	// Registry is where the ledger's metrics are registered;
	// controller-runtime's registry when nil.
	Registry prometheus.Registerer
	// DashboardAddr, if set, is where the read-only dashboard page is
	// served (Setup).
	DashboardAddr string
	// FinishedLabel, Events and AdmissionPatch choose which writes the
	// ledger makes and how (modes.go); the zero values are eager, all and
	// merge. FinishedLabelRate bounds the lazy finished labels a second
	// (100 when zero).
	FinishedLabel     FinishedLabel
	FinishedLabelRate float64
	Events            Events
	AdmissionPatch    AdmissionPatch
	// Kinds are the kinds the ledger queues, which the ConfigLoader
	// declares more of (nil: the built-in ones).
	Kinds *kinds.Registry
}

// Ledger keeps quota usage and admits Jobs. It is a manager Runnable that
// needs leader election: only one replica admits.
type Ledger struct {
	client   client.Client
	cache    cache.Cache
	store    *queues.Store
	recorder record.EventRecorder
	opts     Options
	log      logr.Logger

	// recent holds the last decisions, for the dashboard.
	recent recentDecisions

	mu      sync.Mutex
	jobs    map[types.UID]*entry
	pending map[string]*btree.BTreeG[*entry]
	usage   map[string]queues.Usage
	// pools are the cohorts' pools as usage has them, moved with it; nil,
	// or for another config, they are counted again by the next pass.
	pools      *queues.Pools
	namespaces map[string]*nsInfo
	// inputs are the cluster's objects that shape a workload's charge
	// and priority besides its own (defaults.go).
	inputs podInputs
	cfg    *queues.Config
	// preempt is the preemptions under way (admit.go).
	preempt preemptions
	// late holds running Jobs of managed namespaces that tally has no
	// record of, for the next pass to capture (see late.go).
	late map[types.UID]*entry
	// holding holds the entries charged with quota, by the queue they
	// are charged in (holdLocked); a queue's set stays once made.
	holding map[string]map[*entry]struct{}
	// pods is the bookkeeping of pods by workload (podbook.go).
	pods podBook[*entry]
	// passCache is what a pass keeps for the next (passcache.go).
	passCache passCache
	// writer runs the writes and wakes the passes (writer.go).
	writer *writer[write]
	// adopted: the pods of workloads deleted before the ledger started
	// have been counted (adoptOrphans).
	adopted bool
	// echoes are the admission writes whose version the watch has not
	// brought yet (tally_watch_delay_seconds).
	echoes map[types.UID]awaitedVersion
	// effects is the effects of the fold in progress, kept for its array.
	effects []machine.Effect
	synced  bool
	// started: this replica's ledger runs (it leads).
	started bool
	labels  labelQueues
	metrics *metrics
	watches watches
}

// preemptions are the preemptions under way: waitingOn maps a victim to
// the preemptor waiting for it; reserved holds preemptors whose victims
// are gone, until the next pass tries them first; yielding maps a victim
// to its preemptor until the preemptor is admitted: until then the victim
// is not (Snapshot.Yield).
type preemptions struct {
	waitingOn map[types.UID]*entry
	reserved  map[*entry]bool
	yielding  map[*entry]*entry
}

// labelQueues are the queues of label writes: those of the workloads'
// state labels (jobs), of the finished label when it is lazy
// (FinishedLabelLazy, runFinishedLabelWorker), and of the namespaces'
// tally.dev/managed label.
type labelQueues struct {
	jobs, finished workqueue.TypedRateLimitingInterface[types.UID]
	namespaces     workqueue.TypedRateLimitingInterface[string]
}

// watches are what the ledger watches: the registered kinds the API
// server serves (set by Start), the kinds of object that they read their
// pod sets from (refs.go), and, per watch, whether its handler has been
// given the informer's initial list. list lists the watched kinds'
// workloads from the cache, for the recount.
type watches struct {
	kinds  []kinds.Kind
	refs   []schema.GroupVersionKind
	synced []toolscache.InformerSynced
	list   func(context.Context) ([]*kinds.Object, error)
}

type nsInfo struct {
	labels   labels.Set
	queue    string
	hasLabel bool
}

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
		pending:    map[string]*btree.BTreeG[*entry]{},
		usage:      map[string]queues.Usage{},
		namespaces: map[string]*nsInfo{},
		preempt:    preemptions{waitingOn: map[types.UID]*entry{}, reserved: map[*entry]bool{}, yielding: map[*entry]*entry{}},
		late:       map[types.UID]*entry{},
		holding:    map[string]map[*entry]struct{}{},
		pods:       newPodBook[*entry](),
		inputs:     newPodInputs(),
		passCache:  newPassCache(),
		echoes:     map[types.UID]awaitedVersion{},
		labels: labelQueues{
			jobs: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
				workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "tally_job_labels"}),
			finished: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
				workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "tally_finished_labels"}),
			namespaces: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
				workqueue.TypedRateLimitingQueueConfig[string]{Name: "tally_namespace_labels"}),
		},
		metrics: newMetrics(opts.Registry),
	}
	if opts.Held != nil {
		l.client = fenced{Client: cl, held: opts.Held, log: log}
	}
	l.writer = newWriter(opts.Workers, opts.Budget, opts.Clock, l.write)
	l.watches.list = func(ctx context.Context) ([]*kinds.Object, error) {
		return l.listWatched(ctx, client.UnsafeDisableDeepCopy)
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
		l.metrics.observeConfig(l.cfg, l.usage)
	}
	l.mu.Unlock()
	// The work started outside the passes ends with ctx.
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
	// The first pass waits until every handler has been given what the
	// informers listed: workloads, and the pods that hold quota.
	if !l.cache.WaitForCacheSync(ctx) || !toolscache.WaitForCacheSync(ctx.Done(), l.watches.synced...) {
		return fmt.Errorf("ledger: informers did not sync: %w", ctx.Err())
	}
	l.adoptOrphans(ctx)
	l.mu.Lock()
	l.synced = true
	l.mu.Unlock()
	l.captureManaged(ctx)
	l.log.Info("ledger synced", "workloads", len(l.jobs), "namespaces", len(l.namespaces), "kinds", len(l.watches.kinds))

	l.runLabelWorkers(ctx)
	if l.opts.FinishedLabel == FinishedLabelLazy {
		go l.runFinishedLabelWorker(ctx)
	}
	go l.runNamespaceWorker(ctx)
	l.writer.wakePass()

	recount := l.opts.Clock.NewTicker(l.opts.Recount)
	defer recount.Stop()
	// Writes in flight finish (or fail with the context) before Start
	// returns.
	defer l.writer.inflight.Wait()
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
	inf, err := l.cache.GetInformer(ctx, obj)
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
		l.watches.kinds = append(l.watches.kinds, k)
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
	l.metrics.observeConfig(cfg, l.usage)
	l.rebuildPendingLocked()
	l.relabelLocked()
	l.log.Info("config in force", "clusterQueues", len(cfg.QueueNames), "flavors", len(cfg.Flavors))
	l.mu.Unlock()
	if remap {
		l.writer.spawn(func() { l.reobserve("", nil) })
	}
}

// listWatched lists the workloads of every watched kind from the cache.
func (l *Ledger) listWatched(ctx context.Context, opts ...client.ListOption) ([]*kinds.Object, error) {
	var out []*kinds.Object
	for _, k := range l.watches.kinds {
		list := k.NewList()
		if err := l.cache.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.GVK().Kind, err)
		}
		if err := meta.EachListItem(list, func(obj runtime.Object) error {
			if o, ok := l.opts.Kinds.Of(obj); ok {
				out = append(out, o)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
