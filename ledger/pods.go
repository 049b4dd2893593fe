package ledger

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// A workload's pods can outlive what its status says: a PyTorchJob is
// Succeeded once its master is, and the training operator zeroes its
// active counts on success and on suspension while workers still run or
// terminate; a deleted Job's pods terminate after it is gone. Until the
// last of them is gone their resources are in use, so the workload keeps
// its quota. The admission write labels every pod template with the
// workload's UID (queues.LabelWorkload); the ledger counts, per workload,
// the pods that carry it and have not terminated.

// podSelector selects the pods tally admitted.
func podSelector() labels.Selector {
	r, err := labels.NewRequirement(queues.LabelWorkload, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}

// A pod's LabelWorkload label is only the word of whoever made the pod:
// any user who can create pods can write it. A pod counts for the
// workload it names only when it is that workload's: in its namespace,
// and controlled by it, by a part of it (a Job the ledger knows that the
// workload controls, see partOfQueuedLocked), or by an object of a kind
// its own kind makes its pods through and tally does not watch
// (kinds.PodParents, as a RayJob's RayCluster). A pod seen before its
// workload waits, unverified, until the workload is seen. Owner
// references are the pod maker's word too: this keeps a pod of one
// namespace, or one its maker did not tie to the workload, from holding
// the workload's quota, not a maker who names the workload as the pod's
// controller.

func claimOf(p *corev1.Pod) podClaim {
	c := podClaim{owner: types.UID(p.Labels[queues.LabelWorkload]), ns: p.Namespace}
	if kinds.IsPodWorkload(p) {
		// A single-pod workload is its own pod; only the pod gate and
		// tally write the label that says so (webhook.GuardPod).
		c.owner, c.ctrl = p.UID, p.UID
		return c
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		c.ctrl, c.ctrlKind = ref.UID, ref.Kind
	}
	return c
}

// StripPod is a cache transform that keeps only what the ledger and the
// pod gate read of a pod: its identity, its LabelWorkload label, its
// controller owner, the queue and flavors its admission noted on it, its
// requests and resource claims, scheduling gates, deletion and phase, and, while tally's gate
// holds it, where it may run (its node, nodeSelector and required node
// affinity: the ledger releases it only onto its workload's flavors). A
// single-pod workload (kinds.IsPodWorkload) keeps all but its managed
// fields and what its containers run.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	if kinds.IsPodWorkload(p) {
		p.ManagedFields = nil
		p.Spec.Containers = kinds.StripContainers(p.Spec.Containers)
		p.Spec.InitContainers = kinds.StripContainers(p.Spec.InitContainers)
		p.Spec.Volumes = nil
		return p, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, CreationTimestamp: p.CreationTimestamp,
			Labels:            map[string]string{queues.LabelWorkload: p.Labels[queues.LabelWorkload]},
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			Containers: kinds.StripContainers(p.Spec.Containers), InitContainers: kinds.StripContainers(p.Spec.InitContainers),
			Overhead: p.Spec.Overhead, Resources: p.Spec.Resources, SchedulingGates: p.Spec.SchedulingGates, ResourceClaims: p.Spec.ResourceClaims,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if kinds.Gated(p) {
		out.Spec.NodeName, out.Spec.NodeSelector = p.Spec.NodeName, p.Spec.NodeSelector
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			out.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
	}
	if q := p.Annotations[queues.AnnotationPodQueue]; q != "" {
		out.Annotations = map[string]string{queues.AnnotationPodQueue: q, queues.AnnotationFlavors: p.Annotations[queues.AnnotationFlavors]}
	}
	if ps := p.Labels[queues.LabelPodSet]; ps != "" {
		// A pod of a workload placed in a topology: the leaf the gate
		// gave it is in its nodeSelector (gated.go's leafCounts).
		out.Labels[queues.LabelPodSet] = ps
		out.Spec.NodeSelector = p.Spec.NodeSelector
	}
	return out, nil
}

