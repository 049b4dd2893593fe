package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"tally.dev/tally/queues"
)

// ConfigName is the name of the config ConfigMap in tally's namespace.
const ConfigName = "tally-config"

// ConfigLoader keeps a Store in step with the config ConfigMap. Every
// replica runs it, since every replica serves the webhooks. A ConfigMap
// that does not validate leaves the last good config in force and is
// reported in an Event on the ConfigMap.
type ConfigLoader struct {
	Cache     cache.Cache
	Store     *queues.Store
	Recorder  record.EventRecorder
	Namespace string
	Log       logr.Logger
	// Report says whether this replica writes the Events (the leader).
	Report func() bool
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
	if !ok || cm.Namespace != c.Namespace || cm.Name != ConfigName {
		return
	}
	cfg, warnings, errs := queues.Parse([]byte(cm.Data[queues.ConfigKey]))
	report := c.Report == nil || c.Report()
	if len(errs) > 0 {
		msg := strings.Join(queues.FormatErrors(errs), "; ")
		c.Log.Error(errs.ToAggregate(), "config rejected; keeping the last good one", "configMap", cm.Namespace+"/"+cm.Name)
		if report {
			c.Recorder.Eventf(cm, corev1.EventTypeWarning, ReasonConfigInvalid, "Config rejected, the last good config stays in force: %s", msg)
		}
		return
	}
	for _, w := range warnings {
		c.Log.Info("config warning", "warning", w)
	}
	c.Store.Set(cfg)
	c.Log.Info("config loaded", "configMap", cm.Namespace+"/"+cm.Name, "resourceVersion", cm.ResourceVersion, "clusterQueues", len(cfg.QueueNames))
	if report {
		c.Recorder.Eventf(cm, corev1.EventTypeNormal, ReasonConfigLoaded, "Loaded %d ClusterQueues, %d ResourceFlavors", len(cfg.QueueNames), len(cfg.Flavors))
	}
}
