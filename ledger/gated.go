package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// The pod gate (webhook.PodGate) holds some pods of a workload behind
// tally's scheduling gate, labelled with the workload's UID: pods larger
// than the workload's pod sets (an init container its operator adds, a
// sidecar that another admission webhook adds), pods made while the
// workload was not admitted (its controller had yet to see it suspended),
// and pods more than its count (made while a pod the workload's
// controller released still runs, or to replace a pod that is being
// deleted, say: a pod being deleted holds its resources until it is gone).
// The ledger judges them whenever their workload is admitted, one of them
// appears, or one of its pods ends (releaseGated): a pod that fits what
// the workload was admitted with, beside its live pods, loses the gate
// (one write); one too many waits for a pod to end. A pod that could run
// off the flavors the workload was admitted in (made from the pod
// template of an earlier admission while it waited) is deleted instead,
// with a Warning Event (ReasonMisplacedPod): its controller makes another
// from the template as it is now. A larger one has the
// workload charged the difference on every pod, as pod overhead
// (queues.AnnotationPodOverhead): in place, with one write of the
// annotation, when that fits its ClusterQueue's nominal quota (grow);
// else by evicting it, with one write that also records the overhead, so
// that it queues again and is admitted and charged at its real size
// (tooLargeLocked). Pods of a workload that is not admitted wait: its
// controller deletes them when it sees it suspended.
//
// The gate judges each pod before the pod exists, so two pods of one
// workload whose creates are judged at the same time (in flight
// together, or on two replicas) may both pass where one fits. The ledger
// sees the pods: an admitted workload whose running pods, oldest first,
// do not all fit what it was admitted with has the newest ones beyond
// that deleted, once they have stayed beyond it for excessGrace (its
// controller, which may be replacing a pod, gets that long to settle),
// with a Warning Event (ReasonExcessPod).

// gatedPodLocked notes whether pod p, which claims another workload than
// itself (c), is held by tally's gate, and has it judged if its workload
// runs.
func (l *Ledger) gatedPodLocked(p *corev1.Pod, c podClaim) {
	held := kinds.Gated(p) && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	if !held {
		l.pods.ungate(p.UID)
		return
	}
	l.pods.gate(p.UID, c.owner)
	l.judgePodsLocked(c.owner)
}

// excessGrace is how long a running pod stays beyond what its workload
// was admitted with before the ledger deletes it.
const excessGrace = 5 * time.Second

// admittedEntryLocked is workload uid's entry while it is admitted under a
// config; nil otherwise.
func (l *Ledger) admittedEntryLocked(uid types.UID) *entry {
	e := l.jobs[uid]
	if e == nil || e.W == nil || e.Phase() != machine.Admitted || l.cfg == nil {
		return nil
	}
	return e
}

// judgedEntryLocked is the entry of workload uid, whose pods the gate
// judges, while it is admitted; otherwise nil, and the pods found
// beyond its count are forgotten.
func (l *Ledger) judgedEntryLocked(uid types.UID) *entry {
	e := l.admittedEntryLocked(uid)
	if e == nil {
		l.pods.forgetExcess(uid)
	}
	return e
}

// judgePodsLocked has the pods of workload uid judged, if it is admitted
// and has gated pods, more live pods than its count, or pods found
// beyond it before: now, or after the judgement under way. Once the
// ledger has stopped, none starts (goTracked).
func (l *Ledger) judgePodsLocked(uid types.UID) {
	e := l.judgedEntryLocked(uid)
	if e == nil {
		return
	}
	if !l.pods.startJudging(uid, e.W.PodCount()) {
		return
	}
	l.writer.goTracked(func(ctx context.Context) {
		for {
			l.judgePods(ctx, uid)
			l.mu.Lock()
			again := l.pods.judged(uid)
			l.mu.Unlock()
			if !again {
				return
			}
		}
	})
}

