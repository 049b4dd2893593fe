package inspect

import (
	"context"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ClaimTemplates holds ResourceClaimTemplates by namespace and name: the
// read side charges a workload's claims from them, as the ledger does
// (queues.PodDefaults.ClaimRequests).
type ClaimTemplates map[string]map[string]*resourcev1.ResourceClaimTemplate

// ListClaimTemplates lists the ResourceClaimTemplates of each namespace
// where one of workloads names one. A namespace whose templates the
// caller may not list has none here: its workloads read as waiting for
// them.
func ListClaimTemplates(ctx context.Context, c client.Reader, workloads []*kinds.Object) ClaimTemplates {
	out := ClaimTemplates{}
	for _, o := range workloads {
		ns := o.Meta.Namespace
		if _, done := out[ns]; done || !slices.ContainsFunc(o.PodSets, func(ps kinds.PodSet) bool {
			return len(queues.ClaimTemplateNames(&ps.Template.Spec)) > 0
		}) {
			continue
		}
		byName := map[string]*resourcev1.ResourceClaimTemplate{}
		out[ns] = byName
		list := &resourcev1.ResourceClaimTemplateList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			continue
		}
		for i := range list.Items {
			byName[list.Items[i].Name] = queues.StripClaimTemplate(&list.Items[i])
		}
	}
	return out
}

// defaults are the pod defaults the read side reads a workload of
// namespace ns with: none, unless its namespace has templates.
func (t ClaimTemplates) defaults(cfg *queues.Config, ns string) *queues.PodDefaults {
	if len(t[ns]) == 0 {
		return nil
	}
	return &queues.PodDefaults{Config: cfg, ClaimTemplates: t[ns]}
}
