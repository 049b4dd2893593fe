package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// pass runs one admission pass: decide under the lock on a snapshot of
// usage, assume the admitted Jobs' quota, then write outside the lock.
// It returns how long the locked part took and whether it decided
// anything (an admission, preemption or capture).
func (l *Ledger) pass(ctx context.Context) (time.Duration, bool) {
	if l.opts.Held != nil {
		// A replica that may have lost the lease decides nothing; leader
		// election stops it, or its next renewal lets it go on.
		if err := l.opts.Held(); err != nil {
			l.log.Info("no admission pass", "reason", err.Error())
			go func() {
				<-l.opts.Clock.After(time.Second)
				l.writer.wakePass()
			}()
			return 0, false
		}
	}
	start := l.opts.Clock.Now()
	adms := l.decide()
	took := l.opts.Clock.Since(start)
	l.metrics.ObservePass(took)
	if len(adms) > 0 {
		l.writer.writeAll(ctx, adms)
	}
	return took, len(adms) > 0
}

// restAfter is how long the pass loop leaves the lock to the informers
// after a pass that held it for took: as long again (capped at maxRest),
// once a pass takes more than minRest. Otherwise, with Jobs changing all
// the time, a long pass would follow a long pass with only one Job event
// folded in between, and tally would fall behind the API server.
func restAfter(took time.Duration) time.Duration {
	const minRest, maxRest = 2 * time.Millisecond, time.Second
	if took < minRest {
		return 0
	}
	return min(took, maxRest)
}

