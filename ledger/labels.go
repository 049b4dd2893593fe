package ledger

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

func (l *Ledger) onNamespace(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.namespaces[ns.Name]
	info := &nsInfo{labels: labels.Set(ns.Labels), queue: ns.Annotations[queues.AnnotationNamespaceQueue], hasLabel: ns.Labels[queues.LabelManaged] == "true"}
	l.namespaces[ns.Name] = info
	if old == nil || old.queue != info.queue {
		l.metrics.BindNamespace(l.cfg, ns.Name, info.queue)
	}
	if old == nil || !labels.Equals(old.labels, info.labels) {
		// The passes' namespaceSelectors read the labels.
		l.passCache.namespacesChanged()
	}
	managed := l.managedLocked(ns.Name, info)
	if l.relabelDueLocked(ns.Name, info) {
		l.labels.namespaces.Add(ns.Name)
	}
	wasManaged := old != nil && l.managedLocked(ns.Name, old)
	switch {
	case managed && !wasManaged && l.synced:
		go func() {
			ctx, release := l.writer.context()
			defer release()
			l.captureNamespace(ctx, ns.Name)
		}()
	case !managed && wasManaged:
		l.unboundLocked(ns.Name, old.queue)
	}
	if old != nil && !labels.Equals(old.labels, info.labels) {
		// A namespaceSelector may now answer differently.
		l.rebuildPendingLocked()
	}
}

// managedLocked says whether a namespace is managed under the config in
// force: bound by its annotation, or named by a LocalQueue.
func (l *Ledger) managedLocked(name string, info *nsInfo) bool {
	return queues.Managed(l.cfg, name, info.queue, l.opts.Namespace)
}

// relabelDueLocked says whether a namespace's tally.dev/managed label is
// to be added or removed under the config in force.
func (l *Ledger) relabelDueLocked(name string, info *nsInfo) bool {
	return queues.WantsManagedLabel(l.cfg, name, info.queue, l.opts.Namespace, info.hasLabel) != info.hasLabel
}

// relabelLocked queues every namespace whose tally.dev/managed label the
// config in force would change, after a reload (LocalQueues bind
// namespaces too).
func (l *Ledger) relabelLocked() {
	for name, info := range l.namespaces {
		if l.relabelDueLocked(name, info) {
			l.labels.namespaces.Add(name)
		}
	}
}

// unboundLocked tells the waiting Jobs of a namespace that lost its
// binding what becomes of them: they keep their queue and are admitted as
// before, since each carries its ClusterQueue in its own label.
func (l *Ledger) unboundLocked(ns, queue string) {
	for _, e := range l.jobs {
		if e.W == nil || e.W.Namespace != ns || (e.Phase().Label() != queues.StatePending && e.Phase().Label() != queues.StateInadmissible) {
			continue
		}
		l.event(e.W, corev1.EventTypeWarning, ReasonNamespaceUnbound,
			"Namespace %s is no longer bound to ClusterQueue %s: this %s stays queued in ClusterQueue %s and is admitted when it has quota; new workloads in the namespace are not queued. Delete the %s to withdraw it",
			ns, queue, e.W.KindName(), e.W.Queue, e.W.KindName())
	}
}

func (l *Ledger) onNamespaceDelete(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		l.mu.Lock()
		delete(l.namespaces, ns.Name)
		l.metrics.BindNamespace(l.cfg, ns.Name, "")
		l.passCache.namespacesChanged()
		l.mu.Unlock()
	}
}

func (l *Ledger) onPriorityClass(obj any) {
	pc, ok := obj.(*schedulingv1.PriorityClass)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.inputs.setPriorityClass(pc, false) {
		return
	}
	if l.synced {
		l.rebuildPendingLocked()
	}
}

func (l *Ledger) onPriorityClassDelete(obj any) {
	if pc, ok := obj.(*schedulingv1.PriorityClass); ok {
		l.mu.Lock()
		l.inputs.setPriorityClass(pc, true)
		l.rebuildPendingLocked()
		l.mu.Unlock()
	}
}

// runNamespaceWorker repairs the tally.dev/managed label.
func (l *Ledger) runNamespaceWorker(ctx context.Context) {
	for {
		name, shutdown := l.labels.namespaces.Get()
		if shutdown {
			return
		}
		if err := l.syncNamespace(ctx, name); err != nil {
			l.log.Error(err, "repairing namespace label", "namespace", name)
			l.labels.namespaces.AddRateLimited(name)
		} else {
			l.labels.namespaces.Forget(name)
		}
		l.labels.namespaces.Done(name)
	}
}

func (l *Ledger) syncNamespace(ctx context.Context, name string) error {
	l.mu.Lock()
	info := l.namespaces[name]
	due := info != nil && l.relabelDueLocked(name, info)
	l.mu.Unlock()
	if !due {
		return nil
	}
	want := !info.hasLabel
	var value any
	if want {
		value = "true"
	}
	l.log.Info("repairing namespace label", "namespace", name, "managed", want)
	return l.patchLabels(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, map[string]any{queues.LabelManaged: value})
}

// labelWorkers is how many label writes run at once. One worker writes
// about as fast as one round trip allows, which at 50,000 Jobs fell far
// behind the Jobs finishing; the queue never gives two workers the same
// workload.
const labelWorkers = 8