// judgePods judges the pods of admitted workload uid against what it was
// admitted with: its running pods beyond it (deleteExcess), then its
// gated pods beside the others.
func (l *Ledger) judgePods(ctx context.Context, uid types.UID) {
	l.mu.Lock()
	e := l.judgedEntryLocked(uid)
	if e == nil {
		l.mu.Unlock()
		return
	}
	w, cfg, k := e.W, l.cfg, l.opts.Kinds.For(kinds.GVKOf(e.W))
	names := flavorNamesOf(e.Charged)
	pins := e.placed.pins()
	leaves := newLeafCounts(w, e.placed)
	d := l.defaultsLocked(w.Namespace)
	l.mu.Unlock()
	pods := &corev1.PodList{}
	if err := l.cache.List(ctx, pods, client.InNamespace(w.Namespace), client.MatchingLabels{queues.LabelWorkload: string(uid)}); err != nil {
		l.log.Error(err, "listing the pods of a workload to judge them", "job", w.Key())
		return
	}
	var held, running []*corev1.Pod
	l.mu.Lock()
	for i := range pods.Items {
		p := &pods.Items[i]
		// A pod being deleted holds its resources until it is gone (its
		// controller may have replaced it already): it counts, unless
		// the gate holds it.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil && kinds.Gated(p) {
			continue
		}
		// A running pod once counted may be one too many.
		if !l.countsForLocked(p, uid, w.Namespace, k) {
			continue
		}
		if kinds.Gated(p) {
			held = append(held, p)
		} else {
			running = append(running, p)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(held, byAge)
	leaves.count(running)
	live := l.deleteExcess(ctx, uid, w, cfg, d, running)
	nodeLabels, _, known := cfg.NodeLabelsOf(names)
	for _, p := range held {
		if !known || !queues.PodConfined(&p.Spec, nodeLabels) || !pins.confine(&p.Spec) {
			// Made while the workload waited, from a pod template of an
			// earlier admission (or by someone else): released, it could
			// run outside the flavors (or the topology domains) the
			// workload holds. Its controller makes another from the
			// template as it is now.
			l.deleteMisplaced(ctx, w, p, strings.Join(names, "+"))
			continue
		}
		claims, why := d.ClaimRequests(&p.Spec)
		if why != "" {
			// It may get devices that cannot be charged: it stays held.
			l.log.Info("a held pod's claims cannot be charged; it waits", "pod", p.Namespace+"/"+p.Name, "job", w.Key(), "why", why)
			continue
		}
		reqs := queues.WithClaims(queues.PodRequests(&p.Spec), claims)
		switch queues.FitPods(w.PodSets, live, reqs, cfg.Covers) {
		case queues.PodFits:
			if err := l.ungate(ctx, p, leaves.next(p)); err != nil {
				l.log.Info("taking the scheduling gate off a pod failed; it waits", "pod", p.Namespace+"/"+p.Name, "err", err.Error())
				continue
			}
			live = append(live, reqs)
		case queues.PodTooLarge:
			grown, ok := l.grow(ctx, uid, w, p, reqs)
			if !ok {
				l.mu.Lock()
				l.tooLargeLocked(p, uid, reqs)
				l.mu.Unlock()
				return
			}
			w = grown
			if queues.FitPods(w.PodSets, live, reqs, cfg.Covers) != queues.PodFits {
				continue
			}
			if err := l.ungate(ctx, p, leaves.next(p)); err != nil {
				l.log.Info("taking the scheduling gate off a pod failed; it waits", "pod", p.Namespace+"/"+p.Name, "err", err.Error())
				continue
			}
			live = append(live, reqs)
		}
	}
}

// leafCounts are, for a workload whose pod sets' pods are each given
// their leaf domain of a topology (queues.TopologyAssignment.Gated), how
// many of each pod set's pods each leaf has: the gate gives a pod it releases the first
// leaf of its pod set with fewer than it was given (its nodeSelector),
// so the pods go where the placement counted them. A nil leafCounts
// gives none.
type leafCounts struct {
	sets map[string]queues.TopologyAssignment // by pod set name
	has  map[string]map[string]int32
}

// newLeafCounts are the leafCounts of w placed as p; nil when no pod set
// of it is Gated.
func newLeafCounts(w *queues.Workload, p *placement) *leafCounts {
	if p == nil {
		return nil
	}
	var c *leafCounts
	for i, ta := range p.sets {
		if ta.Gated() && i < len(w.PodSets) {
			if c == nil {
				c = &leafCounts{sets: map[string]queues.TopologyAssignment{}, has: map[string]map[string]int32{}}
			}
			c.sets[w.PodSets[i].Name] = ta
		}
	}
	return c
}

// count counts the leaves of pods, released already.
func (c *leafCounts) count(pods []*corev1.Pod) {
	if c == nil {
		return
	}
	for _, p := range pods {
		c.add(p.Labels[queues.LabelPodSet], p.Spec.NodeSelector)
	}
}

func (c *leafCounts) add(podSet string, nodeSelector map[string]string) {
	ta, ok := c.sets[podSet]
	leaf := ta.LeafOf(nodeSelector)
	if !ok || leaf == "" {
		return
	}
	if c.has[podSet] == nil {
		c.has[podSet] = map[string]int32{}
	}
	c.has[podSet][leaf]++
}

// next is the nodeSelector of the leaf pod p goes to, counted as
// there; nil for none (it keeps to what its template pins).
func (c *leafCounts) next(p *corev1.Pod) map[string]string {
	if c == nil {
		return nil
	}
	ps := p.Labels[queues.LabelPodSet]
	sel := c.sets[ps].NextLeaf(c.has[ps])
	c.add(ps, sel)
	return sel
}

// byAge orders pods oldest first, then by name.
func byAge(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// deleteExcess fits the running pods of admitted workload uid (whose
// Workload is w), those being deleted first (they hold their resources
// until they are gone, and nothing tally does ends them sooner), then
// oldest first, to what it was admitted with, and returns the requests
// of those it does not delete (with what their claims are charged, by
// d). A pod beyond that (one too many) is
// deleted once it has been beyond it for excessGrace; until then it
// counts, and the workload is judged again when its grace ends. A pod
// larger than every pod set's is not deleted here: it runs on, and
// counts.
func (l *Ledger) deleteExcess(ctx context.Context, uid types.UID, w *queues.Workload, cfg *queues.Config, d *queues.PodDefaults, running []*corev1.Pod) []flavors.Resources {
	slices.SortFunc(running, func(a, b *corev1.Pod) int {
		if da, db := a.DeletionTimestamp != nil, b.DeletionTimestamp != nil; da != db {
			if da {
				return -1
			}
			return 1
		}
		return byAge(a, b)
	})
	var live, fitted []flavors.Resources
	var beyond, due []*corev1.Pod
	for _, p := range running {
		claims, _ := d.ClaimRequests(&p.Spec)
		reqs := queues.WithClaims(queues.PodRequests(&p.Spec), claims)
		live = append(live, reqs)
		switch queues.FitPods(w.PodSets, fitted, reqs, cfg.Covers) {
		case queues.PodFits:
			fitted = append(fitted, reqs)
		case queues.PodTooMany:
			if p.DeletionTimestamp == nil {
				beyond = append(beyond, p)
			}
		}
	}
	ids := make([]types.UID, len(beyond))
	for i, p := range beyond {
		ids[i] = p.UID
	}
	now := l.opts.Clock.Now()
	l.mu.Lock()
	since := l.pods.noteExcess(uid, ids, now)
	for _, p := range beyond {
		if now.Sub(since[p.UID]) >= excessGrace {
			due = append(due, p)
		}
	}
	l.mu.Unlock()
	again := len(due) < len(beyond)
	for _, p := range due {
		err := fmt.Errorf("this replica may have lost the lease")
		if l.opts.Held == nil || l.opts.Held() == nil {
			err = client.IgnoreNotFound(l.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}))
		}
		if err != nil {
			l.log.Info("deleting a pod beyond what its workload was admitted with failed; tried again", "pod", p.Namespace+"/"+p.Name, "err", err.Error())
			again = true
			continue
		}
		i := slices.Index(running, p)
		running, live = slices.Delete(running, i, i+1), slices.Delete(live, i, i+1)
		l.log.Info("deleted a pod beyond what its workload was admitted with", "pod", p.Namespace+"/"+p.Name, "job", w.Key())
		l.event(w, corev1.EventTypeWarning, ReasonExcessPod,
			"Deleted pod %s: %s ran more pods than the %d it was admitted with, and this one stayed beyond them for %s",
			p.Name, w.Key(), w.PodCount(), excessGrace)
	}
	if again {
		l.opts.Clock.AfterFunc(excessGrace, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.judgePodsLocked(uid)
		})
	}
	return live
}

