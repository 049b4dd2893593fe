package kinds

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubeflow is a kind of the Kubeflow training operator (v1): a pod set
// per entry of spec.<Field> (for a PyTorchJob, spec.pytorchReplicaSpecs:
// Master, Worker), named in lower case, each of replicas pods (default 1);
// suspended by spec.runPolicy.suspend; finished when Succeeded or Failed.
// On suspend the operator deletes the pods and their Services and sets a
// Suspended condition; on resume it starts them afresh.
type Kubeflow struct {
	Kind, Plural string
	// Version is the API version, v1 when empty.
	Version string
	// Field holds the replica specs; Order is the operator's order of
	// replica types (others follow by name).
	Field string
	Order []string
	// Replicas is the default replicas of a replica type, where it is
	// not 1.
	Replicas map[string]int64
	// Init is the init container the operator adds to the pods of
	// replica type InitOf when the job has a replica type InitAfter
	// (see injected.go).
	Init              *corev1.Container
	InitOf, InitAfter string
}

// The training operator's kinds. Its MPIJob (v1) is not among them: the
// MPI operator's v2beta1 MPIJob replaces it.
var (
	PyTorchJob = Kubeflow{Kind: "PyTorchJob", Plural: "pytorchjobs", Field: "pytorchReplicaSpecs", Order: []string{"Master", "Worker"},
		Init: &pytorchInit, InitOf: "Worker", InitAfter: "Master"}
	TFJob      = Kubeflow{Kind: "TFJob", Plural: "tfjobs", Field: "tfReplicaSpecs", Order: []string{"Chief", "Master", "PS", "Worker", "Evaluator"}}
	XGBoostJob = Kubeflow{Kind: "XGBoostJob", Plural: "xgboostjobs", Field: "xgbReplicaSpecs", Order: []string{"Master", "Worker"}}
	PaddleJob  = Kubeflow{Kind: "PaddleJob", Plural: "paddlejobs", Field: "paddleReplicaSpecs", Order: []string{"Master", "Worker"}}
	JAXJob     = Kubeflow{Kind: "JAXJob", Plural: "jaxjobs", Field: "jaxReplicaSpecs", Order: []string{"Worker"}}
)

func (k Kubeflow) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "kubeflow.org", Version: cmp.Or(k.Version, "v1"), Kind: k.Kind}
}
func (k Kubeflow) Resource() string           { return k.Plural }
func (k Kubeflow) New() client.Object         { return newUnstructured(k.GVK()) }
func (k Kubeflow) NewList() client.ObjectList { return newUnstructuredList(k.GVK()) }
func (Kubeflow) SuspendPath() []string        { return runPolicySuspend }

var runPolicySuspend = []string{"spec", "runPolicy", "suspend"}

// replicaSpecs is what a replica spec holds of its pod template.
type replicaSpecs = map[string]struct {
	Template corev1.PodTemplateSpec `json:"template"`
}

// Shape is the kind's pod templates, where it holds them.
func (k Kubeflow) Shape() any {
	spec := reflect.StructOf([]reflect.StructField{{Name: "Replicas", Type: reflect.TypeFor[replicaSpecs](), Tag: reflect.StructTag(`json:"` + k.Field + `"`)}})
	root := reflect.StructOf([]reflect.StructField{{Name: "Spec", Type: spec, Tag: `json:"spec"`}})
	return reflect.New(root).Interface()
}

func (k Kubeflow) rank(t string) int {
	if i := slices.Index(k.Order, t); i >= 0 {
		return i
	}
	return len(k.Order)
}

func (k Kubeflow) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{Kind: k, Obj: u, Meta: metaOf(u)}
	specs, _, err := unstructured.NestedMap(u.Object, "spec", k.Field)
	if err != nil {
		return nil, fmt.Errorf("spec.%s: %w", k.Field, err)
	}
	types := make([]string, 0, len(specs))
	for t := range specs {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if ri, rj := k.rank(types[i]), k.rank(types[j]); ri != rj {
			return ri < rj
		}
		return types[i] < types[j]
	})
	for _, t := range types {
		spec, ok := specs[t].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.%s.%s: not an object", k.Field, t)
		}
		count := int64(1)
		if d, ok := k.Replicas[t]; ok {
			count = d
		}
		if r, ok := spec["replicas"]; ok && r != nil {
			if count, ok = number(r); !ok {
				return nil, fmt.Errorf("spec.%s.%s.replicas: not a number", k.Field, t)
			}
		}
		tpl := &corev1.PodTemplateSpec{}
		if raw, ok := spec["template"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl); err != nil {
				return nil, fmt.Errorf("spec.%s.%s.template: %w", k.Field, t, err)
			}
		}
		ps := PodSet{Name: strings.ToLower(t), Count: count, Template: tpl,
			Path: []string{"spec", k.Field, t, "template"}, CountPath: []string{"spec", k.Field, t, "replicas"}}
		if _, after := specs[k.InitAfter]; k.Init != nil && t == k.InitOf && after {
			ps.Injected = []corev1.Container{*k.Init}
		}
		o.PodSets = append(o.PodSets, ps)
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
	o.readConditions(u, "Succeeded", "Failed")
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
