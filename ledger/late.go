package ledger

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// Late capture: a Job in a managed namespace that runs without tally's
// admission record (it was created while the webhook was not called, or
// before its namespace was bound) must not hold quota unaccounted. The next
// pass counts it as admitted if it fits, and suspends it if it does not;
// either way it gets one write and a Warning Event, and from then on it is
// an ordinary managed Job. A suspended or finished unrecorded Job holds no
// quota and is left alone.

// Reasons of the late-capture Events.
const (
	ReasonAdmittedLate  = "AdmittedLate"
	ReasonSuspendedLate = metrics.EvictedSuspendedLate
)

// noteUnrecordedLocked looks at a workload without a tally.dev/state
// label and queues it for capture if it runs in a managed namespace, and
// is not part of a workload that tally queues (partOfQueuedLocked).
func (l *Ledger) noteUnrecordedLocked(o *kinds.Object) {
	meta := o.Meta
	info := l.namespaces[meta.Namespace]
	queue := ""
	if info != nil && l.managedLocked(meta.Namespace, info) && !l.partOfQueuedLocked(o) {
		// A workload that names no queue where none applies would not have
		// been queued by the webhook either. One whose labels name a
		// queue it may not use (an unknown LocalQueue, another team's
		// ClusterQueue), which the webhook would have denied, is
		// captured into the namespace's own queue, if it has one.
		var err error
		if queue, err = l.cfg.Route(meta.Namespace, info.queue, meta.Labels); err != nil {
			queue, _ = l.cfg.Route(meta.Namespace, info.queue, nil)
		}
	}
	if queue == "" || l.cfg == nil || o.Finished || o.Suspended || meta.DeletionTimestamp != nil {
		if e := l.late[meta.UID]; e != nil {
			delete(l.late, meta.UID)
			delete(l.jobs, meta.UID)
		}
		return
	}
	e := l.jobs[meta.UID]
	if e == nil {
		e = &entry{Entry: machine.New(machine.Unrecorded)}
		l.jobs[meta.UID] = e
	}
	if e.Phase().Writing() || e.Captured {
		return // its capture write is in flight, or made: a stale event
	}
	e.note(o)
	e.W = o.WorkloadIn(queue, l.priorityOf(e.prio), l.defaultsLocked(meta.Namespace))
	e.W.Tag = e
	l.late[meta.UID] = e
	l.writer.wakePass()
}

// partOfQueuedLocked says whether o is part of a workload that holds its
// quota: its controller owner is a workload of another registered kind
// (kinds.Registry.Owner) that the ledger knows by that UID, in o's
// namespace, either as one that tally admitted (and that holds quota, or
// has finished), or as a part of such a workload itself (a JobSet that a
// TrainJob made, whose Jobs are then parts too). An owner reference is
// only the word of whoever wrote it: one that names nothing tally
// admitted exempts nothing.
// Before the informers have synced an owner may not be known yet, and o is
// taken as part of it: captureManaged looks again after the sync. It
// records what o is part of in the pod book, for its pods' claims (pods.go).
func (l *Ledger) partOfQueuedLocked(o *kinds.Object) bool {
	uid, ns := o.Meta.UID, o.Meta.Namespace
	var of types.UID
	part := false
	if ref := l.opts.Kinds.Owner(o); ref != nil {
		of = ref.UID
		if e := l.jobs[of]; e != nil {
			switch e.Phase() {
			case machine.Assumed, machine.Admitted, machine.Evicting, machine.Finished:
				// A finished owner's parts may still run a moment (a
				// RayJob is done before its submitter Job says so): they
				// stay parts.
				part = e.W != nil && e.W.Namespace == ns
			}
		} else if _, ofNS, ok := l.pods.partOf(of); ok {
			part = ofNS == ns
		} else {
			return !l.synced
		}
	}
	if !part {
		of = ""
	}
	if root := l.pods.link(uid, of, ns, l.known); root != "" {
		if e := l.jobs[root]; e != nil && e.W != nil {
			l.reverifyLocked(root, e.W.Namespace, l.opts.Kinds.For(kinds.GVKOf(e.W)))
		}
	}
	return part
}

// known says whether the ledger knows workload uid.
func (l *Ledger) known(uid types.UID) bool { return l.jobs[uid] != nil }