// decide is the locked part of a pass.
func (l *Ledger) decide() []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.synced || l.cfg == nil {
		return nil
	}
	drains := l.drainLocked()
	if len(l.books.pending) == 0 && len(l.late) == 0 {
		// Nothing waits: nothing wants the budget.
		l.writer.noteBudget(false, false)
		return drains
	}
	// A pass decides no more writes than it can send at once. Decided
	// further ahead, they would wait their turn at the client's rate
	// limit with their quota assumed, and a Job of higher priority that
	// arrives meanwhile would be decided only behind them. After a pass
	// that stopped at its budget, the next waits until the budget is
	// worth a pass (writer.chunk).
	budget, short, wait := l.writer.free()
	if budget < 1 || l.writer.bounded.Load() && budget < l.writer.chunk() {
		// The queues stay dirty: the pass that has a budget decides them.
		l.writer.bounded.Store(true)
		l.writer.short.Store(short)
		l.writer.wakeAfter(wait)
		return drains
	}
	// The victims' preemptors that gave up change what their cohorts
	// decide: known before the scope is.
	yield := l.yieldLocked()
	scope := l.passCache.scope(l.cfg, len(l.late) > 0)
	// Fair sharing's metrics read every queue's share.
	fair := l.cfg.HasFairSharing()
	usageScope := scope
	if fair {
		usageScope = nil
	}
	usage := l.passCache.scratch.usage
	if usage == nil {
		usage = map[string]queues.Usage{}
		l.passCache.scratch.usage = usage
	}
	clear(usage)
	inScope(l.books.usage, usageScope, func(q string, u queues.Usage) { usage[q] = u })
	if !l.books.pools.For(l.cfg) {
		l.books.pools = queues.NewPools(l.cfg, l.books.usage)
	}
	snap := queues.NewSnapshotPooled(l.cfg, usage, l.passCache.namespaceLabels(l.namespaceLabelsLocked), l.books.pools)
	late := l.decideLateLocked(snap)
	lists := listsOf(&l.passCache, l.books.pending, entryWorkload, scope)
	if blocked := l.blockedLocked(); len(blocked) > 0 {
		// waitForPodsReady's blockAdmission: these cohorts wait for the
		// pods of a workload they admitted.
		for q := range lists {
			if blocked[l.cohortOfLocked(q)] {
				delete(lists, q)
			}
		}
	}
	runs := l.passCache.runs(lists)
	snap.Tails, snap.Settled = l.passCache.tails, l.passCache.settledFunc(runs, lists)
	snap.AdmittedIn = l.admittedLocked(scope)
	for e := range l.preempt.reserved {
		if e.InTree {
			snap.Reserved = append(snap.Reserved, e.W)
		}
	}
	sort.Slice(snap.Reserved, func(i, j int) bool { return queues.Before(snap.Reserved[i], snap.Reserved[j]) })
	clear(l.preempt.reserved)
	snap.Yield = yield
	snap.Domains = l.topo.Trees
	snap.Budget = budget
	snap.Rotate = l.passCache.rotate()
	var never []*entry
	// A pass observes a queue's Workloads one after another, mostly.
	var runQ string
	var run *tailRun
	decided := queues.Decide(snap, lists, func(w *queues.Workload, v queues.Verdict, pos int) {
		e := w.Tag.(*entry)
		if run == nil || w.Queue != runQ {
			runQ, run = w.Queue, runs[w.Queue]
		}
		if run != nil {
			run.observe(pos, v.Kind == queues.Wait, v.Code)
		}
		if v.Kind == queues.Fits && !e.queued && l.opts.Events == EventsMinimal {
			// Admitted in the pass that first sees it: Admitted says it all.
			return
		}
		if !e.queued {
			e.queued = true
			if cq := l.cfg.ClusterQueues[w.Queue]; cq != nil {
				l.event(w, corev1.EventTypeNormal, ReasonQueued, "%s", queues.Position(cq, pos, len(lists[w.Queue])))
			}
		}
		if v.Kind == queues.Fits || v.Kind == queues.Preempting {
			return
		}
		if v.Kind == queues.Never {
			// Set aside again after a reload that did not help, with no
			// second Event for the same reason.
			never = append(never, e)
		}
		if v.Code == e.lastCode {
			return
		}
		e.lastCode = v.Code
		if v.Kind == queues.Never {
			l.event(w, corev1.EventTypeWarning, ReasonInadmissible, "%s", v.Message())
			return
		}
		l.event(w, corev1.EventTypeNormal, ReasonPending, "%s", v.Message())
	})
	l.passCache.settle(runs, lists)
	for _, e := range never {
		l.step(e, machine.Reject)
	}
	for _, q := range decided.Rest {
		// What the pass did not reach is decided by the next one.
		l.passCache.touch(q)
	}
	l.writer.noteBudget(decided.Full, short)
	out := append(make([]write, 0, len(drains)+len(late)+len(decided.Admissions)), drains...)
	out = append(out, late...)
	for _, d := range decided.Admissions {
		e := d.Workload.Tag.(*entry)
		e.lastCode = ""
		if d.Assignment.Topology != nil {
			e.placed = &placement{flavor: d.Assignment.TopologyFlavor(), sets: d.Assignment.Topology}
		}
		l.step(e, machine.Assume(d.Workload.Queue, d.Assignment.Usage))
		out = append(out, write{e: e, w: e.W, a: d.Assignment, rv: e.rv, userAffinity: e.userAffinity, src: e.src,
			combos: l.admittedCombos(d.Workload, d.Assignment), paths: e.paths, suspend: e.suspend, resume: e.resume,
			waitingSince: e.waitingSince()})
	}
	for _, p := range decided.Preemptions {
		out = append(out, l.preemptLocked(p)...)
	}
	if len(lists) > 0 {
		l.metrics.ObserveAttempt(len(decided.Admissions) > 0)
	}
	if fair {
		l.metrics.ObserveShares(snap)
	}
	return out
}

// admittedLocked returns the pass's queues.Snapshot.AdmittedIn: it lists
// the preemption candidates of a queue the pass decides (scope), when a
// preemption first looks at it: Jobs that hold quota, are not on their way
// out and whose admission is not in flight. Each is described by its
// entry's own candidate record. A queue's list is built once a pass; the
// function is called only during the pass, under the ledger's lock.
func (l *Ledger) admittedLocked(scope map[string]struct{}) func(string) []*queues.Admitted {
	sc := &l.passCache.scratch
	if sc.candidates == nil {
		sc.candidates, sc.built = map[string][]*queues.Admitted{}, map[string]bool{}
	}
	clear(sc.built)
	return func(q string) []*queues.Admitted {
		if _, in := scope[q]; scope != nil && !in {
			return nil
		}
		list := sc.candidates[q]
		if sc.built[q] {
			return list
		}
		sc.built[q] = true
		clear(list)
		list = list[:0]
		for e := range l.books.holding[q] {
			if e.Phase() != machine.Admitted {
				continue
			}
			e.candidate = queues.Admitted{W: e.W, Usage: e.Charged, AdmittedAt: e.AdmittedAt}
			if e.placed != nil {
				if p, ok := l.topo.Held(queues.Owner{Namespace: e.W.Namespace, UID: string(e.W.UID)}); ok {
					e.candidate.Placement = &p
				}
			}
			list = append(list, &e.candidate)
		}
		sc.candidates[q] = list
		return list
	}
}

