package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"tally.dev/tally/queues"
)

// UnmanagedGuardPath is where the guard of workloads outside the managed
// namespaces is served.
const UnmanagedGuardPath = "/validate-unmanaged-workload"

// UnmanagedGuard keeps tally's state label (queues.LabelState) out of the
// hands of users in the namespaces tally does not manage. The ledger
// takes a workload that carries the label for one tally queued, wherever
// it is: a Job (or a pod labelled as a single-pod workload) created with
// it in such a namespace would be admitted into the ClusterQueue its
// queue label names, and one labelled admitted would be charged to it. Its webhook is called, outside the managed namespaces,
// only for writes by anyone but tally of workloads that carry the label
// (before or after); it denies a CREATE with the label, and an UPDATE
// that adds it or changes it or the queue label. A workload queued before
// its namespace lost its binding keeps its labels and may be updated
// otherwise.
type UnmanagedGuard struct {
	// Users are the user names tally acts as (see JobGuard.Users).
	Users []string
}

// Handle implements admission.Handler.
func (g *UnmanagedGuard) Handle(_ context.Context, req admission.Request) admission.Response {
	if u := req.UserInfo.Username; u != "" && slices.Contains(g.Users, u) {
		return admission.Allowed("tally's own write")
	}
	var obj, old struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	for _, r := range []struct {
		raw []byte
		to  any
	}{{req.Object.Raw, &obj}, {req.OldObject.Raw, &old}} {
		if len(r.raw) > maxGuardedObject {
			return admission.Errored(http.StatusRequestEntityTooLarge,
				fmt.Errorf("tally: a %s of %d bytes is larger than the %d-byte limit", req.Kind.Kind, len(r.raw), maxGuardedObject))
		}
		if len(r.raw) == 0 {
			continue
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(r.raw, r.to); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", req.Kind.Kind, err))
		}
	}
	state, ok := obj.Metadata.Labels[queues.LabelState]
	if !ok {
		return admission.Allowed("")
	}
	was, had := old.Metadata.Labels[queues.LabelState]
	path := "metadata.labels[" + queues.LabelState + "]"
	switch {
	case req.Operation == admissionv1.Create:
		return admission.Denied(fmt.Sprintf("tally: %s: only tally sets this label, and namespace %s is not bound to a ClusterQueue (annotation %s), so a %s may not be created with it; remove the label",
			path, req.Namespace, queues.AnnotationNamespaceQueue, req.Kind.Kind))
	case !had || was != state:
		return admission.Denied(fmt.Sprintf("tally: %s: only tally sets this label, and namespace %s is not bound to a ClusterQueue (annotation %s); it may not be added or changed (from %q to %q)",
			path, req.Namespace, queues.AnnotationNamespaceQueue, was, state))
	case obj.Metadata.Labels[queues.LabelQueue] != old.Metadata.Labels[queues.LabelQueue]:
		return admission.Denied(fmt.Sprintf("tally: metadata.labels[%s]: only tally sets the queue of a %s that carries %s, and namespace %s is not bound to a ClusterQueue; it may not change (from %q to %q)",
			queues.LabelQueue, req.Kind.Kind, queues.LabelState, req.Namespace, old.Metadata.Labels[queues.LabelQueue], obj.Metadata.Labels[queues.LabelQueue]))
	}
	return admission.Allowed("")
}
