package ledger

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// Kueue's waitForPodsReady (queues.PodsReady, read from a Configuration
// document of the config): an admitted workload whose pods are not all
// ready within the timeout of its admission, or that has had fewer ready
// than it needs for the recovery timeout since, is evicted (one write:
// suspended, pending, its count of such evictions, the end of its
// backoff and the time of the eviction in annotations) and queues again
// once the backoff is over, ordered by that time or by its creation
// (requeuingStrategy.timestamp, queues.PodsReady.Order);
// past backoffLimitCount it is set aside as inadmissible instead
// (machine.React reads both annotations). With blockAdmission, a cohort
// (or a queue outside any) admits nothing while one of its admitted
// workloads waits for its pods.
//
// A pod counts as ready while it is Ready, and once it has succeeded (as
// Kueue counts a workload's succeeded pods): the pod book counts each
// such pod, among those counted for a workload (pods.go), as ready for
// that workload (podBook.setReady).

// podReady says whether p counts as ready for its workload.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setReadyLocked records whether pod, of workload owner, counts as ready.
func (l *Ledger) setReadyLocked(pod, owner types.UID, ready bool) {
	lost, gained := l.pods.setReady(pod, owner, ready)
	if lost != "" {
		l.readyChangedLocked(lost)
	}
	if gained != "" {
		l.readyChangedLocked(gained)
	}
}

// podsReadyLocked says whether all of e's pods are ready: all that its
// controller starts (queues.Workload.StartCount), not those an
// autoscaler may add, which its quota covers too.
func (l *Ledger) podsReadyLocked(e *entry) bool {
	return e.W != nil && int64(l.pods.readyOf(e.W.UID)) >= e.W.StartCount()
}

// readyChangedLocked notes a change in the count of workload uid's ready
// pods: once they are all ready, a cohort its wait blocked may admit
// again; when an admitted workload that had them all ready loses one,
// its recovery timeout starts.
func (l *Ledger) readyChangedLocked(uid types.UID) {
	e, pr := l.admittedEntryLocked(uid), l.podsReadyConfigLocked()
	if e == nil || pr == nil {
		return
	}
	ready := l.podsReadyLocked(e)
	if ready == e.podsReady {
		return
	}
	e.podsReady = ready
	if ready {
		if pr.BlockAdmission {
			l.passCache.touch(e.W.Queue)
			l.writer.wakePass()
		}
		return
	}
	l.pods.awaitReady(e)
	if pr.RecoveryTimeout > 0 {
		l.armPodsReadyLocked(e, l.opts.Clock.Now().Add(pr.RecoveryTimeout))
	}
}

// podsReadyConfigLocked is the config's waitForPodsReady; nil when off.
func (l *Ledger) podsReadyConfigLocked() *queues.PodsReady {
	if l.cfg == nil {
		return nil
	}
	return l.cfg.PodsReady
}

// admittedNowLocked starts the timeout of a workload the informer shows
// admitted, from its admission (its tally.dev/admitted-at annotation, so
// that a restart keeps the time it had).
func (l *Ledger) admittedNowLocked(e *entry) {
	pr := l.podsReadyConfigLocked()
	if pr == nil || e.W == nil {
		return
	}
	e.podsReady = l.podsReadyLocked(e)
	if e.podsReady {
		return
	}
	l.pods.awaitReady(e)
	from := e.AdmittedAt
	if from.IsZero() {
		from = l.opts.Clock.Now()
	}
	l.armPodsReadyLocked(e, from.Add(pr.Timeout))
}

// armPodsReadyLocked looks at e again at deadline.
func (l *Ledger) armPodsReadyLocked(e *entry, deadline time.Time) {
	e.readyDeadline = deadline
	uid := e.W.UID
	l.opts.Clock.AfterFunc(max(deadline.Sub(l.opts.Clock.Now()), 0), func() { l.podsReadyDue(uid) })
}

// podsReadyDue evicts workload uid if it is still admitted without all
// its pods ready at its deadline.
func (l *Ledger) podsReadyDue(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writer.stopped() {
		l.timeOutLocked(uid)
	}
}

