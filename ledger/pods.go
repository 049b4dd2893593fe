package ledger

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

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

// StripPod is a cache transform that keeps only what the ledger reads of
// a pod: its identity, its LabelWorkload label, the queue and flavors its
// admission noted on it, its requests and its phase.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: map[string]string{queues.LabelWorkload: p.Labels[queues.LabelWorkload]},
		},
		Spec: corev1.PodSpec{
			Containers: stripContainers(p.Spec.Containers), InitContainers: stripContainers(p.Spec.InitContainers),
			Overhead: p.Spec.Overhead, Resources: p.Spec.Resources,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if q := p.Annotations[queues.AnnotationPodQueue]; q != "" {
		out.Annotations = map[string]string{queues.AnnotationPodQueue: q, queues.AnnotationFlavors: p.Annotations[queues.AnnotationFlavors]}
	}
	return out, nil
}

// podLive says whether a pod still holds its resources: it has not
// terminated (a pod being deleted still runs until it is gone).
func podLive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// onPod counts a pod of an admitted workload.
func (l *Ledger) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	owner := types.UID(p.Labels[queues.LabelWorkload])
	if owner == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setPodLocked(p.UID, owner, podLive(p))
}

func (l *Ledger) onPodDelete(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.setPodLocked(p.UID, "", false)
	}
}

// setPodLocked records whether pod (of workload owner) is live, and
// settles the workload when its count of live pods crosses zero.
func (l *Ledger) setPodLocked(pod, owner types.UID, live bool) {
	was, seen := l.podOwner[pod]
	if seen && was != owner && owner != "" {
		// A pod's labels may change; count it under its new owner.
		l.setPodLocked(pod, "", false)
		was, seen = "", false
	}
	if live == seen {
		return
	}
	if live {
		l.podOwner[pod] = owner
		l.livePods[owner]++
		if l.livePods[owner] == 1 {
			l.podsChangedLocked(owner)
		}
		return
	}
	delete(l.podOwner, pod)
	if l.livePods[was]--; l.livePods[was] <= 0 {
		delete(l.livePods, was)
		l.podsChangedLocked(was)
	}
}

// podsChangedLocked folds workload uid's last view again once it has
// live pods again or none left: a finished or stopped workload keeps its
// quota while it has pods, and frees it when they are gone.
func (l *Ledger) podsChangedLocked(uid types.UID) {
	if g := l.ghosts[uid]; g != nil {
		if l.livePods[uid] == 0 {
			delete(l.ghosts, uid)
			l.releaseLocked(g, false)
			l.victimFreedLocked(uid)
		}
		return
	}
	e := l.jobs[uid]
	if e == nil || e.w == nil {
		return
	}
	o := e.seen
	o.w, o.pods = e.w, l.livePods[uid]
	l.foldLocked(e, *e, o)
}

// adoptOrphans charges, before the first pass, the pods that run for a
// workload the ledger does not know: one deleted while no replica led,
// whose pods still terminate. Each counts at its own requests in the
// queue and flavors its admission noted on it, as a ghost that holds
// them until the pods are gone.
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
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		owner := types.UID(p.Labels[queues.LabelWorkload])
		q := p.Annotations[queues.AnnotationPodQueue]
		if owner == "" || q == "" || !podLive(p) || l.jobs[owner] != nil {
			continue
		}
		w := queues.NewWorkload(&p.ObjectMeta, "", "", []queues.PodTemplate{{Name: queues.MainPodSet, Count: 1, Spec: &p.Spec}}, q, 0)
		g := l.ghosts[owner]
		if g == nil {
			g = &entry{w: w, phase: finished}
			l.ghosts[owner] = g
		}
		sum := UsageOf(l.cfg, w, p.Annotations[queues.AnnotationFlavors])
		if g.charged != nil {
			sum.Add(g.charged)
			l.releaseLocked(g, false)
		}
		l.chargeLocked(g, q, sum)
		n++
	}
	if n > 0 {
		l.log.Info("counting the pods of deleted workloads until they are gone", "pods", n, "workloads", len(l.ghosts))
	}
}
