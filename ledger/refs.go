package ledger

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
)

// Some kinds read their pod sets from other objects their workloads name
// (kinds.References: a TrainJob's runtime). The ledger watches those
// kinds of object too, and when one changes, appears or goes, it reads
// again the waiting workloads that named it, so that their pod sets,
// and whether they can be admitted at all, follow it. An admitted
// workload keeps what it was admitted with.

// watchReferences watches the kinds of object that the kinds of the
// registry read their pod sets from, those the API server serves and
// that are not watched yet.
func (l *Ledger) watchReferences(ctx context.Context) error {
	for _, k := range l.opts.Kinds.All() {
		for _, ref := range kinds.References(k) {
			if slices.Contains(l.watches.refs, ref.GVK) {
				continue
			}
			if _, err := l.client.RESTMapper().RESTMapping(ref.GVK.GroupKind(), ref.GVK.Version); err != nil {
				l.log.Info("referenced kind not served by the API server; not watched (it is once its CRD is installed and the config is reloaded)",
					"kind", ref.GVK.String(), "reason", err.Error())
				continue
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(ref.GVK)
			if err := l.watch(ctx, u, l.onReferenced, l.onReferenced); err != nil {
				return err
			}
			l.watches.refs = append(l.watches.refs, ref.GVK)
		}
	}
	return nil
}

// onReferenced reads again the waiting workloads that name obj.
func (l *Ledger) onReferenced(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	ref := kinds.ObjectRef{GVK: u.GroupVersionKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	type key struct {
		gvk       schema.GroupVersionKind
		namespace string
		name      string
	}
	var again []key
	l.mu.Lock()
	for _, e := range l.jobs {
		if p := e.Phase(); (p == machine.Pending || p == machine.Inadmissible) && slices.Contains(e.refs, ref) {
			again = append(again, key{kinds.GVKOf(e.W), e.W.Namespace, e.W.Name})
		}
	}
	l.mu.Unlock()
	for _, w := range again {
		k := l.opts.Kinds.For(w.gvk)
		if k == nil {
			continue
		}
		o := k.New()
		if err := l.cache.Get(context.Background(), client.ObjectKey{Namespace: w.namespace, Name: w.name}, o); err != nil {
			continue // gone: its delete is handled on its own
		}
		l.onJob(o)
	}
}
