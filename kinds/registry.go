package kinds

import (
	"slices"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// builtin lists the kinds built into tally, batch/v1 Job first.
var builtin = []Kind{
	Job{},
	PyTorchJob,
	TFJob,
	XGBoostJob,
	PaddleJob,
	JAXJob,
	MPIJob,
	RayJob{},
	JobSet{},
	TrainJob{},
	Pod{},
}

// Registry is the kinds tally queues: the built-in ones and those a
// config declares (Declare). It is safe for concurrent use: the config
// loader declares while the webhook and the ledger read. The nil
// *Registry holds the built-in kinds only, and cannot Declare.
type Registry struct {
	all atomic.Pointer[[]Kind]
	// base is the built-in kinds, reading through the registry's Lookup
	// once SetLookup gave one.
	base atomic.Pointer[[]Kind]
}

// NewRegistry returns a registry of the built-in kinds.
func NewRegistry() *Registry { return &Registry{} }

// All lists the kinds: the built-in ones, batch/v1 Job first, then the
// declared ones. The result must not be modified.
func (r *Registry) All() []Kind {
	if r == nil {
		return builtin
	}
	if all := r.all.Load(); all != nil {
		return *all
	}
	return r.builtin()
}

// builtin is r's built-in kinds.
func (r *Registry) builtin() []Kind {
	if base := r.base.Load(); base != nil {
		return *base
	}
	return builtin
}

// SetLookup makes r's kinds whose pod sets come from objects their
// workloads name (References) read those objects through get. Without
// it they cannot read them, and say so (Object.Unresolved).
func (r *Registry) SetLookup(get Lookup) {
	with := func(ks []Kind) []Kind {
		out := slices.Clone(ks)
		for i, k := range out {
			if rk, ok := k.(referrer); ok {
				out[i] = rk.withLookup(get)
			}
		}
		return out
	}
	base := with(builtin)
	r.base.Store(&base)
	if all := r.all.Load(); all != nil {
		next := with(*all)
		r.all.Store(&next)
	}
}

// Declare puts the declared kinds ks in force beside the built-in ones,
// in place of those declared before.
func (r *Registry) Declare(ks []*Declared) {
	all := slices.Clone(r.builtin())
	for _, d := range ks {
		all = append(all, d)
	}
	r.all.Store(&all)
}

// For returns the kind of gvk, or nil.
func (r *Registry) For(gvk schema.GroupVersionKind) Kind {
	for _, k := range r.All() {
		if k.GVK() == gvk {
			return k
		}
	}
	return nil
}

// Of describes obj, a Job, a Pod or an unstructured object of a kind of
// r. It returns false for anything else.
func (r *Registry) Of(obj any) (*Object, bool) {
	var k Kind
	switch o := obj.(type) {
	case *batchv1.Job:
		k = Job{}
	case *corev1.Pod:
		k = Pod{}
	case *unstructured.Unstructured:
		k = r.For(o.GroupVersionKind())
	}
	if k == nil {
		return nil, false
	}
	o, err := k.Read(obj.(client.Object))
	return o, err == nil
}

// Owner returns the controller owner of o when it is a workload of a
// kind of r other than o's: such an object is part of its owner, which
// holds its quota, and is not queued on its own.
func (r *Registry) Owner(o *Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o.Meta)
	if ref == nil {
		return nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	if k := r.For(gvk); k == nil || gvk == o.Kind.GVK() {
		return nil
	}
	return ref
}

// PodParent says whether kind is one a kind of r's operator makes its
// pods through (PodParents).
func (r *Registry) PodParent(kind string) bool {
	for _, k := range r.All() {
		if slices.Contains(PodParents(k), kind) {
			return true
		}
	}
	return false
}
