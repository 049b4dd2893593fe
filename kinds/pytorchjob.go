package kinds

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PyTorchJob is Kubeflow's kubeflow.org/v1 PyTorchJob, run by the
// training operator: a pod set per entry of spec.pytorchReplicaSpecs
// (Master, Worker), named in lower case, each of replicas pods (default
// 1); suspended by spec.runPolicy.suspend; finished when Succeeded or
// Failed. On suspend the operator deletes the pods and their Services and
// sets a Suspended condition; on resume it starts them afresh.
type PyTorchJob struct{}

// replicaOrder is the training operator's order of replica types; others
// follow by name.
var replicaOrder = map[string]int{"Master": 0, "Worker": 1}

func (PyTorchJob) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}
}
func (PyTorchJob) Resource() string { return "pytorchjobs" }
func (k PyTorchJob) New() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK())
	return u
}
func (k PyTorchJob) NewList() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.GVK().Kind + "List"))
	return l
}
func (PyTorchJob) SuspendPath() []string { return []string{"spec", "runPolicy", "suspend"} }

// Shape is a PyTorchJob's pod templates, where it holds them.
func (PyTorchJob) Shape() any {
	return &struct {
		Spec struct {
			Replicas map[string]struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"pytorchReplicaSpecs"`
		} `json:"spec"`
	}{}
}

func (k PyTorchJob) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{Kind: k, Obj: u, Meta: metaOf(u)}
	specs, _, err := unstructured.NestedMap(u.Object, "spec", "pytorchReplicaSpecs")
	if err != nil {
		return nil, fmt.Errorf("spec.pytorchReplicaSpecs: %w", err)
	}
	types := make([]string, 0, len(specs))
	for t := range specs {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		oi, iok := replicaOrder[types[i]]
		oj, jok := replicaOrder[types[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return types[i] < types[j]
	})
	for _, t := range types {
		spec, ok := specs[t].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.pytorchReplicaSpecs.%s: not an object", t)
		}
		count := int64(1)
		if r, ok := spec["replicas"]; ok && r != nil {
			if count, ok = number(r); !ok {
				return nil, fmt.Errorf("spec.pytorchReplicaSpecs.%s.replicas: not a number", t)
			}
		}
		tpl := &corev1.PodTemplateSpec{}
		if raw, ok := spec["template"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl); err != nil {
				return nil, fmt.Errorf("spec.pytorchReplicaSpecs.%s.template: %w", t, err)
			}
		}
		o.PodSets = append(o.PodSets, PodSet{Name: strings.ToLower(t), Count: count, Template: tpl,
			Path: []string{"spec", "pytorchReplicaSpecs", t, "template"}, CountPath: []string{"spec", "pytorchReplicaSpecs", t, "replicas"}})
	}
	o.Suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "runPolicy", "suspend")
	_, o.suspendParent, _ = unstructured.NestedFieldNoCopy(u.Object, "spec", "runPolicy")
	statuses, _, _ := unstructured.NestedMap(u.Object, "status", "replicaStatuses")
	for _, s := range statuses {
		if m, ok := s.(map[string]any); ok {
			if a, ok := number(m["active"]); ok {
				o.Active += int32(a)
			}
		}
	}
	_, o.Started, _ = unstructured.NestedString(u.Object, "status", "startTime")
	conds, stopped := conditionsTrue(u, "Suspended")
	o.Finished = conds["Succeeded"] || conds["Failed"]
	if conds["Suspended"] {
		o.StoppedSince = stopped
	}
	return o, nil
}

// number reads a JSON number as the unstructured decoder (int64) or
// encoding/json (float64) leaves it.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	}
	return 0, false
}
