package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/deviceclass"
)

// onNode puts a node's change into the topologies' trees, and has the
// queues of the flavors whose trees changed decided again.
func (l *Ledger) onNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var losses []queues.Loss
	if l.topo.Usable(n.Name) && (n.Spec.Unschedulable || !queues.NodeReady(n)) {
		losses = l.topo.Losses(n.Name)
	}
	l.domainsChangedLocked(l.topo.SetNode(n))
	if l.topo.Usable(n.Name) {
		l.forgetOutageLocked(n.Name)
	}
	if len(losses) > 0 {
		name := n.Name
		var t clock.Timer
		t = l.opts.Clock.AfterFunc(nodeLostAfter, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.nodeLosses[name] != t {
				return // the node was usable again meanwhile, or deleted
			}
			delete(l.nodeLosses, name)
			l.strandedLocked(name, "was not Ready (or was cordoned) for "+nodeLostAfter.String(), losses)
		})
		l.nodeLosses[name] = t
	}
}

// forgetOutageLocked forgets node name's outage, if one is timed: the
// node is usable again, or deleted, whose losses are acted on at once.
func (l *Ledger) forgetOutageLocked(name string) {
	if t, ok := l.nodeLosses[name]; ok {
		t.Stop()
		delete(l.nodeLosses, name)
	}
}

// nodeLostAfter is how long a node a placement holds room on may be
// unusable (not Ready, or cordoned) before its workloads are moved.
const nodeLostAfter = 30 * time.Second

// strandedLocked handles each workload that lost pods on node name, lost
// as why says: where their leaf has room to make them again
// (queues.FlavorDomains.Replaceable), it stays, and their controller
// makes them again there; where another node of the same domain holds
// them (queues.FlavorDomains.Swap), its placement gives them that node
// instead, in one write; otherwise it is evicted and requeued.
func (l *Ledger) strandedLocked(name, why string, losses []queues.Loss) {
	for _, loss := range losses {
		if l.topo.Replaceable(loss) {
			continue
		}
		e := l.jobs[types.UID(loss.Owner.UID)]
		if e == nil || e.W == nil || e.W.Namespace != loss.Owner.Namespace || e.Phase() != machine.Admitted {
			continue
		}
		if p, ok := l.topo.Swap(loss); ok && e.placed != nil && e.placed.flavor == p.Flavor {
			l.swapLocked(e, name, why, loss, p)
			continue
		}
		domain := "the topology"
		if len(loss.Pinned) > 0 {
			domain = strings.Join(loss.Pinned, "/")
		}
		l.requeueLostLocked(e, fmt.Sprintf("NodeFailures: node %s %s, and %s has no room to make its %d pods there again; requeued", name, why, domain, loss.Pods))
	}
}

// swapLocked gives e's pods that loss lost on node name the node that p,
// e's placement swapped (queues.FlavorDomains.Swap), puts them on: it
// holds p and records it on the workload, in one write. The pod gate
// gives the pods their controller makes again the new node. If the
// write fails, e is requeued, as if no node held them: a placement the
// workload does not record would be lost with a restart.
func (l *Ledger) swapLocked(e *entry, name, why string, loss queues.Loss, p queues.Placement) {
	e.placed = &placement{flavor: p.Flavor, sets: p.Sets}
	l.followPlacement(e)
	ann := queues.FormatTopology(p.Flavor, p.Sets, e.W)
	var to []string
	for _, dc := range p.Sets[loss.Set].Domains {
		to = append(to, fmt.Sprintf("%s (%d)", strings.Join(dc.Values, "/"), dc.Count))
	}
	podSet := ""
	if loss.Set < len(e.W.PodSets) {
		podSet = e.W.PodSets[loss.Set].Name
	}
	msg := fmt.Sprintf("Node %s %s: the %d pods of pod set %s placed there go to another node of the same domain; pod set %s now runs in %s",
		name, why, loss.Pods, podSet, podSet, strings.Join(to, ", "))
	w := e.W
	l.writer.goTracked(func(ctx context.Context) {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{queues.AnnotationTopology: ann}}})
		if err == nil {
			err = l.client.Patch(ctx, kinds.Ref(w), client.RawPatch(types.MergePatchType, body), client.FieldOwner(queues.FieldManagerAdmission))
		}
		if err == nil {
			l.event(w, corev1.EventTypeNormal, ReasonNodeReplaced, "%s", msg)
			return
		}
		l.log.Info("recording a workload's new node failed; it is requeued", "job", w.Key(), "err", err.Error())
		l.mu.Lock()
		defer l.mu.Unlock()
		if cur := l.jobs[w.UID]; cur == e && e.W == w && e.Phase() == machine.Admitted {
			l.requeueLostLocked(e, fmt.Sprintf("NodeFailures: node %s %s, and recording another node for its %d pods failed; requeued", name, why, loss.Pods))
		}
	})
}

