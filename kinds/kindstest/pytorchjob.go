package kindstest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PyTorchJobBuilder builds a kubeflow.org/v1 PyTorchJob, unstructured as
// tally reads it.
type PyTorchJobBuilder struct{ u *unstructured.Unstructured }

// PyTorchJob starts a PyTorchJob of namespace ns named name, with no
// replica types.
func PyTorchJob(ns, name string) *PyTorchJobBuilder {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{}}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"})
	u.SetNamespace(ns)
	u.SetName(name)
	return &PyTorchJobBuilder{u}
}

// Obj returns the PyTorchJob.
func (b *PyTorchJobBuilder) Obj() *unstructured.Unstructured { return b.u }

// Label sets a label.
func (b *PyTorchJobBuilder) Label(key, value string) *PyTorchJobBuilder {
	labels := b.u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[key] = value
	b.u.SetLabels(labels)
	return b
}

// Replica sets the replica type typ ("Master", "Worker"): n pods of a
// template with the containers, each copied, and the restartPolicy
// unless it is "".
func (b *PyTorchJobBuilder) Replica(typ string, n int64, restartPolicy string, containers ...map[string]any) *PyTorchJobBuilder {
	list := make([]any, len(containers))
	for i, c := range containers {
		list[i] = runtime.DeepCopyJSONValue(c)
	}
	spec := map[string]any{"replicas": n, "template": map[string]any{"spec": map[string]any{"containers": list}}}
	if restartPolicy != "" {
		spec["restartPolicy"] = restartPolicy
	}
	b.u.Object["spec"].(map[string]any)["pytorchReplicaSpecs"].(map[string]any)[typ] = spec
	return b
}