// grow charges admitted workload uid (whose Workload is w) in place for
// its pod p, which asks for reqs, more than its pod sets, when the
// difference, on every pod, fits its ClusterQueue's nominal quota beside
// what the queue uses: it records the new pod overhead on the workload
// (one write, which its next view charges as well) and returns the grown
// Workload. Otherwise, or if the write fails, it returns false.
func (l *Ledger) grow(ctx context.Context, uid types.UID, w *queues.Workload, p *corev1.Pod, reqs flavors.Resources) (*queues.Workload, bool) {
	l.mu.Lock()
	e := l.admittedEntryLocked(uid)
	if e == nil || e.W != w || e.Charged == nil {
		l.mu.Unlock()
		return nil, false
	}
	excess := queues.PodExcess(w.PodSets, reqs, l.cfg.Covers)
	grown := w.WithPodOverhead(excess)
	delta := queues.Usage{}
	for r, a := range excess {
		fr := l.flavorForLocked(e, r)
		delta[fr] = delta[fr].Add(a.Mul(w.PodCount()))
	}
	used := l.books.usage[e.ChargedQueue]
	for fr, a := range delta {
		q, ok := l.cfg.QuotaOf(e.ChargedQueue, fr)
		if !ok || used[fr].Add(a) > q.Nominal {
			l.mu.Unlock()
			return nil, false
		}
	}
	ann := addOverhead(e.overhead, excess)
	queue := e.ChargedQueue
	l.step(e, machine.Grow(delta))
	l.mu.Unlock()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{queues.AnnotationPodOverhead: ann}}})
	if err == nil {
		err = l.client.Patch(ctx, kinds.Ref(w), client.RawPatch(types.MergePatchType, body), client.FieldOwner(queues.FieldManagerAdmission))
	}
	if err != nil {
		l.mu.Lock()
		l.step(e, machine.Shrink(queue, delta))
		l.mu.Unlock()
		l.log.Info("recording a workload's pod overhead failed; its larger pods wait", "job", w.Key(), "err", err.Error())
		return nil, false
	}
	l.event(w, corev1.EventTypeNormal, ReasonPodOverhead, "Pod %s asks for %s more than its pod set (a container its operator or another admission webhook added); charged as pod overhead %s on each of its %d pods",
		p.Name, excess, ann, w.PodCount())
	return grown, true
}

