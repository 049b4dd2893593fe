package inspect

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// LoadConfig reads the config in force from file, or else from the
// ConfigMap in tally's namespace, and declares its kinds in the registry
// it returns.
func LoadConfig(ctx context.Context, c client.Reader, namespace, file string) (*queues.Config, *kinds.Registry, error) {
	src := kinds.Files(file)
	if file == "" {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: queues.ConfigName}, cm); err != nil {
			return nil, nil, fmt.Errorf("reading the config: %w", err)
		}
		src = kinds.Text(cm.Data[queues.ConfigKey])
	}
	// Offline: the client maps each kind to its resource itself.
	acc := kinds.Accept(ctx, src, kinds.API{})
	if len(acc.Errs) > 0 {
		return nil, nil, fmt.Errorf("the config does not validate (tally keeps its last good one in force, which this command cannot see): %s",
			strings.Join(queues.FormatErrors(acc.Errs), "; "))
	}
	ks := kinds.NewRegistry()
	ks.SetLookup(kinds.ReaderLookup(ctx, c))
	ks.Declare(acc.Kinds)
	return acc.Config, ks, nil
}

// ListWorkloads lists the managed workloads of every kind of ks, as
// the ledger counts them (each stripped to what the books need: a cluster
// may hold 100k Jobs). A kind whose CRD is not installed has none.
func ListWorkloads(ctx context.Context, ks *kinds.Registry, c client.Reader, opts ...client.ListOption) ([]*kinds.Object, error) {
	var out []*kinds.Object
	for _, k := range ks.All() {
		list := k.NewList()
		for {
			err := c.List(ctx, list, append([]client.ListOption{client.HasLabels{queues.LabelQueue}, client.Limit(1000), client.Continue(list.GetContinue())}, opts...)...)
			if meta.IsNoMatchError(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", k.GVK().Kind, err)
			}
			if err := meta.EachListItem(list, func(obj runtime.Object) error {
				_, _ = kinds.StripJob(obj)
				if o, ok := ks.Of(obj); ok {
					out = append(out, o)
				}
				return nil
			}); err != nil {
				return nil, err
			}
			if list.GetContinue() == "" {
				break
			}
		}
	}
	return out, nil
}
