package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
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
	"tally.dev/tally/ledger/metrics"
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
	// Clock is what every time and timer of the ledger's decisions is
	// read from (backoffs, deadlines, graces, the passes' and recounts'
	// timers); the real clock when nil. The plumbing beside it waits on
	// the real clock, as client-go's own does: a patch's Retry-After
	// (patch.go), a watch's resume (resume.go), the EventQueue's retries
	// and its report of dropped Events, the FlavorWatch's once-a-second
	// look at the nodes.
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
	// BoundPods, if set, is a cache of every pod bound to a node,
	// stripped by StripBoundPod (BoundPodsCache): started once the config
	// has a topology, it tells the topologies' trees what pods use. Nil:
	// they count only the placements of the workloads tally admitted.
	BoundPods cache.Cache
	// Mapper, if set, tells whether the API server serves Karpenter's
	// NodePools: where it does and the config has a topology, the
	// ledger watches them for the room they can still make.
	Mapper meta.RESTMapper
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

	mu   sync.Mutex
	jobs map[types.UID]*entry
	// books are the pending trees, usage and holding (books.go).
	books      books
	namespaces map[string]*nsInfo
	// inputs are the cluster's objects that shape a workload's charge
	// and priority besides its own (podinputs.go).
	inputs podInputs
	cfg    *queues.Config
	// preempt is the preemptions under way (admit.go).
	preempt preemptions
	// late holds running Jobs of managed namespaces that tally has no
	// record of, for the next pass to capture (see late.go).
	late map[types.UID]*entry
	// pods is the bookkeeping of pods by workload (podbook.go).
	pods podBook[*entry]
	// topo is the trees of the flavors' topologies (topology.go).
	topo *queues.FlavorDomains
	// nodeLosses are the timers of the outages of nodes that placements
	// hold room on, by node, until the node is usable again (onNode).
	nodeLosses map[string]clock.Timer
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
	metrics *metrics.Metrics
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
// server serves (added to by Start's goroutine, under the lock, which
// the others read them under), the kinds of object that they read their
// pod sets from (refs.go), and, per watch, whether its handler has been
// given the informer's initial list. list lists the watched kinds'
// workloads from the cache, for the recount.
type watches struct {
	kinds  []kinds.Kind
	refs   []schema.GroupVersionKind
	synced []toolscache.InformerSynced
	list   func(context.Context) ([]*kinds.Object, error)
	// boundPods: Options.BoundPods is started and watched.
	boundPods bool
	// devices: its ResourceSlices, DeviceClasses and ResourceClaims are
	// watched (watchDevices); deviceWarned is, by mapped DeviceClass, why
	// it was last warned of.
	devices      bool
	deviceWarned map[string]string
	// nodePools: Karpenter's NodePools are watched (watchNodePools).
	nodePools bool
}

type nsInfo struct {
	labels   labels.Set
	queue    string
	hasLabel bool
}

// listWatched lists the workloads of every watched kind in namespace ns
// ("" for all) as the cache's stores hold them. Nothing is copied, so
// nothing listed may be changed: a list through the cache's reader
// copies every object into the list's items (a Job is over 1 KB), which
// a recount of a large cluster's Jobs would allocate each time.
func (l *Ledger) listWatched(ctx context.Context, ns string) ([]*kinds.Object, error) {
	l.mu.Lock()
	watched := l.watches.kinds
	l.mu.Unlock()
	var out []*kinds.Object
	for _, k := range watched {
		inf, err := l.cache.GetInformer(ctx, k.New())
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.GVK().Kind, err)
		}
		indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
		if !ok {
			return nil, fmt.Errorf("listing %s: the cache's informer %T has no store to read", k.GVK().Kind, inf)
		}
		store := indexed.GetIndexer()
		var objs []any
		if ns == "" {
			objs = store.List()
		} else if objs, err = store.ByIndex(toolscache.NamespaceIndex, ns); err != nil {
			return nil, fmt.Errorf("listing %s of namespace %s: %w", k.GVK().Kind, ns, err)
		}
		for _, obj := range objs {
			if o, ok := l.opts.Kinds.Of(obj); ok {
				out = append(out, o)
			}
		}
	}
	return out, nil
}