// flavorForLocked is the flavor that e's charge holds resource r in: the
// one among the flavors it is charged in whose quota in its ClusterQueue
// covers r, else the first of them.
func (l *Ledger) flavorForLocked(e *entry, r corev1.ResourceName) queues.FlavorResource {
	names := flavorNamesOf(e.Charged)
	for _, f := range names {
		if _, ok := l.cfg.QuotaOf(e.ChargedQueue, queues.FlavorResource{Flavor: f, Resource: r}); ok {
			return queues.FlavorResource{Flavor: f, Resource: r}
		}
	}
	if len(names) == 0 {
		return queues.FlavorResource{Resource: r}
	}
	return queues.FlavorResource{Flavor: names[0], Resource: r}
}

// deleteMisplaced deletes pod p, held by tally's gate as a pod of
// admitted workload w, that could run outside flavors, those w holds.
func (l *Ledger) deleteMisplaced(ctx context.Context, w *queues.Workload, p *corev1.Pod, flavors string) {
	err := fmt.Errorf("this replica may have lost the lease")
	if l.opts.Held == nil || l.opts.Held() == nil {
		err = client.IgnoreNotFound(l.client.Delete(ctx, p, client.Preconditions{UID: &p.UID}))
	}
	if err != nil {
		l.log.Info("deleting a held pod that could run outside its workload's flavors failed; it waits", "pod", p.Namespace+"/"+p.Name, "err", err.Error())
		return
	}
	l.event(w, corev1.EventTypeWarning, ReasonMisplacedPod,
		"Deleted pod %s, held for %s: it could run on nodes outside flavor %s, which %s holds (it was made from an earlier pod template, or by hand)",
		p.Name, w.Key(), flavors, w.Key())
}

// flavorNamesOf names the flavors of usage u, sorted.
func flavorNamesOf(u queues.Usage) []string {
	var names []string
	for fr := range u {
		if !slices.Contains(names, fr.Flavor) {
			names = append(names, fr.Flavor)
		}
	}
	slices.Sort(names)
	return names
}

// ungate takes tally's scheduling gate off pod p, keeping the others,
// and gives it nodeSelector's labels (the topology leaf it goes to).
func (l *Ledger) ungate(ctx context.Context, p *corev1.Pod, nodeSelector map[string]string) error {
	body, err := kinds.UngatePatch(p, nodeSelector)
	if err != nil {
		return err
	}
	ref := &corev1.Pod{}
	ref.Namespace, ref.Name = p.Namespace, p.Name
	return l.client.Patch(ctx, ref, client.RawPatch(types.MergePatchType, body), client.FieldOwner(queues.FieldManagerAdmission))
}

// tooLargeLocked requeues admitted workload uid at the size of its pod p,
// which asks for reqs.
func (l *Ledger) tooLargeLocked(p *corev1.Pod, uid types.UID, reqs flavors.Resources) {
	e := l.admittedEntryLocked(uid)
	if e == nil || !l.requeueableLocked(e) {
		return
	}
	excess := queues.PodExcess(e.W.PodSets, reqs, l.cfg.Covers)
	if len(excess) == 0 {
		return
	}
	ann := addOverhead(e.overhead, excess)
	l.requeueLocked(e, l.opts.Clock.Now(),
		fmt.Sprintf("Pod %s asks for %s more than the pods it was admitted with (a container another admission webhook added?); requeued to be admitted and charged with pod overhead %s",
			p.Name, excess, ann),
		map[string]any{queues.AnnotationPodOverhead: ann}, metrics.EvictedResized, "requeue at the pods' size failed; its larger pods wait")
}

// addOverhead is the AnnotationPodOverhead value ann with excess added.
func addOverhead(ann string, excess flavors.Resources) string {
	overhead := queues.ParsePodOverhead(ann)
	if overhead == nil {
		overhead = corev1.ResourceList{}
	}
	for r, a := range excess {
		sum := overhead[r]
		sum.Add(a.Quantity(r))
		overhead[r] = sum
	}
	return queues.FormatPodOverhead(overhead)
}