// yieldLocked lists the victims back in their queues whose preemptors
// still wait, and forgets the victims whose preemptors do not.
func (l *Ledger) yieldLocked() map[*queues.Workload]*queues.Workload {
	if len(l.preempt.yielding) == 0 {
		return nil
	}
	out := map[*queues.Workload]*queues.Workload{}
	for v, p := range l.preempt.yielding {
		if l.jobs[v.W.UID] != v || l.jobs[p.W.UID] != p || p.Phase().Label() != queues.StatePending || v.Phase() == machine.Finished {
			delete(l.preempt.yielding, v)
			l.passCache.touch(v.W.Queue)
			l.passCache.touch(p.W.Queue)
			continue
		}
		if v.InTree {
			out[v.W] = p.W
		}
	}
	return out
}

// preemptLocked takes a preemption decision: the preemptor leaves its
// queue until the victims' quota is free, and each victim gets its
// suspending write.
func (l *Ledger) preemptLocked(p queues.Preemption) []write {
	pe := p.Preemptor.Tag.(*entry)
	pe.lastCode = ""
	// The preemptor's claim on the room its victims leave counts until it
	// is tried again, so nothing else is decided on that room. What the
	// claim covers of the victims' quota moves to it, as in the pass.
	victims := make([]types.UID, len(p.Victims))
	for i, v := range p.Victims {
		victims[i] = v.W.UID
	}
	// Where it goes once they are gone is held in the topology's domains
	// as long as its claim is (followPlacement), so that nothing else is
	// placed in the room they leave.
	pe.placed = nil
	if len(p.Assignment.Topology) > 0 {
		pe.placed = &placement{flavor: p.Assignment.TopologyFlavor(), sets: p.Assignment.Topology}
	}
	l.step(pe, machine.Preempt(p.Assignment.Usage, victims))
	l.event(p.Preemptor, corev1.EventTypeNormal, ReasonPreempting, "%s", p.Message())
	writes := make([]write, 0, len(p.Victims))
	for i, v := range p.Victims {
		ve := v.W.Tag.(*entry)
		moved := p.Moved[i]
		l.step(ve, machine.Evict(moved, l.opts.Clock.Now()))
		l.preempt.waitingOn[v.W.UID] = pe
		l.preempt.yielding[ve] = pe
		writes = append(writes, write{e: ve, w: ve.W, preemptor: pe, moved: moved, message: p.VictimMessage(v), suspend: ve.suspend, cause: v.Cause})
	}
	l.metrics.Preempting(len(p.Victims))
	return writes
}

// waitingSince is when e started waiting for its admission: its
// creation, or its last return to its queue after it ran.
func (e *entry) waitingSince() time.Time {
	if e.requeuedAt == 0 {
		return e.W.Created
	}
	return time.Unix(0, e.requeuedAt)
}

// write makes one write: the writer's do.
func (l *Ledger) write(ctx context.Context, w write) {
	switch {
	case w.late:
		l.capture(ctx, w)
	case w.stop.Stopped():
		l.requeueWrite(ctx, w, nil, w.stop.Reason, "eviction for a stopped queue failed; the next pass tries again")
	case w.preemptor != nil:
		l.evict(ctx, w)
	default:
		l.admit(ctx, w)
	}
}

