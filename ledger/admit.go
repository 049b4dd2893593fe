package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// admission is one decided admission, with what its write needs copied out
// from under the lock.
type admission struct {
	e            *entry
	w            *queues.Workload
	a            queues.Assignment
	rv           string
	userAffinity string
	combo        []*flavors.Flavor
}

// pass runs one admission pass: decide under the lock on a snapshot of
// usage, assume the admitted Jobs' quota, then write outside the lock.
func (l *Ledger) pass(ctx context.Context) {
	start := l.opts.Clock.Now()
	adms := l.decide()
	l.metrics.passSeconds.Observe(l.opts.Clock.Since(start).Seconds())
	if len(adms) == 0 {
		return
	}
	l.writeAll(ctx, adms)
}

// decide is the locked part of a pass.
func (l *Ledger) decide() []admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.synced || l.cfg == nil || len(l.pending) == 0 {
		return nil
	}
	usage := make(map[string]queues.Usage, len(l.usage))
	for q, u := range l.usage {
		usage[q] = u.Clone()
	}
	nsLabels := make(map[string]labels.Set, len(l.namespaces))
	for n, info := range l.namespaces {
		nsLabels[n] = info.labels
	}
	snap := queues.NewSnapshot(l.cfg, usage, nsLabels)

	lists := make(map[string][]*queues.Workload, len(l.pending))
	for q, t := range l.pending {
		list := make([]*queues.Workload, 0, t.Len())
		t.Ascend(func(e *entry) bool { list = append(list, e.w); return true })
		lists[q] = list
	}
	position := map[string]int{}
	var inadmissible []*entry
	decided := queues.Decide(snap, lists, func(w *queues.Workload, v queues.Verdict) {
		e := l.jobs[w.UID]
		position[w.Queue]++
		if !e.queued {
			e.queued = true
			if cq := l.cfg.ClusterQueues[w.Queue]; cq != nil {
				l.event(w, corev1.EventTypeNormal, ReasonQueued, "%s", queues.Position(cq, position[w.Queue], l.pending[w.Queue].Len()))
			}
		}
		if v.Kind == queues.Fits || v.Code == e.lastCode {
			return
		}
		e.lastCode = v.Code
		if v.Kind == queues.Never {
			l.event(w, corev1.EventTypeWarning, ReasonInadmissible, "%s", v.Message)
			inadmissible = append(inadmissible, e)
			return
		}
		l.event(w, corev1.EventTypeNormal, ReasonPending, "%s", v.Message)
	})
	for _, e := range inadmissible {
		l.untree(e)
		e.state = queues.StateInadmissible
		if e.labelState != string(queues.StateInadmissible) {
			l.labelQueue.Add(e.w.UID)
		}
	}
	out := make([]admission, 0, len(decided))
	for _, d := range decided {
		e := l.jobs[d.Workload.UID]
		l.untree(e)
		e.assumed = true
		e.lastCode = ""
		l.chargeLocked(e, d.Workload.Queue, d.Assignment.Usage)
		out = append(out, admission{e: e, w: e.w, a: d.Assignment, rv: e.rv, userAffinity: e.userAffinity,
			combo: l.cfg.FlavorsByName(d.Assignment.Flavors)})
	}
	l.metrics.pending.Set(float64(l.pendingLenLocked()))
	return out
}

func (l *Ledger) pendingLenLocked() int {
	n := 0
	for _, t := range l.pending {
		n += t.Len()
	}
	return n
}

// writeAll writes the admissions, a few at a time.
func (l *Ledger) writeAll(ctx context.Context, adms []admission) {
	sem := make(chan struct{}, l.opts.Workers)
	var wg sync.WaitGroup
	for _, adm := range adms {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.admit(ctx, adm)
		}()
	}
	wg.Wait()
}

// admit makes the one write that admits a Job and rolls the assumption back
// if it fails.
func (l *Ledger) admit(ctx context.Context, adm admission) {
	now := l.opts.Clock.Now()
	patch, err := l.admissionPatch(adm, now)
	if err == nil {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: adm.w.Namespace, Name: adm.w.Name}}
		err = l.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch))
	}
	if err != nil {
		l.rollback(adm, err)
		return
	}
	l.metrics.admitted.Inc()
	l.event(adm.w, corev1.EventTypeNormal, ReasonAdmitted, "Admitted by ClusterQueue %s in flavor %s (%s) after %s",
		adm.w.Queue, strings.Join(adm.a.Flavors, "+"), adm.w.Total().String(), now.Sub(adm.w.Created).Round(time.Second))
}

func (l *Ledger) rollback(adm admission, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := adm.e
	if !e.assumed {
		return
	}
	e.assumed = false
	l.releaseLocked(e, false)
	if l.jobs[adm.w.UID] == e && e.state == queues.StatePending {
		l.entree(e)
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		l.log.V(1).Info("admission write lost a race; will retry", "job", adm.w.Key(), "err", err.Error())
		return
	}
	l.log.Error(err, "admission write failed; quota rolled back", "job", adm.w.Key())
}

// admissionPatch is the one write that admits a Job. It is a merge patch
// guarded by the resourceVersion the decision saw, so it fails with a
// Conflict if the Job changed meanwhile. It narrows the node affinity to
// the assigned flavors, records the assignment and un-suspends the Job.
func (l *Ledger) admissionPatch(adm admission, now time.Time) ([]byte, error) {
	user, err := queues.DecodeUserTerms(adm.userAffinity)
	if err != nil {
		return nil, err
	}
	return affinityPatch(adm.rv, user, [][]*flavors.Flavor{adm.combo}, false, map[string]any{
		queues.AnnotationFlavors:    adm.a.Annotation(adm.w),
		queues.AnnotationAdmittedAt: now.UTC().Format(time.RFC3339),
	}, queues.StateAdmitted)
}

// affinityPatch builds a merge patch that sets the Job's required node
// affinity to the user's terms ANDed with the flavor combinations, its
// suspend flag, annotations and state label.
func affinityPatch(rv string, user []corev1.NodeSelectorTerm, combos [][]*flavors.Flavor, suspend bool, annotations map[string]any, state queues.State) ([]byte, error) {
	var required any
	if ns := queues.NodeSelector(user, combos); ns != nil {
		required = ns
	}
	p := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": rv,
			"labels":          map[string]any{queues.LabelState: string(state)},
			"annotations":     annotations,
		},
		"spec": map[string]any{
			"suspend": suspend,
			"template": map[string]any{"spec": map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": required,
			}}}},
		},
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("admission patch: %w", err)
	}
	return b, nil
}