// runLabelWorkers brings each Job's tally.dev/state label in line with the
// ledger's view of it, for the transitions that are not part of an
// admission write: finished, inadmissible and back to pending. It also
// gives a stopped preemption victim its candidate affinity back.
func (l *Ledger) runLabelWorkers(ctx context.Context) {
	for range labelWorkers {
		go l.runJobQueue(ctx, l.labels.jobs, func() bool { return l.writer.awaitBudget(ctx) }, false)
	}
}

// runJobQueue syncs the labels (syncJobLabel, lazy as given) of the
// workloads q holds, one at a time, each once ready says so (if set;
// false: shutting down), until q or ctx ends.
func (l *Ledger) runJobQueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[types.UID], ready func() bool, lazy bool) {
	for {
		uid, shutdown := q.Get()
		if shutdown {
			return
		}
		if ready != nil && !ready() {
			q.Done(uid)
			return
		}
		err := l.syncJobLabel(ctx, uid, lazy)
		if ctx.Err() != nil {
			// Shutting down: the next leader labels what is left.
			q.Done(uid)
			return
		}
		if err != nil && !apierrors.IsNotFound(err) {
			l.log.Error(err, "updating job state label or affinity", "uid", uid)
			q.AddRateLimited(uid)
		} else {
			q.Forget(uid)
		}
		q.Done(uid)
	}
}

// relabelJobLocked asks for e's state label or affinity write: from the
// label worker, or, for the finished label, as FinishedLabel says.
func (l *Ledger) relabelJobLocked(e *entry) {
	if e.Phase() == machine.Finished {
		switch l.opts.FinishedLabel {
		case FinishedLabelOff:
			return
		case FinishedLabelLazy:
			l.labels.finished.Add(e.W.UID)
			return
		}
	}
	l.labels.jobs.Add(e.W.UID)
}

// runFinishedLabelWorker writes the finished labels of FinishedLabelLazy:
// one write per workload however often it was asked for, at most
// FinishedLabelRate a second, and only while the admission writes are
// quiet (writer.quiet).
func (l *Ledger) runFinishedLabelWorker(ctx context.Context) {
	limiter := rate.NewLimiter(rate.Limit(l.opts.FinishedLabelRate), 1)
	l.runJobQueue(ctx, l.labels.finished, func() bool {
		return limiter.Wait(ctx) == nil && l.awaitAdmissionsQuiet(ctx)
	}, true)
}

// lazyLabelRecheck is how often a lazy finished label waiting for the
// admission writes to be quiet looks again.
const lazyLabelRecheck = 10 * time.Millisecond

// awaitAdmissionsQuiet waits until the writer is quiet; false if ctx ended.
func (l *Ledger) awaitAdmissionsQuiet(ctx context.Context) bool {
	for !l.writer.quiet() {
		select {
		case <-ctx.Done():
			return false
		case <-l.opts.Clock.After(lazyLabelRecheck):
		}
	}
	return true
}

// syncJobLabel makes the label or affinity write due for uid; lazy: for
// the finished label, from runFinishedLabelWorker.
func (l *Ledger) syncJobLabel(ctx context.Context, uid types.UID, lazy bool) error {
	l.mu.Lock()
	e := l.jobs[uid]
	if e == nil || e.Phase().Writing() || e.W == nil {
		l.mu.Unlock()
		return nil
	}
	want, have, sent := string(e.Phase().Label()), e.LabelState, e.labelSent
	job := kinds.Ref(e.W)
	var restore []byte
	if e.Restore && e.Phase() == machine.Pending {
		restore = l.restorePatchLocked(e)
	}
	l.mu.Unlock()
	if restore != nil {
		err := l.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, restore), client.FieldOwner(queues.FieldManagerPreemption))
		if apierrors.IsConflict(err) {
			// The Job changed since: its new version decides again.
			return nil
		}
		return err
	}
	if want == have || want == sent || want == string(queues.StateAdmitted) {
		return nil
	}
	if want == string(queues.StateFinished) && l.opts.FinishedLabel != FinishedLabelEager && !lazy {
		// Asked for before it finished: the mode decides.
		if l.opts.FinishedLabel == FinishedLabelLazy {
			l.labels.finished.Add(uid)
		}
		return nil
	}
	if err := l.patchLabels(ctx, job, map[string]any{queues.LabelState: want}); err != nil {
		return err
	}
	l.mu.Lock()
	if cur := l.jobs[uid]; cur == e && cur.LabelState == have {
		// Until its echo, the same label is not written again.
		cur.labelSent = want
	}
	l.mu.Unlock()
	return nil
}

// restorePatchLocked is the write that gives a stopped victim the
// candidate affinity the webhook gave it at creation, or nil if its queue
// is no longer configured. It is guarded by the resourceVersion it was
// decided on, so it cannot undo an admission.
func (l *Ledger) restorePatchLocked(e *entry) []byte {
	_, combos, ok := l.candidatesLocked(e.W, "")
	if !ok {
		return nil
	}
	patch, err := l.target(write{w: e.W, rv: e.rv, userAffinity: e.userAffinity, paths: e.paths, suspend: e.suspend, src: e.src}).Restore(combos)
	if err != nil {
		return nil
	}
	return patch
}

func (l *Ledger) patchLabels(ctx context.Context, obj client.Object, lbls map[string]any) error {
	b, err := kinds.MergePatch{"metadata": map[string]any{"labels": lbls}}.Marshal()
	if err != nil {
		return err
	}
	return l.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, b), client.FieldOwner(queues.FieldManagerState))
}