// target is the workload of w as its kind's writes need it.
func (l *Ledger) target(w write) kinds.Target {
	return kinds.Target{Kind: l.opts.Kinds.For(kinds.GVKOf(w.w)), W: w.w, RV: w.rv, UserAffinity: w.userAffinity,
		Paths: w.paths, Suspend: w.suspend, Resume: w.resume, Src: w.src}
}

// admit makes the one write that admits a Job and rolls the assumption back
// if it fails.
func (l *Ledger) admit(ctx context.Context, adm write) {
	now := l.opts.Clock.Now()
	merge, err := l.admissionPatch(adm, now)
	if err == nil {
		var patch client.Patch
		var opts []client.PatchOption
		if patch, opts, err = l.encodeAdmission(ctx, adm, merge); err == nil {
			ref := kinds.Ref(adm.w)
			if err = l.client.Patch(ctx, ref, patch, opts...); err == nil {
				l.awaitEcho(adm.w.UID, ref.GetResourceVersion())
			}
		}
	}
	if err != nil {
		l.rollback(adm, err)
		return
	}
	l.admitted(adm, now)
}

// awaitEcho times how long the watch takes to bring version rv of
// workload uid, which an admission write made (tally_watch_delay_seconds).
// Resource versions are opaque to clients, but etcd's are increasing
// numbers; with another store the metric stays empty.
func (l *Ledger) awaitEcho(uid types.UID, rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.jobs[uid]
	if e == nil {
		return
	}
	if seen, err := strconv.ParseUint(e.rv, 10, 64); err == nil && seen >= v {
		// The watch was faster than the write's answer.
		l.metrics.ObserveWatchDelay(0)
		return
	}
	l.echoes[uid] = awaitedVersion{rv: v, at: l.opts.Clock.Now()}
}

// echoedLocked ends the timing of an admission write of workload uid once
// the watch brings version rv, when that is the written one or a later one.
func (l *Ledger) echoedLocked(uid types.UID, rv string) {
	m, ok := l.echoes[uid]
	if !ok {
		return
	}
	if v, err := strconv.ParseUint(rv, 10, 64); err != nil || v < m.rv {
		return
	}
	delete(l.echoes, uid)
	l.metrics.ObserveWatchDelay(l.opts.Clock.Since(m.at))
}

// admitted records an admission write that landed.
func (l *Ledger) admitted(adm write, now time.Time) {
	l.mu.Lock()
	l.metrics.ObserveAdmission(l.cfg, &adm.e.metrics, &adm.e.Entry, adm.w.Queue, l.priorityClassOf(adm.e.prio), now.Sub(adm.waitingSince))
	l.mu.Unlock()
	l.event(adm.w, corev1.EventTypeNormal, ReasonAdmitted, "Admitted by ClusterQueue %s in flavor %s (%s%s) after %s",
		adm.w.Queue, strings.Join(adm.a.Flavors, "+"), adm.w.Total().String(), podSetsNote(adm.w), now.Sub(adm.w.Created).Round(time.Second))
}

func (l *Ledger) rollback(adm write, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := adm.e
	if e.Phase() != machine.Assumed {
		return
	}
	// After a conflict the Job waits out of its queue until the informer
	// brings its newer version (onJob queues it again): decided on the
	// version the write saw, it would only conflict again, one wasted
	// write per pass.
	rejoin := l.jobs[adm.w.UID] == e && (!apierrors.IsConflict(err) || e.rv != adm.rv)
	l.step(e, machine.Rollback(rejoin))
	if errors.Is(err, ErrNotLeader) {
		l.log.Info("admission not written", "job", adm.w.Key(), "reason", err.Error())
		return
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, context.Canceled) {
		l.log.V(1).Info("admission write lost a race or was cut short; will retry", "job", adm.w.Key(), "err", err.Error())
		return
	}
	l.log.Error(err, "admission write failed; quota rolled back", "job", adm.w.Key())
}

// admissionPatch is the one write that admits a workload (kinds.Target.Admit).
// It is a merge patch guarded by the resourceVersion the decision saw, so
// it fails with a Conflict if the workload changed meanwhile. It narrows
// every pod template to the assigned flavors, records the assignment
// (admissionAnnotations) and un-suspends the workload.
func (l *Ledger) admissionPatch(adm write, now time.Time) ([]byte, error) {
	t := l.target(adm)
	for _, ta := range adm.a.Topology {
		t.Pinned = append(t.Pinned, ta.Pinned())
	}
	return t.Admit(adm.combos, admissionAnnotations(adm, now))
}

