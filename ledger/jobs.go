package ledger

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// onJob folds one workload object's new state into the ledger.
func (l *Ledger) onJob(obj any) {
	o, ok := l.opts.Kinds.Of(obj)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	uid := o.Meta.UID
	l.echoedLocked(uid, o.Meta.ResourceVersion)
	if o.Meta.Labels[queues.LabelState] == "" {
		l.noteUnrecordedLocked(o)
		return
	}
	delete(l.late, uid)
	e := l.jobs[uid]
	if e == nil {
		e = &entry{Entry: machine.New(machine.Pending)}
		l.jobs[uid] = e
		l.reverifyLocked(uid, o.Meta.Namespace, o.Kind)
	}
	next := *e
	next.note(o)
	next.defaultsGen = l.inputs.gen
	l.foldLocked(e, next, l.observeLocked(o, e, next.prio))
}

// observeLocked reads o, whose entry is e, under the config in force.
func (l *Ledger) observeLocked(o *kinds.Object, e *entry, prio priorityRef) machine.Observed {
	queue, priority := o.Meta.Labels[queues.LabelQueue], l.priorityOf(prio)
	w := e.W
	// A change of pod defaults rebuilds a waiting workload only: one
	// admitted keeps what it was admitted with, which its pods got.
	// So does a change of the objects its pod sets were read from.
	stale := e.defaultsGen != l.inputs.gen || e.refsVersion != o.RefsVersion
	if !e.builtFrom(o, queue, priority) || stale && e.Phase().Waiting() {
		w = o.WorkloadIn(queue, priority, l.defaultsLocked(o.Meta.Namespace))
		w.Tag = e
	} else {
		// Ordered as the config in force says.
		w = l.podsReadyConfigLocked().Order(w)
	}
	v := machine.Observe(l.cfg, inspect.StatusOf(o), w, l.pods.liveOf(o.Meta.UID))
	if o.Suspended && !o.Finished {
		v.Restore = l.restoreDueLocked(o, w)
	}
	return v
}

// builtFrom says whether e's Workload is what o, in queue with priority,
// would build: o is a later version of the same generation, so of the
// same spec, and what the Workload reads of its metadata is unchanged.
// A workload's status changes far more often than its spec (each of its
// pods that starts or stops), and the Workload is kept then.
func (e *entry) builtFrom(o *kinds.Object, queue string, priority int32) bool {
	return e.W != nil && o.Meta.Generation > 0 && o.Meta.Generation == e.generation &&
		e.W.Queue == queue && e.W.Priority == priority && e.userAffinity == o.Meta.Annotations[queues.AnnotationUserAffinity] &&
		e.overhead == o.Meta.Annotations[queues.AnnotationPodOverhead] && e.W.Evicted.Equal(queues.PodsReadyEvictedAt(o.Meta))
}

// note copies into e what the ledger keeps of o besides its Workload.
func (e *entry) note(o *kinds.Object) {
	meta := o.Meta
	e.rv = meta.ResourceVersion
	e.generation = meta.Generation
	if l := meta.Labels[queues.LabelState]; l != e.LabelState {
		e.LabelState, e.labelSent = l, ""
	}
	e.userAffinity = meta.Annotations[queues.AnnotationUserAffinity]
	e.topologyAnn = meta.Annotations[queues.AnnotationTopology]
	e.overhead = meta.Annotations[queues.AnnotationPodOverhead]
	e.refs, e.refsVersion = o.Refs, o.RefsVersion
	e.requeues = machine.Requeues(meta.Annotations)
	e.metrics.SetLocalQueue(meta.Labels)
	e.resume = o.SuspendValue(false)
	e.prio = priorityRef{
		workloadClass: firstNonEmpty(meta.Labels[queues.LabelPriorityClass], meta.Labels[queues.LabelKueuePriorityClass]),
		podClass:      o.PriorityClassName(),
	}
	e.suspend = o.Kind.SuspendPath()
	e.paths = o.TemplatePaths()
	e.src = o.Source()
}

