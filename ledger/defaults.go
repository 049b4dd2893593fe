package ledger

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// A workload is charged what its pods will reserve, and the API server
// adds to a pod what its template does not say: its namespace's
// LimitRange defaults and its RuntimeClass's overhead (queues.PodDefaults).
// The ledger watches both, builds each workload with its namespace's
// defaults, and, when they change, builds the waiting workloads again:
// podInputs.gen counts the changes, and an entry built under an older one
// is built again when it is next observed.

// podInputs holds the cluster's objects, besides a workload's own, that
// decide what it is charged and its priority: each namespace's
// LimitRanges and ResourceClaimTemplates (stripped, by name), each
// RuntimeClass's pod overhead, the PriorityClasses (their name, value and
// globalDefault) and what they make of a pod template's
// priorityClassName (queues.PodPriorities); and, made of them, each
// namespace's pod defaults (nil for none), which gen counts the changes
// of. It does no I/O and holds no lock: the ledger's lock covers it.
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

func (l *Ledger) onLimitRange(obj any) { l.setLimitRange(obj, false) }

func (l *Ledger) onLimitRangeDelete(obj any) { l.setLimitRange(obj, true) }

func (l *Ledger) setLimitRange(obj any, deleted bool) {
	lr, ok := obj.(*corev1.LimitRange)
	if !ok {
		return
	}
	l.mu.Lock()
	setNamed(l.inputs.limitRanges, lr.Namespace, lr.Name, lr, deleted)
	l.namespaceDefaultsChanged(lr.Namespace, nil)
}

// setNamed puts v in m under namespace ns and name, or deletes it there,
// leaving no empty namespace.
func setNamed[T any](m map[string]map[string]T, ns, name string, v T, deleted bool) {
	byName := m[ns]
	if deleted {
		delete(byName, name)
	} else {
		if byName == nil {
			byName = map[string]T{}
			m[ns] = byName
		}
		byName[name] = v
	}
	if len(byName) == 0 {
		delete(m, ns)
	}
}

// namespaceDefaultsChanged, called with l.mu held, which it releases,
// forgets the pod defaults of namespace ns, which changed, and, once the
// informers have synced, observes again its waiting workloads that only
// says (all when nil).
func (l *Ledger) namespaceDefaultsChanged(ns string, only func(*kinds.Object) bool) {
	l.inputs.namespaceChanged(ns)
	synced := l.synced
	l.mu.Unlock()
	if synced {
		l.writer.spawn(func() { l.reobserve(ns, only) })
	}
}

func (l *Ledger) onRuntimeClass(obj any) { l.setRuntimeClass(obj, false) }

func (l *Ledger) onRuntimeClassDelete(obj any) { l.setRuntimeClass(obj, true) }

func (l *Ledger) setRuntimeClass(obj any, deleted bool) {
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return
	}
	l.mu.Lock()
	var overhead corev1.ResourceList
	if !deleted && rc.Overhead != nil {
		overhead = rc.Overhead.PodFixed
	}
	l.inputs.setOverhead(rc.Name, overhead)
	synced := l.synced
	l.mu.Unlock()
	if synced {
		l.writer.spawn(func() { l.reobserve("", nil) })
	}
}

// defaultsLocked returns the pod defaults of namespace ns, with the
// config in force.
func (l *Ledger) defaultsLocked(ns string) *queues.PodDefaults {
	return l.inputs.defaultsOf(ns, l.cfg)
}

// reobserve observes again the waiting workloads of namespace ns (of all
// namespaces when ns is "") that only says (all when nil), from the
// cache, so that they are built with the defaults now in force.
func (l *Ledger) reobserve(ns string, only func(*kinds.Object) bool) {
	ctx, release := l.writer.context()
	defer release()
	objs, err := l.watches.list(ctx)
	if err != nil {
		l.log.Error(err, "listing workloads to apply changed LimitRanges, RuntimeClasses, ResourceClaimTemplates or device class mappings; they apply from their next change", "namespace", ns)
		return
	}
	for _, o := range objs {
		if ns != "" && o.Meta.Namespace != ns || only != nil && !only(o) {
			continue
		}
		l.mu.Lock()
		e := l.jobs[o.Meta.UID]
		waiting := e != nil && (e.Phase() == machine.Pending || e.Phase() == machine.Inadmissible)
		l.mu.Unlock()
		if waiting {
			l.onJob(o.Obj)
		}
	}
}