// admittedCombos are the flavor combinations an admission narrows w's
// pod templates to: the one a is in; or, when a holds no flavor (w asks
// for nothing its queue covers), all of its queue's that w may run on,
// so that its pods keep to the queue's nodes.
func (l *Ledger) admittedCombos(w *queues.Workload, a queues.Assignment) [][]*flavors.Flavor {
	if len(a.Flavors) == 0 {
		if combos := l.cfg.Candidates(l.cfg.ClusterQueues[w.Queue], w); len(combos) > 0 {
			return combos
		}
	}
	return [][]*flavors.Flavor{l.cfg.FlavorsByName(a.Flavors)}
}

// admissionAnnotations are what an admission records on the workload:
// its flavors, its time and, when its pods claim devices, the
// ResourceClaimTemplates it was charged from.
func admissionAnnotations(adm write, now time.Time) map[string]any {
	ann := map[string]any{
		queues.AnnotationFlavors:    adm.a.Annotation(adm.w),
		queues.AnnotationAdmittedAt: now.UTC().Format(time.RFC3339),
	}
	if adm.w.ClaimTemplates != "" {
		ann[queues.AnnotationClaimTemplates] = adm.w.ClaimTemplates
	}
	if t := adm.a.TopologyAnnotation(adm.w); t != "" {
		ann[queues.AnnotationTopology] = t
	}
	return ann
}

// podSetsNote describes a workload's pod sets for an Event, when it has
// more than one: "; master 1 pod, worker 3 pods".
func podSetsNote(w *queues.Workload) string {
	if len(w.PodSets) < 2 {
		return ""
	}
	parts := make([]string, len(w.PodSets))
	for i, ps := range w.PodSets {
		unit := "pods"
		if ps.Count == 1 {
			unit = "pod"
		}
		parts[i] = fmt.Sprintf("%s %d %s", ps.Name, ps.Count, unit)
	}
	return "; " + strings.Join(parts, ", ")
}

// namespaceLabelsLocked returns the labels of every known namespace.
func (l *Ledger) namespaceLabelsLocked() map[string]labels.Set {
	out := make(map[string]labels.Set, len(l.namespaces))
	for n, info := range l.namespaces {
		out[n] = info.labels
	}
	return out
}

// entryWorkload is e's Workload.
func entryWorkload(e *entry) *queues.Workload { return e.W }

// encodeAdmission turns the admission's merge patch into the write of the
// mode in force: its type, body and options.
func (l *Ledger) encodeAdmission(ctx context.Context, adm write, merge []byte) (client.Patch, []client.PatchOption, error) {
	var cached client.Object
	mode := l.opts.AdmissionPatch
	if l.target(adm).MergeOnly() {
		// Only a merge patch removes one scheduling gate among others'
		// that apply cannot take from their managers.
		mode = AdmissionPatchMerge
	}
	if mode == AdmissionPatchJSON {
		// The JSON patch is built on the informer's copy. If the
		// informer already holds a newer one, the write would conflict:
		// it fails so without being sent.
		gvk := kinds.GVKOf(adm.w)
		k := l.opts.Kinds.For(gvk)
		if k == nil {
			return nil, nil, fmt.Errorf("%s is no longer a declared kind", gvk.Kind)
		}
		cached = k.New()
		if err := l.cache.Get(ctx, client.ObjectKey{Namespace: adm.w.Namespace, Name: adm.w.Name}, cached); err != nil {
			return nil, nil, err
		}
		if cached.GetResourceVersion() != adm.rv {
			return nil, nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: k.Resource()}, adm.w.Name,
				fmt.Errorf("the informer holds version %s, the decision saw %s", cached.GetResourceVersion(), adm.rv))
		}
	}
	return EncodeAdmission(mode, kinds.Ref(adm.w), cached, adm.rv, merge)
}
