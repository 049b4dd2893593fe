package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ConfigLoader keeps a Store in step with the config ConfigMap. Every
// replica runs it, since every replica serves the webhooks. A ConfigMap
// that kinds.Accept refuses leaves the last good config in force and is
// reported in an Event on the ConfigMap.
type ConfigLoader struct {
	Cache     cache.Cache
	Store     *queues.Store
	Recorder  record.EventRecorder
	Namespace string
	Log       logr.Logger
	// Report says whether this replica writes the Events (the leader).
	Report func() bool
	// Mapper resolves a declared kind's resource name (nil: the kind's
	// name in lower case with an s).
	Mapper meta.RESTMapper
	// Kinds is where the config's kinds are declared.
	Kinds *kinds.Registry

	// declared holds every kind a config declared since the start: one
	// whose declaration goes stays known until tally restarts, so that
	// its workloads keep their quota.
	declared map[schema.GroupVersionKind]*kinds.Declared
}

// NeedLeaderElection: every replica loads the config.
func (c *ConfigLoader) NeedLeaderElection() bool { return false }

// Start watches the ConfigMap until ctx ends.
func (c *ConfigLoader) Start(ctx context.Context) error {
	inf, err := c.Cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("config: informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.load,
		UpdateFunc: func(_, n any) { c.load(n) },
	})
	if err != nil {
		return fmt.Errorf("config: handler: %w", err)
	}
	<-ctx.Done()
	return nil
}

func (c *ConfigLoader) load(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Namespace != c.Namespace || cm.Name != queues.ConfigName {
		return
	}
	acc := kinds.Accept(context.Background(), kinds.Text(cm.Data[queues.ConfigKey]), kinds.API{Mapper: c.Mapper})
	report := c.Report == nil || c.Report()
	if len(acc.Errs) > 0 {
		msg := strings.Join(queues.FormatErrors(acc.Errs), "; ")
		c.Log.Error(acc.Errs.ToAggregate(), "config rejected; keeping the last good one", "configMap", cm.Namespace+"/"+cm.Name)
		if report {
			c.Recorder.Eventf(cm, corev1.EventTypeWarning, ReasonConfigInvalid, "Config rejected, the last good config stays in force: %s", msg)
		}
		return
	}
	for _, w := range acc.Warnings {
		c.Log.Info("config warning", "warning", w)
	}
	c.declare(acc, cm, report)
	cfg := acc.Config
	c.Store.Set(cfg)
	c.Log.Info("config loaded", "configMap", cm.Namespace+"/"+cm.Name, "resourceVersion", cm.ResourceVersion, "clusterQueues", len(cfg.QueueNames))
	if report {
		c.Recorder.Eventf(cm, corev1.EventTypeNormal, ReasonConfigLoaded, "Loaded %d ClusterQueues, %d ResourceFlavors", len(cfg.QueueNames), len(cfg.Flavors))
	}
}

// declare puts the config's declared kinds in force (c.Kinds), with
// those declared by earlier configs. A kind the API server does not serve
// is reported and left out until a later load finds it served.
func (c *ConfigLoader) declare(acc kinds.Accepted, cm *corev1.ConfigMap, report bool) {
	if c.declared == nil {
		c.declared = map[schema.GroupVersionKind]*kinds.Declared{}
	}
	for _, u := range acc.Unserved {
		spec := u.Spec
		c.Log.Info("declared workload kind not served by the API server; not queued until its CRD is installed and the config is reloaded",
			"workloadKind", spec.Name, "reason", u.Err.Error())
		if report {
			c.Recorder.Eventf(cm, corev1.EventTypeWarning, ReasonConfigInvalid,
				"WorkloadKind %s: %s/%s %s is not served by the API server (%v); it is not queued until its CRD is installed and the config is reloaded",
				spec.Name, spec.Group, spec.Version, spec.Kind, u.Err)
		}
	}
	for _, d := range acc.Kinds {
		c.declared[d.GVK()] = d
	}
	all := make([]*kinds.Declared, 0, len(c.declared))
	for _, gvk := range slices.SortedFunc(maps.Keys(c.declared), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) }) {
		all = append(all, c.declared[gvk])
	}
	c.Kinds.Declare(all)
}
