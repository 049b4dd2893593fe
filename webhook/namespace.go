package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/queues"
)

// The Namespace webhooks' paths.
const (
	NamespaceMutatePath   = "/mutate-v1-namespace"
	NamespaceValidatePath = "/validate-v1-namespace"
)

// NamespaceMutator keeps the tally.dev/managed label on exactly the managed
// namespaces: those with the tally.dev/cluster-queue annotation or named by
// a LocalQueue of the config in force.
type NamespaceMutator struct {
	Store     *queues.Store
	Namespace string
	Decoder   admission.Decoder
}

// Handle implements admission.Handler.
func (m *NamespaceMutator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	ns := &corev1.Namespace{}
	if err := m.Decoder.DecodeRaw(req.Object, ns); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Namespace: %w", err))
	}
	has := ns.Labels[queues.LabelManaged] == "true"
	want := queues.WantsManagedLabel(m.Store.Load(), ns.Name, ns.Annotations[queues.AnnotationNamespaceQueue], m.Namespace, has)
	if want == has {
		return admission.Allowed("")
	}
	if want {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[queues.LabelManaged] = "true"
	} else {
		delete(ns.Labels, queues.LabelManaged)
	}
	out, err := json.Marshal(ns)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// NamespaceValidator denies a binding to a ClusterQueue the config in force
// does not define.
type NamespaceValidator struct {
	Store     *queues.Store
	Namespace string
	Decoder   admission.Decoder
}

// Handle implements admission.Handler.
func (v *NamespaceValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	ns := &corev1.Namespace{}
	if err := v.Decoder.DecodeRaw(req.Object, ns); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Namespace: %w", err))
	}
	if msg := ValidateBinding(v.Store.Load(), ns, v.Namespace); msg != "" {
		return admission.Denied(msg)
	}
	return admission.Allowed("")
}

// ValidateBinding returns why a namespace's binding is invalid, or "".
func ValidateBinding(cfg *queues.Config, ns *corev1.Namespace, own string) string {
	q, ok := ns.Annotations[queues.AnnotationNamespaceQueue]
	if !ok {
		return ""
	}
	path := fmt.Sprintf("metadata.annotations[%s]", queues.AnnotationNamespaceQueue)
	switch {
	case q == "":
		return fmt.Sprintf("%s: must name a ClusterQueue", path)
	case ns.Name == own || ns.Name == "kube-system":
		return fmt.Sprintf("%s: namespace %s is never managed by tally", path, ns.Name)
	case cfg == nil:
		return ""
	case cfg.ClusterQueues[q] == nil:
		return fmt.Sprintf("%s: ClusterQueue %q is not defined; known ClusterQueues: %s", path, q, strings.Join(cfg.QueueNames, ", "))
	}
	return ""
}