// requeueLostLocked evicts and requeues admitted e, which lost pods with
// a node, saying msg.
func (l *Ledger) requeueLostLocked(e *entry, msg string) {
	if !l.requeueableLocked(e) {
		return
	}
	now := l.opts.Clock.Now()
	annotations := map[string]any{queues.AnnotationEvictedAt: now.UTC().Format(time.RFC3339)}
	if pr := l.podsReadyConfigLocked(); pr != nil {
		n := e.requeues + 1
		at := requeueAt(now, pr.Backoff(n))
		annotations[queues.AnnotationRequeues] = strconv.Itoa(int(n))
		annotations[queues.AnnotationRequeueAt] = at.UTC().Format(time.RFC3339)
		msg += fmt.Sprintf(", not admitted again before %s (backoff %s, eviction %d)", at.UTC().Format(time.RFC3339), pr.Backoff(n), n)
	}
	l.requeueLocked(e, now, msg, annotations, metrics.EvictedNodeFailures, "eviction of a workload that lost a node failed; it keeps its place")
}

// onNodeDelete takes a node out of the topologies' trees.
func (l *Ledger) onNodeDelete(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	losses := l.topo.Losses(n.Name)
	l.forgetOutageLocked(n.Name) // its losses are acted on now
	l.domainsChangedLocked(l.topo.RemoveNode(n.Name))
	l.strandedLocked(n.Name, "was deleted", losses)
}

// domainsChangedLocked has queues decided again: their topologies have
// room they may fit in now.
func (l *Ledger) domainsChangedLocked(queues []string) {
	for _, q := range queues {
		l.passCache.touch(q)
	}
	if len(queues) > 0 && l.synced {
		l.writer.wakePass()
	}
}

// boundPodsSelector selects the pods bound to a node that have not
// ended.
const boundPodsSelector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// BoundPodsCache is the cache Options.BoundPods wants: every pod bound
// to a node, not ended, stripped to what the topologies' trees read;
// and, informed only once the config maps DeviceClasses (watchDevices),
// the ResourceSlices, DeviceClasses and ResourceClaims, stripped so.
func BoundPodsCache(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{Scheme: scheme, Mapper: mapper, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:               {Field: fields.ParseSelectorOrDie(boundPodsSelector), Transform: StripBoundPod},
		&resourcev1.ResourceSlice{}: {Transform: stripWith(queues.StripResourceSlice)},
		&resourcev1.DeviceClass{}:   {Transform: stripWith(queues.StripDeviceClass)},
		&resourcev1.ResourceClaim{}: {Transform: stripWith(queues.StripResourceClaim)},
	}})
}

// stripWith is a cache transform that strips objects of type T with
// strip, and leaves others alone.
func stripWith[T any](strip func(*T) *T) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if o, ok := obj.(*T); ok {
			return strip(o), nil
		}
		return obj, nil
	}
}

// StripBoundPod is a cache transform that keeps only what the
// topologies' trees read of a pod: its name, its node, its requests, its
// phase and the workload its queues.LabelWorkload names.
func StripBoundPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, Containers: kinds.StripContainers(p.Spec.Containers),
			InitContainers: kinds.StripContainers(p.Spec.InitContainers), Overhead: p.Spec.Overhead, Resources: p.Spec.Resources},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if w := p.Labels[queues.LabelWorkload]; w != "" {
		out.Labels = map[string]string{queues.LabelWorkload: w}
	}
	return out, nil
}

// watchBoundPods starts Options.BoundPods once the config in force has a
// topology, and has the trees told of every pod bound to a node.
func (l *Ledger) watchBoundPods(ctx context.Context) error {
	l.mu.Lock()
	want := l.cfg != nil && len(l.cfg.Topologies) > 0 && l.opts.BoundPods != nil && !l.watches.boundPods
	l.watches.boundPods = l.watches.boundPods || want
	l.mu.Unlock()
	if !want {
		return nil
	}
	c := l.opts.BoundPods
	go func() {
		if err := c.Start(ctx); err != nil {
			l.log.Error(err, "the bound pods' cache stopped")
		}
	}()
	inf, err := c.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("ledger: informer for bound pods: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    l.onBoundPod,
		UpdateFunc: func(_, n any) { l.onBoundPod(n) },
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.domainsChangedLocked(l.topo.SetPod(p.Namespace+"/"+p.Name, "", nil, queues.Owner{}))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("ledger: handler for bound pods: %w", err)
	}
	l.mu.Lock()
	l.watches.synced = append(l.watches.synced, reg.HasSynced)
	l.mu.Unlock()
	return nil
}

// onBoundPod tells the trees what a pod bound to a node uses, until it
// ends.
func (l *Ledger) onBoundPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, node, requests, owner := queues.BoundPod(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.domainsChangedLocked(l.topo.SetPod(key, node, requests, owner))
}

