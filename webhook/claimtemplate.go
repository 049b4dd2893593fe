package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ClaimTemplateGuardPath is where the ResourceClaimTemplate guard is
// served.
const ClaimTemplateGuardPath = "/validate-resource-v1-resourceclaimtemplate"

// ClaimTemplateGuard denies deleting a ResourceClaimTemplate of a managed
// namespace while a pod that is not done names it, or a workload that
// tally admitted and that has not finished does. A template's spec
// cannot change, so it can only be replaced by deleting it and making
// another of its name: the claims of such pods, made from it, would get
// what their workload was not charged for. A waiting workload's
// template may be replaced: the ledger charges it again. A namespace
// being deleted is let go.
type ClaimTemplateGuard struct {
	Jobs *JobMutator
	// Reader lists pods and workloads on the API server: a pod created
	// a moment ago counts.
	Reader client.Reader
}

// Handle implements admission.Handler.
func (g *ClaimTemplateGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("")
	}
	ns, err := g.Jobs.namespace(ctx, req.Namespace)
	if apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil {
		return admission.Allowed("its namespace is being deleted")
	}
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("tally: cannot read namespace %s (%v); retry the request", req.Namespace, err))
	}
	user, err := g.user(ctx, req.Namespace, req.Name)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"tally: cannot tell what uses ResourceClaimTemplate %s/%s (%v); retry the request", req.Namespace, req.Name, err))
	}
	if user != "" {
		return admission.Denied(fmt.Sprintf("tally: ResourceClaimTemplate %s/%s is in use by %s, which tally charged for the devices it asks for; delete it once that has finished",
			req.Namespace, req.Name, user))
	}
	return admission.Allowed("")
}

// user names a pod of namespace ns that is not done, or an admitted
// workload that has not finished, whose pods' claims are made from
// ResourceClaimTemplate name; "" when there is none.
func (g *ClaimTemplateGuard) user(ctx context.Context, ns, name string) (string, error) {
	pods := &corev1.PodList{}
	if err := g.Reader.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && slices.Contains(queues.ClaimTemplateNames(&p.Spec), name) {
			return "pod " + p.Name, nil
		}
	}
	for _, k := range g.Jobs.Kinds.All() {
		if kinds.IsPodKind(k) {
			continue
		}
		list := k.NewList()
		if err := g.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return "", err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return "", err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				continue
			}
			o, err := k.Read(obj)
			if err != nil || o.Meta.Labels[queues.LabelQueue] == "" || o.Suspended || o.Finished {
				continue
			}
			for _, ps := range o.PodSets {
				if slices.Contains(queues.ClaimTemplateNames(&ps.Template.Spec), name) {
					return o.Describe(), nil
				}
			}
		}
	}
	return "", nil
}