// timeOutLocked evicts workload uid if it is still admitted without all
// its pods ready at its deadline (requeueLocked), and returns the write
// it started and its annotations.
func (l *Ledger) timeOutLocked(uid types.UID) (write, map[string]any, bool) {
	e, pr := l.admittedEntryLocked(uid), l.podsReadyConfigLocked()
	if e == nil || pr == nil || l.podsReadyLocked(e) {
		return write{}, nil, false
	}
	now := l.opts.Clock.Now()
	if now.Before(e.readyDeadline) {
		return write{}, nil, false // a later deadline replaced this one
	}
	if !l.requeueableLocked(e) {
		return write{}, nil, false
	}
	n := e.requeues + 1
	wait := pr.Backoff(n)
	at := requeueAt(now, wait)
	ready, since := min(int64(l.pods.readyOf(uid)), e.W.StartCount()), now.Sub(e.AdmittedAt).Round(time.Second)
	msg := fmt.Sprintf("PodsReadyTimeout: %d of %d pods ready %s after its admission; requeued, not admitted again before %s (backoff %s, eviction %d)",
		ready, e.W.StartCount(), since, at.UTC().Format(time.RFC3339), wait, n)
	if limit := pr.BackoffLimitCount; limit != nil && n > *limit {
		msg = fmt.Sprintf("PodsReadyTimeout: %d of %d pods ready %s after its admission; evicted %d times, more than backoffLimitCount %d allows: set aside as inadmissible (its pods did not start in flavor %s)",
			ready, e.W.StartCount(), since, n, *limit, flavorsOf(e.Charged))
	}
	ann := map[string]any{
		queues.AnnotationRequeues:  strconv.Itoa(int(n)),
		queues.AnnotationRequeueAt: at.UTC().Format(time.RFC3339),
		queues.AnnotationEvictedAt: now.UTC().Format(time.RFC3339),
	}
	w := l.requeueLocked(e, now, msg, ann, metrics.EvictedPodsReady, "eviction for pods not ready failed; will look again")
	return w, ann, true
}

// requeueAt is when a workload requeued at now with backoff wait may be
// admitted again. The annotation holds whole seconds: rounded up, the
// backoff is never shorter than the config says.
func requeueAt(now time.Time, wait time.Duration) time.Time {
	at := now.Add(wait)
	if at.Truncate(time.Second) != at {
		at = at.Truncate(time.Second).Add(time.Second)
	}
	return at
}

// blockedLocked lists the cohorts (and queues outside any, by name) that
// admit nothing now: with blockAdmission, one of their admitted
// workloads waits for its pods to be ready. It looks only at the
// workloads noted in unready when they were admitted or lost a ready pod,
// and forgets those that no longer wait.
func (l *Ledger) blockedLocked() map[string]bool {
	pr := l.podsReadyConfigLocked()
	if pr == nil || !pr.BlockAdmission {
		return nil
	}
	var out map[string]bool
	for e := range l.pods.unready {
		if e.W == nil || l.jobs[e.W.UID] != e || e.Phase() != machine.Admitted || l.podsReadyLocked(e) {
			// Ready, or not admitted any more, since.
			l.pods.doneWaiting(e)
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[l.cohortOfLocked(e.ChargedQueue)] = true
	}
	return out
}

// cohortOfLocked names queue q's cohort tree (by its root), or q itself
// outside any.
func (l *Ledger) cohortOfLocked(q string) string {
	if cq := l.cfg.ClusterQueues[q]; cq != nil && cq.Cohort != "" {
		return "cohort/" + l.cfg.CohortRoot(cq.Cohort)
	}
	return "queue/" + q
}

// flavorsOf names the flavors of usage u, "+"-joined.
func flavorsOf(u queues.Usage) string {
	set := map[string]bool{}
	for fr := range u {
		set[fr.Flavor] = true
	}
	return strings.Join(queues.SortedKeys(set), "+")
}