// watchDevices watches, in Options.BoundPods, the ResourceSlices,
// DeviceClasses and ResourceClaims once the config in force has a
// topology and maps DeviceClasses, and has the trees told of them: a
// node's devices of a mapped class count in its domains, less those its
// claims hold (queues.FlavorDomains.SetResourceSlice). It runs after
// watchBoundPods, which starts the cache.
func (l *Ledger) watchDevices(ctx context.Context) error {
	l.mu.Lock()
	want := l.cfg != nil && len(l.cfg.Topologies) > 0 && len(l.cfg.DeviceClasses) > 0 && l.watches.boundPods && !l.watches.devices
	l.watches.devices = l.watches.devices || want
	l.mu.Unlock()
	if !want {
		return nil
	}
	for _, w := range []struct {
		obj      client.Object
		set, del func(any)
	}{
		{&resourcev1.DeviceClass{}, l.onDeviceClass, l.onDeviceClassDelete},
		{&resourcev1.ResourceSlice{}, l.onResourceSlice, l.onResourceSliceDelete},
		{&resourcev1.ResourceClaim{}, l.onResourceClaim, l.onResourceClaimDelete},
	} {
		if err := l.watchIn(ctx, l.opts.BoundPods, w.obj, w.set, w.del, cache.BlockUntilSynced(false)); err != nil {
			return err
		}
	}
	return nil
}

// watchNodePools watches Karpenter's NodePools, in the manager's cache
// (FlavorWatch reads the same informer), once the config in force has a
// topology and the API server serves them: the trees of the flavors
// placed at the node level count the room each can still make
// (queues.NodePool).
func (l *Ledger) watchNodePools(ctx context.Context) error {
	l.mu.Lock()
	want := l.cfg != nil && len(l.cfg.Topologies) > 0 && l.opts.Mapper != nil && !l.watches.nodePools
	l.mu.Unlock()
	if !want || !servesNodePools(l.opts.Mapper) {
		return nil
	}
	l.mu.Lock()
	l.watches.nodePools = true
	l.mu.Unlock()
	return l.watchIn(ctx, l.cache, inspect.NewNodePool(), l.onNodePool, l.onNodePoolDelete, cache.BlockUntilSynced(false))
}

func (l *Ledger) onNodePool(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		p := inspect.NodePoolOf(u)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.domainsChangedLocked(l.topo.SetNodePool(p))
	}
}

func (l *Ledger) onNodePoolDelete(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.domainsChangedLocked(l.topo.RemoveNodePool(u.GetName()))
	}
}

func (l *Ledger) onResourceSlice(obj any) {
	if s, ok := obj.(*resourcev1.ResourceSlice); ok {
		l.devicesChanged(func() []string { return l.topo.SetResourceSlice(s) })
	}
}

func (l *Ledger) onResourceSliceDelete(obj any) {
	if s, ok := obj.(*resourcev1.ResourceSlice); ok {
		l.devicesChanged(func() []string { return l.topo.RemoveResourceSlice(s.Name) })
	}
}

// onDeviceClass compiles a class's selectors (outside the lock) and has
// the trees count its devices by them.
func (l *Ledger) onDeviceClass(obj any) {
	if c, ok := obj.(*resourcev1.DeviceClass); ok {
		sel := deviceclass.Compile(c)
		l.devicesChanged(func() []string { return l.topo.SetDeviceClass(c.Name, sel) })
	}
}

func (l *Ledger) onDeviceClassDelete(obj any) {
	if c, ok := obj.(*resourcev1.DeviceClass); ok {
		l.devicesChanged(func() []string { return l.topo.RemoveDeviceClass(c.Name) })
	}
}

func (l *Ledger) onResourceClaim(obj any) {
	if c, ok := obj.(*resourcev1.ResourceClaim); ok {
		l.devicesChanged(func() []string { return l.topo.SetClaim(c.Namespace+"/"+c.Name, queues.ClaimDevices(c)) })
	}
}

func (l *Ledger) onResourceClaimDelete(obj any) {
	if c, ok := obj.(*resourcev1.ResourceClaim); ok {
		l.devicesChanged(func() []string { return l.topo.SetClaim(c.Namespace+"/"+c.Name, nil) })
	}
}

// devicesChanged tells the trees of a change of the devices, under the
// lock, has the queues of the trees it changed decided again, and warns
// of the mapped classes that cannot count their devices.
func (l *Ledger) devicesChanged(change func() []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.domainsChangedLocked(change())
	l.warnDeviceClassesLocked()
}

// ReasonDeviceClassNotCounted is the Warning Event on the config
// ConfigMap about a mapped DeviceClass whose selectors cannot be
// evaluated, on some devices or at all: those devices are not counted in
// the topologies' domains, and workloads that claim them are not placed
// there.
const ReasonDeviceClassNotCounted = "DeviceClassNotCounted"

// warnDeviceClassesLocked warns, once per class and reason, of each
// mapped DeviceClass whose devices are not all counted
// (queues.FlavorDomains.DeviceClassProblems).
func (l *Ledger) warnDeviceClassesLocked() {
	now := map[string]string{}
	for _, p := range l.topo.DeviceClassProblems() {
		now[p.Class] = p.Why
		if l.watches.deviceWarned[p.Class] == p.Why {
			continue
		}
		msg := p.Message()
		l.log.Info("a mapped DeviceClass's devices are not counted in the topologies' domains", "deviceClass", p.Class, "reason", msg)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.opts.Namespace, Name: queues.ConfigName}}
		l.recorder.Event(cm, corev1.EventTypeWarning, ReasonDeviceClassNotCounted, msg)
	}
	l.watches.deviceWarned = now
}