// podLive says whether a pod holds its resources: tally's scheduling gate
// does not hold it back, and it has not terminated (a pod being deleted
// still runs until it is gone).
func podLive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && !kinds.Gated(p)
}

// onPod counts a live pod of an admitted workload, once its claim is
// verified.
func (l *Ledger) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c := claimOf(p)
	if c.owner == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	live := podLive(p)
	// A pod once counted stays counted until it terminates or names
	// another workload: the garbage collector removes the owner
	// references of a deleted workload's orphaned pods, which still run.
	was, _ := l.pods.ownerOf(p.UID)
	counted := live && (was == c.owner || l.verifiedLocked(c))
	if !counted {
		// A counted pod is not doubted (setCounted); one not counted
		// is doubted again below while it is live.
		l.pods.unverify(p.UID)
	}
	if c.owner != p.UID {
		l.gatedPodLocked(p, c)
	}
	if live && !counted {
		l.pods.doubt(p.UID, c)
	}
	l.setPodLocked(p.UID, c.owner, counted)
	// A counted pod that succeeds stays ready for its workload.
	l.setReadyLocked(p.UID, c.owner, podReady(p) && (counted || l.pods.readyFor(p.UID, c.owner)))
}

func (l *Ledger) onPodDelete(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.pods.unverify(p.UID)
		l.pods.ungate(p.UID)
		l.setPodLocked(p.UID, "", false)
		l.setReadyLocked(p.UID, "", false)
	}
}

// verifiedLocked says whether claim c checks out against the workload it
// names, as the ledger knows it now.
func (l *Ledger) verifiedLocked(c podClaim) bool {
	e := l.jobs[c.owner]
	if e == nil {
		e = l.pods.ghost(c.owner)
	}
	if e == nil || e.W == nil {
		return false
	}
	return l.podOfLocked(c, e.W.Namespace, l.opts.Kinds.For(kinds.GVKOf(e.W)))
}

// podOfLocked says whether the pod of claim c belongs to its workload,
// of namespace ns and kind k.
func (l *Ledger) podOfLocked(c podClaim, ns string, k kinds.Kind) bool {
	if c.ns != ns || c.ctrl == "" {
		return false
	}
	if c.ctrl == c.owner || l.pods.rootOf(c.ctrl, l.known) == c.owner {
		return true
	}
	return k != nil && slices.Contains(kinds.PodParents(k), c.ctrlKind)
}

// countsForLocked says whether pod p, which names workload uid, of
// namespace ns and kind k, counts for it: the ledger counts it so (a pod
// once counted stays counted when its controller releases it, see
// onPod), or its claim checks out.
func (l *Ledger) countsForLocked(p *corev1.Pod, uid types.UID, ns string, k kinds.Kind) bool {
	if o, ok := l.pods.ownerOf(p.UID); ok && o == uid {
		return true
	}
	return l.podOfLocked(claimOf(p), ns, k)
}

// reverifyLocked counts the live pods that claim workload owner, of
// namespace ns and kind k, and were waiting for it (or for a part of it)
// to be seen.
func (l *Ledger) reverifyLocked(owner types.UID, ns string, k kinds.Kind) {
	for pod, c := range l.pods.doubted(owner) {
		if l.podOfLocked(c, ns, k) {
			l.setPodLocked(pod, owner, true)
		}
	}
}

// setPodLocked records whether pod (of workload owner) is live, has the
// workloads it leaves and joins judged, and settles each whose count of
// live pods crosses zero.
func (l *Ledger) setPodLocked(pod, owner types.UID, live bool) {
	m := l.pods.setCounted(pod, owner, live)
	if m.left != "" {
		// A pod that ends may leave room for one the gate holds.
		l.judgePodsLocked(m.left)
		if m.emptied {
			l.podsChangedLocked(m.left, 0)
		}
	}
	if m.joined != "" {
		if m.first {
			l.podsChangedLocked(m.joined, 1)
		}
		// One pod more than the workload's count has it judged.
		l.judgePodsLocked(m.joined)
	}
}

