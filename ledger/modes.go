package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// FinishedLabel says how the ledger writes tally.dev/state=finished.
type FinishedLabel string

const (
	// FinishedLabelEager writes it as soon as a workload finishes.
	FinishedLabelEager FinishedLabel = "eager"
	// FinishedLabelLazy writes it through a queue of its own, one write
	// per workload however often it is asked for, at most
	// Options.FinishedLabelRate a second, and only while no admission or
	// preemption write is in flight and no pass is asked for.
	FinishedLabelLazy FinishedLabel = "lazy"
	// FinishedLabelOff never writes it: a finished workload keeps the
	// state label it had (admitted, mostly); its own status says it
	// finished. The quota is released as with the label (react reads the
	// status, not the label).
	FinishedLabelOff FinishedLabel = "off"
)

// Events says which Events on a workload's decisions the ledger records.
type Events string

const (
	// EventsAll records every Event of docs/operations.md, "Events".
	EventsAll Events = "all"
	// EventsMinimal records no Queued or Pending Event for a workload
	// that every pass finds fitting until it is admitted: those are for
	// workloads that wait. Every other Event is recorded.
	EventsMinimal Events = "minimal"
)

// AdmissionPatch is how the admission write is encoded. Each is one API
// write, guarded by the resourceVersion the decision saw.
type AdmissionPatch string

const (
	// AdmissionPatchMerge is a JSON merge patch (RFC 7386).
	AdmissionPatchMerge AdmissionPatch = "merge"
	// AdmissionPatchJSON is a JSON patch (RFC 6902), built from the merge
	// patch and the informer's copy of the workload; it replaces
	// metadata.resourceVersion with the decision's, so that the write
	// fails with a Conflict as the merge patch does.
	AdmissionPatchJSON AdmissionPatch = "json"
	// AdmissionPatchApply is a server-side apply of the merge patch's
	// fields, forced, as fieldManager tally-admission, with the
	// decision's resourceVersion in its metadata (a Conflict when the
	// workload changed). Apply cannot delete a field: the merge patch's
	// nulls are left out.
	AdmissionPatchApply AdmissionPatch = "apply"
)

// FinishedLabels, EventModes and AdmissionPatches list each mode's values,
// the default first, for the flags.
var (
	FinishedLabels   = []FinishedLabel{FinishedLabelEager, FinishedLabelLazy, FinishedLabelOff}
	EventModes       = []Events{EventsAll, EventsMinimal}
	AdmissionPatches = []AdmissionPatch{AdmissionPatchMerge, AdmissionPatchJSON, AdmissionPatchApply}
)

// ParseMode checks that v is one of values, for a flag named name.
func ParseMode[T ~string](name, v string, values []T) (T, error) {
	if slices.Contains(values, T(v)) {
		return T(v), nil
	}
	names := make([]string, len(values))
	for i, x := range values {
		names[i] = string(x)
	}
	return "", fmt.Errorf("--%s: %q is not one of %s", name, v, strings.Join(names, ", "))
}

// EncodeAdmission encodes an admission's merge patch, guarded by
// resourceVersion rv, as mode says: the patch and its options (the
// fieldManager tally-admission, forced for apply). ref names the
// workload; cached is the informer's copy of it at rv, which only the
// JSON patch needs (it names the objects it adds into).
func EncodeAdmission(mode AdmissionPatch, ref, cached client.Object, rv string, merge []byte) (client.Patch, []client.PatchOption, error) {
	owner := client.FieldOwner(queues.FieldManagerAdmission)
	switch mode {
	case AdmissionPatchJSON:
		body, err := jsonAdmissionPatch(cached, rv, merge)
		if err != nil {
			return nil, nil, err
		}
		return client.RawPatch(types.JSONPatchType, body), []client.PatchOption{owner}, nil
	case AdmissionPatchApply:
		body, err := applyAdmission(ref, merge)
		if err != nil {
			return nil, nil, err
		}
		return client.RawPatch(types.ApplyPatchType, body), []client.PatchOption{owner, client.ForceOwnership}, nil
	}
	return client.RawPatch(types.MergePatchType, merge), []client.PatchOption{owner}, nil
}

// jsonAdmissionPatch is the JSON patch that makes the change merge makes
// to obj, the informer's copy, guarded by resourceVersion rv: its first
// op replaces metadata.resourceVersion with rv, so that the API server
// refuses the write with a Conflict if the object changed since, as it
// does the merge patch that carries rv.
func jsonAdmissionPatch(obj client.Object, rv string, merge []byte) ([]byte, error) {
	var src map[string]any
	if job, ok := obj.(*batchv1.Job); ok {
		// The cache strips Jobs (kinds.StripJob) but keeps every object an
		// admission patch goes through, with their content.
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
		if err != nil {
			return nil, err
		}
		src = m
	} else if u, ok := obj.(*unstructured.Unstructured); ok {
		src = u.Object
	}
	var p kinds.MergePatch
	if err := json.Unmarshal(merge, &p); err != nil {
		return nil, err
	}
	ops := append([]kinds.JSONPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: rv}}, kinds.JSONPatch(src, p)...)
	return json.Marshal(ops)
}

// applyAdmission is the apply configuration of an admission: the merge
// patch's fields, its nulls left out, with the workload's identity.
func applyAdmission(ref client.Object, merge []byte) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(merge, &p); err != nil {
		return nil, err
	}
	p = kinds.WithoutNulls(p)
	gvk := ref.GetObjectKind().GroupVersionKind()
	p["apiVersion"], p["kind"] = gvk.GroupVersion().String(), gvk.Kind
	meta, _ := p["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		p["metadata"] = meta
	}
	meta["name"], meta["namespace"] = ref.GetName(), ref.GetNamespace()
	return json.Marshal(p)
}
