package kinds

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// Pod is a v1 Pod that tally queues on its own, a single-pod workload: a
// pod of a managed namespace that asks for a covered resource and does
// not belong to an admitted workload (a bare Pod, a Deployment's pod).
// The pod gate (webhook.PodGate) holds it with the scheduling gate
// queues.SchedulingGate and labels it queues.LabelWorkload=PodWorkload;
// admission removes the gate, narrows it by nodeSelector (a gated pod's
// affinity may not change) and sets the label to the pod's own UID. A
// pod cannot be suspended again: tally evicts it by deleting it, and a
// controller that makes it again makes a new, gated one. Only such pods
// are workloads of this kind: Read refuses any other pod.
type Pod struct{}

// The paths of a Pod's fields. The pod is its own template: its path is
// the root, which is not nil (nil says a pod set the object does not hold).
var (
	podRoot      = []string{}
	podTemplates = [][]string{podRoot}
	podGates     = []string{"spec", "schedulingGates"}
)

// ErrNotWorkload is Read's error for a pod that is not a single-pod
// workload.
var ErrNotWorkload = errors.New("kinds: the pod is not a single-pod workload")

func (Pod) GVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }
func (Pod) Resource() string             { return "pods" }
func (Pod) New() client.Object           { return &corev1.Pod{} }
func (Pod) NewList() client.ObjectList   { return &corev1.PodList{} }
func (Pod) Shape() any                   { return &corev1.Pod{} }
func (Pod) SuspendPath() []string        { return podGates }
func (Pod) gatesPods()                   {}
func (Pod) writes() writes               { return podWrites{} }

// suspendValue is the pod's scheduling gates with (suspend) or without
// tally's.
func (Pod) suspendValue(o *Object, suspend bool) any {
	gates := WithoutGate(o.Obj.(*corev1.Pod).Spec.SchedulingGates)
	if suspend {
		gates = append(gates, corev1.PodSchedulingGate{Name: queues.SchedulingGate})
	}
	if len(gates) == 0 {
		return nil
	}
	return gates
}

func isTallyGate(g corev1.PodSchedulingGate) bool { return g.Name == queues.SchedulingGate }

// WithoutGate returns gates without tally's, in a new slice.
func WithoutGate(gates []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	return slices.DeleteFunc(slices.Clone(gates), isTallyGate)
}

// podWrites are a Pod's writes: it is narrowed by nodeSelector, as a
// gated pod's affinity may not change (selectorWrites); it runs once
// tally's scheduling gate is taken out of its gates, which only a merge
// patch does among other managers' gates; and it cannot be suspended
// again, so its eviction deletes it.
type podWrites struct{ selectorWrites }

// resume is the pod's gates without tally's: nil for none.
func (podWrites) resume(t *Target) any { return t.Resume }

func (podWrites) evict(*Target, map[string]any) (Eviction, error) { return Eviction{Delete: true}, nil }

func (podWrites) mergeOnly() bool { return true }

// EvictsByDeletion says whether tally evicts a workload of kind k by
// deleting it, as it cannot be suspended again (a Pod once its scheduling
// gate is gone): it cannot be requeued either.
func EvictsByDeletion(k Kind) bool {
	_, ok := writesOf(k).(podWrites)
	return ok
}

// PartPatch is the pod gate's JSON patch of a new pod that is part of
// workload uid: labelled with uid (LabelWorkload), so that the ledger
// counts it, and held by tally's scheduling gate when gate says, without
// it otherwise.
func PartPatch(pod *corev1.Pod, uid types.UID, gate bool) []JSONPatchOp {
	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[queues.LabelWorkload] = string(uid)
	var ops []JSONPatchOp
	if !maps.Equal(labels, pod.Labels) {
		ops = append(ops, JSONPatchOp{Op: "add", Path: "/metadata/labels", Value: labels})
	}
	gates := WithoutGate(pod.Spec.SchedulingGates)
	if gate {
		gates = append(gates, corev1.PodSchedulingGate{Name: queues.SchedulingGate})
	}
	if !slices.Equal(gates, pod.Spec.SchedulingGates) {
		if len(gates) == 0 {
			ops = append(ops, JSONPatchOp{Op: "remove", Path: "/spec/schedulingGates"})
		} else {
			ops = append(ops, JSONPatchOp{Op: "add", Path: "/spec/schedulingGates", Value: gates})
		}
	}
	return ops
}

// UngatePatch is the merge patch that takes tally's scheduling gate off
// pod, keeping the others, and adds nodeSelector's labels to its
// nodeSelector (a gated pod's nodeSelector may gain keys): the topology
// domain it goes to.
func UngatePatch(pod *corev1.Pod, nodeSelector map[string]string) ([]byte, error) {
	var gates any
	if rest := WithoutGate(pod.Spec.SchedulingGates); len(rest) > 0 {
		gates = rest
	}
	spec := map[string]any{"schedulingGates": gates}
	if len(nodeSelector) > 0 {
		spec["nodeSelector"] = nodeSelector
	}
	return json.Marshal(map[string]any{"spec": spec})
}

// Gated says whether tally's scheduling gate holds pod.
func Gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, isTallyGate)
}

// IsPodWorkload says whether pod is a single-pod workload: its
// LabelWorkload is PodWorkload (queued) or its own UID (admitted).
func IsPodWorkload(pod *corev1.Pod) bool {
	v := pod.Labels[queues.LabelWorkload]
	return v == queues.PodWorkload || v != "" && v == string(pod.UID)
}

func (k Pod) Read(obj client.Object) (*Object, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, errShape(k, obj)
	}
	if !IsPodWorkload(pod) {
		return nil, ErrNotWorkload
	}
	o := &Object{
		Kind: k, Obj: pod, Meta: &pod.ObjectMeta,
		PodSets: []PodSet{{Name: queues.MainPodSet, Count: 1, Path: podRoot,
			Template: &corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}},
		Suspended:     Gated(pod),
		Started:       pod.Status.StartTime != nil,
		suspendParent: true,
		templates:     podTemplates,
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		o.Finished = true
		for _, s := range pod.Status.ContainerStatuses {
			if t := s.State.Terminated; t != nil && t.FinishedAt.After(o.FinishedAt) {
				o.FinishedAt = t.FinishedAt.Time
			}
		}
	case corev1.PodRunning:
		o.Active = 1
	}
	return o, nil
}