// captureManaged looks for unrecorded running Jobs in every managed
// namespace: after the informers sync, since a Job may be seen before its
// namespace, and after a config change, which may bind or resolve anew.
func (l *Ledger) captureManaged(ctx context.Context) {
	l.mu.Lock()
	var managed []string
	for name, info := range l.namespaces {
		if l.managedLocked(name, info) {
			managed = append(managed, name)
		}
	}
	l.mu.Unlock()
	for _, ns := range managed {
		l.captureNamespace(ctx, ns)
	}
}

// captureNamespace looks for unrecorded running workloads in a namespace
// that has just become managed.
func (l *Ledger) captureNamespace(ctx context.Context, ns string) {
	objs, err := l.listWatched(ctx, ns)
	if err != nil {
		l.log.Error(err, "listing workloads of a newly bound namespace", "namespace", ns)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range objs {
		if o.Meta.Labels[queues.LabelState] == "" {
			l.noteUnrecordedLocked(o)
		}
	}
}

// decideLateLocked decides every unrecorded Job before the pass proper:
// its pods already run, so it comes first.
func (l *Ledger) decideLateLocked(snap *queues.Snapshot) []write {
	if len(l.late) == 0 {
		return nil
	}
	late := make([]*entry, 0, len(l.late))
	for _, e := range l.late {
		late = append(late, e)
	}
	sort.Slice(late, func(i, j int) bool { return queues.Before(late[i].W, late[j].W) })
	clear(l.late)
	out := make([]write, 0, len(late))
	for _, e := range late {
		a, v := snap.Assign(e.W)
		wr := write{e: e, w: e.W, late: true, suspend: e.suspend}
		var charge queues.Usage
		if v.Kind == queues.Fits {
			snap.Charge(e.W.Queue, a.Usage, +1)
			charge = a.Usage
			wr.a = a
		} else {
			wr.message = v.Message()
		}
		l.step(e, machine.Capture(e.W.Queue, charge))
		out = append(out, wr)
	}
	return out
}

// capture makes the one write that records an unrecorded running Job:
// admitted where it fits, else suspended and pending.
func (l *Ledger) capture(ctx context.Context, w write) {
	patch, err := capturePatch(w, l.opts.Clock.Now())
	if err == nil {
		err = l.client.Patch(ctx, kinds.Ref(w.w), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(queues.FieldManagerAdmission))
	}
	l.captured(w, err)
}

// capturePatch is the one write that records an unrecorded running Job.
func capturePatch(w write, now time.Time) ([]byte, error) {
	meta := map[string]any{"labels": map[string]any{queues.LabelQueue: w.w.Queue, queues.LabelState: string(queues.StatePending)}}
	patch := kinds.MergePatch{"metadata": meta}
	if w.message == "" {
		meta["labels"].(map[string]any)[queues.LabelState] = string(queues.StateAdmitted)
		meta["annotations"] = admissionAnnotations(w, now)
	} else {
		patch.Set(w.suspend, true)
	}
	return patch.Marshal()
}

// captured records the outcome of a capture write: the Job is captured
// again in a later pass if it failed.
func (l *Ledger) captured(w write, err error) {
	fits := w.message == ""
	l.mu.Lock()
	// A suspended Job that is still recorded queues now, whether or not
	// the informer has shown it yet (an event seen while the write was in
	// flight was set aside).
	recorded := l.jobs[w.w.UID] == w.e
	l.step(w.e, machine.Captured(err == nil, fits, recorded))
	if err != nil {
		if recorded {
			l.late[w.w.UID] = w.e
		}
		l.mu.Unlock()
		l.log.Error(err, "recording an unrecorded running Job failed; will retry", "job", w.w.Key())
		return
	}
	l.mu.Unlock()
	if fits {
		l.event(w.w, corev1.EventTypeWarning, ReasonAdmittedLate,
			"Was running without an admission from tally (created while its webhook was not called, or before namespace %s was bound); now counted in ClusterQueue %s in flavor %s (%s)",
			w.w.Namespace, w.w.Queue, strings.Join(w.a.Flavors, "+"), w.w.Total().String())
		return
	}
	l.observeEviction(w, metrics.EvictedSuspendedLate)
	l.event(w.w, corev1.EventTypeWarning, ReasonSuspendedLate,
		"Was running without an admission from tally (created while its webhook was not called, or before namespace %s was bound) and does not fit: %s; suspended, it queues in ClusterQueue %s",
		w.w.Namespace, w.message, w.w.Queue)
}
