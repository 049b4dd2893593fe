package ledger

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

// podInputs holds the cluster's objects, besides a workload's own, that
// decide what it is charged and its priority: each namespace's
// LimitRanges and ResourceClaimTemplates (stripped, by name), each
// RuntimeClass's pod overhead, the PriorityClasses (their name, value and
// globalDefault) and what they make of a pod template's
// priorityClassName (queues.PodPriorities); and, made of them, each
// namespace's pod defaults (nil for none), which gen counts the changes
// of. It does no I/O and holds no lock: the ledger's lock covers it. The
// maps that pod defaults hold (a namespace's templates, the overheads)
// are replaced on a change, never changed: defaults handed out are read
// outside the lock (the gate's judgement).
type podInputs struct {
	limitRanges     map[string]map[string]*corev1.LimitRange
	claimTemplates  map[string]map[string]*resourcev1.ResourceClaimTemplate
	overheads       map[string]corev1.ResourceList
	priorityClasses map[string]schedulingv1.PriorityClass
	priorities      map[string]int32
	defaults        map[string]*queues.PodDefaults
	gen             uint64
}

func newPodInputs() podInputs {
	return podInputs{
		limitRanges:     map[string]map[string]*corev1.LimitRange{},
		claimTemplates:  map[string]map[string]*resourcev1.ResourceClaimTemplate{},
		overheads:       map[string]corev1.ResourceList{},
		priorityClasses: map[string]schedulingv1.PriorityClass{},
		priorities:      map[string]int32{},
		defaults:        map[string]*queues.PodDefaults{},
	}
}

// namespaceChanged forgets the pod defaults of namespace ns, which
// changed.
func (in *podInputs) namespaceChanged(ns string) {
	delete(in.defaults, ns)
	in.gen++
}

// allChanged forgets every namespace's pod defaults: a RuntimeClass or
// the config changed.
func (in *podInputs) allChanged() {
	clear(in.defaults)
	in.gen++
}

// defaultsOf returns the pod defaults of namespace ns, under cfg (the
// config in force, which allChanged follows).
func (in *podInputs) defaultsOf(ns string, cfg *queues.Config) *queues.PodDefaults {
	if d, ok := in.defaults[ns]; ok {
		return d
	}
	ranges := make([]*corev1.LimitRange, 0, len(in.limitRanges[ns]))
	for _, lr := range in.limitRanges[ns] {
		ranges = append(ranges, lr)
	}
	d := &queues.PodDefaults{Requests: queues.LimitRangeRequests(ranges), Overhead: in.overheads, Config: cfg, ClaimTemplates: in.claimTemplates[ns]}
	in.defaults[ns] = d
	return d
}

// setOverhead records RuntimeClass name's pod overhead (none when nil).
func (in *podInputs) setOverhead(name string, overhead corev1.ResourceList) {
	in.overheads = maps.Clone(in.overheads)
	if overhead == nil {
		delete(in.overheads, name)
	} else {
		in.overheads[name] = overhead
	}
	in.allChanged()
}

// setPriorityClass records pc (deleted or not); false when that changes
// nothing the ledger reads of it.
func (in *podInputs) setPriorityClass(pc *schedulingv1.PriorityClass, deleted bool) bool {
	if deleted {
		delete(in.priorityClasses, pc.Name)
	} else {
		if old, ok := in.priorityClasses[pc.Name]; ok && old.Value == pc.Value && old.GlobalDefault == pc.GlobalDefault {
			return false
		}
		in.priorityClasses[pc.Name] = schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc.Name}, Value: pc.Value, GlobalDefault: pc.GlobalDefault}
	}
	in.priorities = queues.PodPriorities(slices.Collect(maps.Values(in.priorityClasses)))
	return true
}

// StripLimitRange is a cache transform that keeps only a LimitRange's
// identity and limits.
func StripLimitRange(obj any) (any, error) {
	lr, ok := obj.(*corev1.LimitRange)
	if !ok {
		return obj, nil
	}
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: lr.Name, Namespace: lr.Namespace, UID: lr.UID, ResourceVersion: lr.ResourceVersion},
		Spec: lr.Spec}, nil
}

// StripRuntimeClass is a cache transform that keeps only a RuntimeClass's
// name and overhead.
func StripRuntimeClass(obj any) (any, error) {
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return obj, nil
	}
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rc.Name, UID: rc.UID, ResourceVersion: rc.ResourceVersion},
		Handler: rc.Handler, Overhead: rc.Overhead}, nil
}

// setNamed puts v in m under namespace ns and name, or deletes it there,
// in a new map of the namespace's (the one it replaces may be read
// outside the lock), leaving no empty namespace.
func setNamed[T any](m map[string]map[string]T, ns, name string, v T, deleted bool) {
	byName := maps.Clone(m[ns])
	if deleted {
		delete(byName, name)
	} else {
		if byName == nil {
			byName = map[string]T{}
		}
		byName[name] = v
	}
	if len(byName) == 0 {
		delete(m, ns)
	} else {
		m[ns] = byName
	}
}
