package kinds

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lookup gets an object that a workload names, by kind, namespace ("" for
// a cluster-scoped one) and name: nil and no error when it does not
// exist. The result must not be modified.
type Lookup func(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)

// ReaderLookup is the Lookup that reads through r (the manager's cache,
// shared by the webhook and the ledger, which watches the same objects).
func ReaderLookup(ctx context.Context, r client.Reader) Lookup {
	return func(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
		u := newUnstructured(gvk)
		err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return u, err
	}
}

// Reference is a kind of object that the workloads of some kind name and
// read their pod sets from (a TrainJob's runtimes).
type Reference struct {
	GVK        schema.GroupVersionKind
	Resource   string
	Namespaced bool
}

// ObjectRef names one object a workload read its pod sets from, or tried to.
type ObjectRef struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
}

// References lists the kinds of object whose content k's pod sets derive
// from; nil for a kind whose objects hold their own pod templates.
func References(k Kind) []Reference {
	if r, ok := k.(referrer); ok {
		return r.references()
	}
	return nil
}

// referrer is a kind whose pod sets come from other objects its
// workloads name: it reads them through a Lookup (Registry.SetLookup).
type referrer interface {
	references() []Reference
	// withLookup returns the kind, reading through get.
	withLookup(get Lookup) Kind
}

// DependsOn says whether o read its pod sets from the object ref, or
// tried to.
func (o *Object) DependsOn(ref ObjectRef) bool {
	for _, r := range o.Refs {
		if r == ref {
			return true
		}
	}
	return false
}
