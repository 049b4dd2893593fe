package inspect

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ExplainRequest is what tally explain was asked.
type ExplainRequest struct {
	// Namespace is the workload's; TallyNamespace holds the config
	// ConfigMap, unless ConfigFile names the config.
	Namespace, TallyNamespace, ConfigFile string
	// File names a workload not submitted yet; else Name is [KIND/]NAME.
	File, Name string
}

// ExplainWorkload reads what Explain needs from the API server (the
// config, the workload and its Events, the queued workloads and the
// PriorityClasses) and says where the workload stands at now.
func ExplainWorkload(ctx context.Context, c client.Reader, req ExplainRequest, now time.Time) (Explanation, error) {
	cfg, ks, err := LoadConfig(ctx, c, req.TallyNamespace, req.ConfigFile)
	if err != nil {
		return Explanation{}, err
	}
	in := ExplainInput{Config: cfg, Now: now, AllNamespaces: true, PriorityClasses: map[string]int32{}}
	if req.File != "" {
		if in.Target, err = readWorkloadFile(ks, req.File, req.Namespace); err != nil {
			return Explanation{}, err
		}
		in.New = true
		meta := in.Target.Meta
		nsObj := &corev1.Namespace{}
		// A user who cannot read namespaces is routed by labels and
		// LocalQueues alone.
		_ = c.Get(ctx, client.ObjectKey{Name: meta.Namespace}, nsObj)
		if in.Queue, err = cfg.Route(meta.Namespace, nsObj.Annotations[queues.AnnotationNamespaceQueue], meta.Labels); err != nil {
			return Explanation{}, err
		}
		if in.Queue == "" {
			return Explanation{Workload: in.Target.Describe(), State: "unmanaged",
				Notes: []string{"it would not be queued: it names no LocalQueue or ClusterQueue, and namespace " + meta.Namespace + " is not bound to one (or you cannot read it)"}}, nil
		}
	} else {
		k, name, err := kindAndName(ks, req.Name)
		if err != nil {
			return Explanation{}, err
		}
		obj := k.New()
		if err := c.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, obj); err != nil {
			return Explanation{}, fmt.Errorf("reading %s %s/%s: %w", k.GVK().Kind, req.Namespace, name, err)
		}
		_, _ = kinds.StripJob(obj)
		var ok bool
		if in.Target, ok = ks.Of(obj); !ok {
			return Explanation{}, fmt.Errorf("%s %s/%s: not a workload tally can read", k.GVK().Kind, req.Namespace, name)
		}
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(req.Namespace), client.MatchingFields{"involvedObject.uid": string(in.Target.Meta.UID)}); err == nil {
			in.Events = events.Items
			slices.SortFunc(in.Events, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		}
	}
	if lq := in.Target.Meta.Labels[queues.LabelKueueQueueName]; lq != "" {
		in.LocalQueue = in.Target.Meta.Namespace + "/" + lq
	}
	in.Workloads, err = ListWorkloads(ctx, ks, c)
	if apierrors.IsForbidden(err) {
		in.AllNamespaces = false
		in.Workloads, err = ListWorkloads(ctx, ks, c, client.InNamespace(in.Target.Meta.Namespace))
	}
	if err != nil {
		return Explanation{}, err
	}
	in.ClaimTemplates = ListClaimTemplates(ctx, c, append(slices.Clone(in.Workloads), in.Target))
	pcs := &schedulingv1.PriorityClassList{}
	if err := c.List(ctx, pcs); err == nil {
		in.PriorityClasses = queues.PodPriorities(pcs.Items)
	}
	// A user who may not list nodes is told nothing of them.
	if bad, err := ReadUnhostable(ctx, c, cfg); err == nil {
		in.Unhostable = bad
	}
	if pools := NewNodePoolList(); c.List(ctx, pools) == nil {
		in.NodePools = NodePools(pools)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err == nil {
		in.Nodes = nodes.Items
		if in.Nodes == nil {
			in.Nodes = []corev1.Node{}
		}
		in.Devices = ReadDevices(ctx, c, cfg)
		in.BoundPods = ReadBoundPods(ctx, c, cfg)
	}
	return Explain(in), nil
}

// ReadBoundPods lists the pods bound to nodes that have not ended, for
// the domains of cfg's topologies; nil if cfg has none or they cannot be
// read.
func ReadBoundPods(ctx context.Context, c client.Reader, cfg *queues.Config) []corev1.Pod {
	if len(cfg.Topologies) == 0 {
		return nil
	}
	pods := &corev1.PodList{}
	sel := fields.AndSelectors(fields.OneTermNotEqualSelector("spec.nodeName", ""),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	if err := c.List(ctx, pods, client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return nil
	}
	if pods.Items == nil {
		return []corev1.Pod{}
	}
	return pods.Items
}

// eventTime is when an Event last happened.
func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// kindAndName reads [KIND/]NAME: KIND is a registered kind's name or
// plural resource, in any case; Job when left out.
func kindAndName(ks *kinds.Registry, s string) (kinds.Kind, string, error) {
	kind, name, found := strings.Cut(s, "/")
	if !found {
		return kinds.Job{}, s, nil
	}
	var names []string
	for _, k := range ks.All() {
		if strings.EqualFold(kind, k.GVK().Kind) || strings.EqualFold(kind, k.Resource()) {
			return k, name, nil
		}
		names = append(names, strings.ToLower(k.GVK().Kind))
	}
	return nil, "", fmt.Errorf("unknown kind %q: tally queues %s", kind, strings.Join(names, ", "))
}

// readWorkloadFile reads one workload from a YAML or JSON file, in
// namespace ns unless it names one.
func readWorkloadFile(ks *kinds.Registry, path, ns string) (*kinds.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(cmp.Or(ns, "default"))
	}
	if ts := u.GetCreationTimestamp(); ts.IsZero() {
		u.SetCreationTimestamp(metav1.Now())
	}
	k := ks.For(u.GroupVersionKind())
	if k == nil {
		return nil, fmt.Errorf("%s: %s is not a kind tally queues", path, u.GroupVersionKind())
	}
	obj := k.New()
	if _, typed := obj.(*batchv1.Job); typed {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		obj = u
	}
	o, err := k.Read(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}