func (l *Ledger) onJobDelete(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	uid := m.GetUID()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[uid]
	l.pods.forget(uid, e)
	if e == nil {
		return
	}
	delete(l.jobs, uid)
	delete(l.late, uid)
	delete(l.echoes, uid)
	l.noteMetricsLocked(e)
	if e.Claim != nil {
		// Its victims free nobody now.
		for v := range e.Claim.Victims {
			delete(l.preempt.waitingOn, v)
		}
	}
	// Its pods may outlive it: its quota, and its preemptor's wait, last
	// until they are gone (pods.go).
	l.step(e, machine.Forget(l.pods.liveOf(uid) > 0))
	if e.Charged != nil {
		l.pods.haunt(uid, e)
	}
	l.writer.wakePass()
}

// restoreDueLocked says whether a suspended workload that was admitted
// before still has, in some pod template, a node affinity other than its
// candidate flavors', and the API now allows changing it: its controller
// has stopped it (no pods, and startTime cleared or marked stopped).
func (l *Ledger) restoreDueLocked(o *kinds.Object, w *queues.Workload) bool {
	ann := o.Meta.Annotations
	if ann[queues.AnnotationFlavors] == "" || o.Active > 0 {
		return false
	}
	if o.Started && o.StoppedSince.IsZero() {
		return false
	}
	_, combos, ok := l.candidatesLocked(w, "")
	if !ok {
		return false
	}
	return o.RestoreDue(combos)
}

// candidatesLocked returns what the webhook built a Job's required node
// affinity from: the user's own terms and the candidate flavor
// combinations of its queue.
func (l *Ledger) candidatesLocked(w *queues.Workload, userAnn string) ([]corev1.NodeSelectorTerm, [][]*flavors.Flavor, bool) {
	if l.cfg == nil || l.cfg.ClusterQueues[w.Queue] == nil {
		return nil, nil, false
	}
	user, err := queues.DecodeUserTerms(userAnn)
	if err != nil {
		return nil, nil, false
	}
	return user, l.cfg.Candidates(l.cfg.ClusterQueues[w.Queue], w), true
}

// priorityOf resolves a Job's priority (queues.Config.Priority): its
// WorkloadPriorityClass, else its pod template's PriorityClass, else the
// globalDefault PriorityClass, else 0. A template's numeric priority is
// never read (see kinds.Object.PriorityClassName).
func (l *Ledger) priorityOf(p priorityRef) int32 {
	return l.cfg.Priority(p.workloadClass, p.podClass, l.inputs.priorities)
}

// rebuildPendingLocked recomputes the priority of every waiting Job and
// rebuilds the pending trees; inadmissible Jobs get another chance.
func (l *Ledger) rebuildPendingLocked() {
	l.books.dropTrees()
	for _, e := range l.jobs {
		// The trees it was in are gone.
		e.InTree = false
		if e.Claim != nil || !e.Phase().Waiting() {
			continue
		}
		l.step(e, machine.Rebuild(l.priorityOf(e.prio), l.podsReadyConfigLocked()))
	}
	l.writer.wakePass()
}

// priorityClassOf names the class a Job's priority is derived from, as
// Kueue's priority_class label does: its WorkloadPriorityClass, else its
// pod templates' PriorityClass, else "".
func (l *Ledger) priorityClassOf(p priorityRef) string {
	if p.workloadClass != "" && l.cfg != nil {
		if _, ok := l.cfg.PriorityClasses[p.workloadClass]; ok {
			return p.workloadClass
		}
	}
	if _, ok := l.inputs.priorities[p.podClass]; ok {
		return p.podClass
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// noteMetricsLocked keeps the metrics in step with e, which may have
// changed.
func (l *Ledger) noteMetricsLocked(e *entry) {
	l.metrics.Note(l.cfg, &e.metrics, &e.Entry, e.W == nil || l.jobs[e.W.UID] != e, l.priorityClassOf(e.prio))
}
