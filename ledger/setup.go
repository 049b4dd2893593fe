package ledger

import (
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// JobSelector is the label selector of the batch/v1 Jobs the ledger
// watches: those not labelled tally.dev/state=finished (and those with no
// state label), or, if watchFinished, all (nil). See CacheOptions; a
// JobWatch opens its watches with it too.
func JobSelector(watchFinished bool) labels.Selector {
	if watchFinished {
		return nil
	}
	r, err := labels.NewRequirement(queues.LabelState, selection.NotEquals, []string{string(queues.StateFinished)})
	if err != nil {
		panic(err) // a constant requirement
	}
	return labels.NewSelector().Add(*r)
}

// CacheOptions are what the ledger needs of the manager's cache: Jobs
// stripped to what it reads (kinds.StripJob), the pods of admitted workloads
// stripped to their owner and phase (StripPod), and, when the config comes from
// the ConfigMap (fromConfigMap), that one ConfigMap of namespace; and the
// LimitRanges, RuntimeClasses and ResourceClaimTemplates stripped to what
// makes pod defaults.
//
// Unless watchFinished, the Jobs exclude those labelled
// tally.dev/state=finished. A finished Job holds no quota and its finish
// is final, and the label is the last thing tally writes on it: once
// labelled, it leaves the watch and the ledger forgets it as if it were
// deleted (its pods that still run keep its quota until they are gone).
// So what tally keeps follows the Jobs queued and running, not the
// cluster's history of finished ones.
func CacheOptions(namespace string, fromConfigMap, watchFinished bool) map[client.Object]cache.ByObject {
	byObject := map[client.Object]cache.ByObject{
		kinds.Job{}.New():                   {Label: JobSelector(watchFinished), Transform: kinds.StripJob},
		&corev1.Pod{}:                       {Label: podSelector(), Transform: StripPod},
		&corev1.LimitRange{}:                {Transform: StripLimitRange},
		&nodev1.RuntimeClass{}:              {Transform: StripRuntimeClass},
		&corev1.Node{}:                      {Transform: StripNode},
		&resourcev1.ResourceClaimTemplate{}: {Transform: StripClaimTemplate},
	}
	if fromConfigMap {
		byObject[&corev1.ConfigMap{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", queues.ConfigName),
		}
	}
	return byObject
}

// Setup adds the ledger to mgr, and, when the config comes from the
// ConfigMap (fromConfigMap), the ConfigLoader that keeps store up to date
// (every replica loads it; only the leader reports on it).
func Setup(mgr manager.Manager, store *queues.Store, fromConfigMap bool, log logr.Logger, opts Options) error {
	// The Events' client speaks protobuf unless tally's requests are JSON
	// (--api-content-type=json), as controller-runtime's clients do.
	eventsCfg := rest.CopyConfig(mgr.GetConfig())
	if eventsCfg.ContentType == "" {
		eventsCfg.ContentType = runtime.ContentTypeProtobuf
	}
	events, err := corev1client.NewForConfigAndClient(eventsCfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("the Events' client: %w", err)
	}
	recorder := NewEventQueue(&corev1client.EventSinkImpl{Interface: events.Events("")}, mgr.GetScheme(), "tally", nil, log.WithName("events"))
	if err := mgr.Add(recorder); err != nil {
		return err
	}
	if opts.Kinds == nil {
		opts.Kinds = kinds.NewRegistry()
	}
	if fromConfigMap {
		elected := mgr.Elected()
		if err := mgr.Add(&ConfigLoader{
			Cache: mgr.GetCache(), Store: store, Recorder: recorder, Namespace: opts.Namespace, Log: log.WithName("config"),
			Mapper: mgr.GetRESTMapper(), Kinds: opts.Kinds,
			Report: func() bool {
				select {
				case <-elected:
					return true
				default:
					return false
				}
			},
		}); err != nil {
			return err
		}
	}
	if err := mgr.Add(&FlavorWatch{Cache: mgr.GetCache(), Store: store, Recorder: recorder, Mapper: mgr.GetRESTMapper(),
		Namespace: opts.Namespace, FromFile: !fromConfigMap, Log: log.WithName("flavors")}); err != nil {
		return err
	}
	cl, free, err := writeClient(mgr)
	if err != nil {
		return fmt.Errorf("the ledger's client: %w", err)
	}
	opts.Budget = free
	if opts.BoundPods, err = BoundPodsCache(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper()); err != nil {
		return fmt.Errorf("the bound pods' cache: %w", err)
	}
	opts.Mapper = mgr.GetRESTMapper()
	l := New(cl, mgr.GetCache(), store, recorder, log.WithName("ledger"), opts)
	if opts.DashboardAddr != "" {
		if err := mgr.Add(&Dashboard{Addr: opts.DashboardAddr, Ledger: l, Log: log.WithName("dashboard")}); err != nil {
			return err
		}
	}
	return mgr.Add(l)
}
