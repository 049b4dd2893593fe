package ledger

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// ReasonFlavorUnhostable is the Warning Event on the config ConfigMap
// about a flavor that no Ready node can host and no NodePool can make.
const ReasonFlavorUnhostable = inspect.ReasonFlavorUnhostable

// ReasonFlavorHostingUnknown is the Normal Event about a flavor that no
// Ready node can host and that a NodePool only may make: tally cannot
// tell.
const ReasonFlavorHostingUnknown = inspect.ReasonFlavorHostingUnknown

// FlavorWatch warns about each flavor of the config in force that no
// Ready node can host and no Karpenter NodePool (karpenter.sh/v1, read
// when the API server serves it) can make (inspect.Unhostable): its
// workloads would be admitted and their pods would stay Pending. Of a
// flavor that a NodePool only may make (its provider or a node labeller
// may set a label of the flavor that its template says nothing of), it
// says that it cannot tell, in a Normal Event. It looks when the config,
// a node or a NodePool changes, and says so once per flavor and verdict
// until the flavor is hostable again. It runs on the leader.
type FlavorWatch struct {
	Cache    cache.Cache
	Store    *queues.Store
	Recorder record.EventRecorder
	Mapper   meta.RESTMapper
	// Namespace holds the config ConfigMap, the Events' object; without
	// one (the config comes from a file) the warnings are logged only.
	Namespace string
	FromFile  bool
	Log       logr.Logger

	warned map[string]bool
}

// NeedLeaderElection makes only the leader warn.
func (w *FlavorWatch) NeedLeaderElection() bool { return true }

// Start watches nodes, NodePools and the config until ctx ends.
func (w *FlavorWatch) Start(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	inf, err := w.Cache.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(handler); err != nil {
		return err
	}
	pools := w.Mapper != nil && servesNodePools(w.Mapper)
	if pools {
		inf, err := w.Cache.GetInformer(ctx, inspect.NewNodePool())
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	configs := w.Store.Subscribe()
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-configs:
			poke()
		case <-changed:
			// Nodes change in bursts (a scale-up): look once per second
			// at most.
			if !w.Cache.WaitForCacheSync(ctx) {
				return nil
			}
			w.check(ctx, pools)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// check warns about the flavors that have become unhostable.
func (w *FlavorWatch) check(ctx context.Context, pools bool) {
	cfg := w.Store.Load()
	if cfg == nil {
		return
	}
	nodes := &corev1.NodeList{}
	if err := w.Cache.List(ctx, nodes); err != nil {
		w.Log.Error(err, "listing nodes")
		return
	}
	var templates []flavors.NodeTemplate
	if pools {
		list := inspect.NewNodePoolList()
		if err := w.Cache.List(ctx, list); err != nil {
			w.Log.Error(err, "listing NodePools")
			return
		}
		templates = inspect.NodeTemplates(list)
	}
	bad := inspect.Unhostable(cfg, nodes.Items, templates)
	now := map[string]bool{}
	for _, u := range bad {
		key := u.Flavor + "/" + u.Severity()
		now[key] = true
		if w.warned[key] {
			continue
		}
		w.warn(ctx, u)
	}
	w.warned = now
}

func (w *FlavorWatch) warn(ctx context.Context, u inspect.UnhostableFlavor) {
	kind, reason, what := corev1.EventTypeWarning, ReasonFlavorUnhostable, "flavor no node can host"
	if u.Unsure {
		kind, reason, what = corev1.EventTypeNormal, ReasonFlavorHostingUnknown, "flavor a NodePool may or may not make"
	}
	w.Log.Info(what, "reason", u.Message())
	if w.FromFile {
		return
	}
	cm := &corev1.ConfigMap{}
	if err := w.Cache.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: queues.ConfigName}, cm); err != nil {
		cm.ObjectMeta = metav1.ObjectMeta{Namespace: w.Namespace, Name: queues.ConfigName}
	}
	w.Recorder.Event(cm, kind, reason, u.Message())
}

// servesNodePools says whether the API server serves Karpenter's
// NodePools.
func servesNodePools(m meta.RESTMapper) bool {
	gvk := inspect.NodePoolGVK
	_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// StripNode is a cache transform that keeps only what FlavorWatch and
// the topologies' trees read of a node: its name, labels, taints,
// schedulability, allocatable and Ready condition.
func StripNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}
