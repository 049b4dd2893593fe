package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// scaled are the kinds whose CustomResourceDefinition declares a scale
// subresource, as the operators that e2e/toolchain/build.sh builds ship
// them: the training operator's (v1.9) PyTorchJob, PaddleJob and JAXJob,
// whose scale is their Worker replicas. Its TFJob and XGBoostJob, the MPI
// operator's MPIJob, KubeRay's RayJob and JobSet have none, and batch/v1
// Job has none either.
var scaled = []kinds.Kind{kinds.PyTorchJob, kinds.PaddleJob, kinds.JAXJob}

// hasScale says whether k's resource may have a scale subresource, which
// the guard then watches too: a scale-up goes through it, not through an
// update of the workload. A declared kind's CRD may declare one; a rule
// for a subresource its CRD does not have matches nothing.
func hasScale(k kinds.Kind) bool {
	if _, declared := k.(*kinds.Declared); declared {
		return true
	}
	for _, s := range scaled {
		if s.GVK() == k.GVK() {
			return true
		}
	}
	return false
}

// scaledKind returns the kind of ks whose scale subresource req writes,
// or nil.
func scaledKind(ks *kinds.Registry, req admission.Request) kinds.Kind {
	r := req.Resource
	for _, k := range ks.All() {
		if gvk := k.GVK(); gvk.Group == r.Group && gvk.Version == r.Version && k.Resource() == r.Resource {
			return k
		}
	}
	return nil
}

// handleScale guards an UPDATE of a workload's /scale subresource, whose
// objects are autoscaling/v1 Scales: it denies raising spec.replicas of an
// admitted workload (managed and not suspended), whose quota was admitted
// for the pods it had. A scale-down passes, and so does a scale-up of a
// pending workload, which is queued again with its new shape. Without a
// Reader the guard cannot tell, and denies every scale-up.
func (g *JobGuard) handleScale(ctx context.Context, req admission.Request) admission.Response {
	k := scaledKind(g.Kinds, req)
	if k == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: %s/scale is not the scale of a workload kind tally queues", req.Resource.Resource))
	}
	kind := k.GVK().Kind
	old, cur := &autoscalingv1.Scale{}, &autoscalingv1.Scale{}
	scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	if err := decodeObject(g.Decoder, req.OldObject, old, scaleGVK); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding the old Scale of a %s: %w", kind, err))
	}
	if err := decodeObject(g.Decoder, req.Object, cur, scaleGVK); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding the Scale of a %s: %w", kind, err))
	}
	if cur.Spec.Replicas <= old.Spec.Replicas {
		return admission.Allowed("")
	}
	if g.Reader != nil {
		admitted, err := g.admitted(ctx, k, req)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, err)
		}
		if !admitted {
			return admission.Allowed("")
		}
	}
	errs := field.ErrorList{field.Forbidden(field.NewPath("spec", "replicas"), fmt.Sprintf(
		"only tally may scale up an admitted %s in a managed namespace; its quota was admitted for %d pods (delete and re-create the %s to run more)", kind, old.Spec.Replicas, kind))}
	return admission.Denied("tally: " + strings.Join(queues.FormatErrors(errs), "; "))
}

// admitted reads the workload of kind k that req scales and says whether
// tally admitted it: it is managed and not suspended.
func (g *JobGuard) admitted(ctx context.Context, k kinds.Kind, req admission.Request) (bool, error) {
	obj := k.New()
	if err := g.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, obj); err != nil {
		return false, fmt.Errorf("tally: cannot read %s %s/%s to check its scale-up: %w", k.GVK().Kind, req.Namespace, req.Name, err)
	}
	o, err := k.Read(obj)
	if err != nil {
		return false, fmt.Errorf("tally: reading %s %s/%s to check its scale-up: %w", k.GVK().Kind, req.Namespace, req.Name, err)
	}
	return managed(o.Meta) && !o.Suspended, nil
}