// podsChangedLocked folds workload uid's last view again once it has
// live pods again or none left (pods, its count now): a finished or
// stopped workload keeps its quota while it has pods, and frees it when
// they are gone.
func (l *Ledger) podsChangedLocked(uid types.UID, pods int) {
	if g, ghost := l.pods.lay(uid); ghost {
		if g != nil {
			l.step(g, machine.Forget(false))
		}
		return
	}
	e := l.jobs[uid]
	if e == nil || e.W == nil {
		return
	}
	o := e.seen
	o.W, o.Pods = e.W, pods
	l.foldLocked(e, *e, o)
}

// adoptOrphans charges, before the first pass, the pods that run for a
// workload the ledger does not know: one deleted while no replica led,
// whose pods still terminate. Each counts at its own requests, in the
// flavors its admission noted on it, as a ghost that holds them until the
// pods are gone. What a pod says is not proof: it is charged only to the
// queue its own namespace is bound to (whatever queue it names), and only
// when its controller owner is really gone: an owner of a kind the ledger
// watches that the cache does not hold by that UID. A pod with no
// controller owner, or one of a kind the ledger does not watch, is
// nobody's orphan that the ledger can tell, and is not charged.
//
// It runs once, when the ledger has both synced and a config.
func (l *Ledger) adoptOrphans(ctx context.Context) {
	l.mu.Lock()
	due := !l.adopted && l.cfg != nil
	l.adopted = l.adopted || due
	l.mu.Unlock()
	if !due {
		return
	}
	pods := &corev1.PodList{}
	if err := l.cache.List(ctx, pods); err != nil {
		l.log.Error(err, "listing the pods of admitted workloads; the pods of workloads deleted meanwhile are not counted")
		return
	}
	type orphan struct {
		p     *corev1.Pod
		queue string
	}
	var orphans []orphan
	l.mu.Lock()
	for i := range pods.Items {
		p := &pods.Items[i]
		owner := types.UID(p.Labels[queues.LabelWorkload])
		if owner == "" || !podLive(p) || l.jobs[owner] != nil {
			continue
		}
		if q := l.boundQueueLocked(p.Namespace); q != "" {
			orphans = append(orphans, orphan{p, q})
		}
	}
	l.mu.Unlock()
	orphans = slices.DeleteFunc(orphans, func(o orphan) bool { return !l.ownerGone(ctx, o.p) })
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range orphans {
		p, owner := o.p, types.UID(o.p.Labels[queues.LabelWorkload])
		w := queues.NewWorkload(&p.ObjectMeta, "", "", []queues.PodTemplate{{Name: queues.MainPodSet, Count: 1, Spec: &p.Spec}}, o.queue, 0)
		g := l.pods.ghost(owner)
		if g == nil {
			g = &entry{Entry: machine.Ghost(w)}
			l.pods.haunt(owner, g)
		}
		l.step(g, machine.Adopt(o.queue, queues.UsageOf(l.cfg, w, p.Annotations[queues.AnnotationFlavors])))
		l.setPodLocked(p.UID, owner, true)
	}
	if len(orphans) > 0 {
		l.log.Info("counting the pods of deleted workloads until they are gone", "pods", len(orphans), "workloads", len(l.pods.ghosts))
	}
}

// boundQueueLocked is the ClusterQueue namespace ns is bound to (its
// annotation's, else its LocalQueue named default), "" if it is not
// managed or has none.
func (l *Ledger) boundQueueLocked(ns string) string {
	info := l.namespaces[ns]
	if info == nil || !l.managedLocked(ns, info) {
		return ""
	}
	q, _ := l.cfg.Route(ns, info.queue, nil)
	return q
}

// ownerGone says whether p's controller owner is gone: of a kind the
// ledger watches, and not in the cache by that UID.
func (l *Ledger) ownerGone(ctx context.Context, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return false
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	i := slices.IndexFunc(l.watches.kinds, func(k kinds.Kind) bool { return k.GVK() == gvk })
	if i < 0 {
		return false
	}
	obj := l.watches.kinds[i].New()
	err := l.cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	}
	return obj.GetUID() != ref.UID
}
