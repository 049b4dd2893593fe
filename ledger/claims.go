package ledger

import (
	"slices"

	resourcev1 "k8s.io/api/resource/v1"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// A workload is charged the devices its pods' ResourceClaimTemplates ask
// for (queues.PodDefaults.ClaimRequests). The ledger watches the
// templates, stripped (StripClaimTemplate), keeps each namespace's in
// its pod defaults, and, when one is created, replaced or deleted, builds
// again the waiting workloads of its namespace that name it, as it does
// for a LimitRange.

// StripClaimTemplate is a cache transform that keeps only what the
// ledger charges of a ResourceClaimTemplate (queues.StripClaimTemplate).
func StripClaimTemplate(obj any) (any, error) {
	t, ok := obj.(*resourcev1.ResourceClaimTemplate)
	if !ok {
		return obj, nil
	}
	return queues.StripClaimTemplate(t), nil
}

func (l *Ledger) onClaimTemplate(obj any) { l.setClaimTemplate(obj, false) }

func (l *Ledger) onClaimTemplateDelete(obj any) { l.setClaimTemplate(obj, true) }

func (l *Ledger) setClaimTemplate(obj any, deleted bool) {
	t, ok := obj.(*resourcev1.ResourceClaimTemplate)
	if !ok {
		return
	}
	l.mu.Lock()
	setNamed(l.inputs.claimTemplates, t.Namespace, t.Name, t, deleted)
	l.namespaceDefaultsChanged(t.Namespace, namesTemplate(t.Name))
}

// namesTemplate says whether a workload's pod sets name
// ResourceClaimTemplate name.
func namesTemplate(name string) func(*kinds.Object) bool {
	return func(o *kinds.Object) bool {
		for _, ps := range o.PodSets {
			if slices.Contains(queues.ClaimTemplateNames(&ps.Template.Spec), name) {
				return true
			}
		}
		return false
	}
}
