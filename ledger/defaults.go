package ledger

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// A workload is charged what its pods will reserve, and the API server
// adds to a pod what its template does not say: its namespace's
// LimitRange defaults and its RuntimeClass's overhead (queues.PodDefaults).
// The ledger watches both, builds each workload with its namespace's
// defaults, and, when they change, builds the waiting workloads again:
// podInputs.gen counts the changes, and an entry built under an older one
// is built again when it is next observed.

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
		waiting := e != nil && e.Phase().Waiting()
		l.mu.Unlock()
		if waiting {
			l.onJob(o.Obj)
		}
	}
}
