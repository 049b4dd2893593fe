package inspect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// ReasonFlavorHostingUnknown is the Normal Event on the config ConfigMap
// about a flavor that no Ready node can host and that a NodePool only
// may make (UnhostableFlavor.Unsure).
const ReasonFlavorHostingUnknown = "FlavorHostingUnknown"

// ReasonFlavorUnhostable is the Warning Event on the config ConfigMap
// about a flavor that no Ready node can host and no NodePool can make.
const ReasonFlavorUnhostable = "FlavorUnhostable"

// NodePoolGVK is Karpenter's NodePool, read where the API server serves
// it.
var NodePoolGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}

// NewNodePool and NewNodePoolList are empty NodePool objects, for
// informers and lists.
func NewNodePool() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NodePoolGVK)
	return u
}

func NewNodePoolList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(NodePoolGVK.GroupVersion().WithKind(NodePoolGVK.Kind + "List"))
	return l
}

// NodeTemplates reads what each NodePool puts on its nodes: its
// template's labels, requirements and taints.
func NodeTemplates(list *unstructured.UnstructuredList) []flavors.NodeTemplate {
	out := make([]flavors.NodeTemplate, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, NodePoolOf(&list.Items[i]).Template)
	}
	return out
}

// NodePools reads each NodePool of list (NodePoolOf).
func NodePools(list *unstructured.UnstructuredList) []queues.NodePool {
	out := make([]queues.NodePool, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, NodePoolOf(&list.Items[i]))
	}
	return out
}

// NodePoolOf reads what NodePool p puts on its nodes (its template's
// labels, requirements and taints), its spec.limits and its
// status.resources.
func NodePoolOf(p *unstructured.Unstructured) queues.NodePool {
	t := flavors.NodeTemplate{Name: p.GetName()}
	t.Labels, _, _ = unstructured.NestedStringMap(p.Object, "spec", "template", "metadata", "labels")
	var spec struct {
		Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
		Taints       []corev1.Taint                   `json:"taints"`
	}
	if m, ok, _ := unstructured.NestedMap(p.Object, "spec", "template", "spec"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec)
	}
	t.Requirements, t.Taints = spec.Requirements, spec.Taints
	return queues.NodePool{Template: t, Limits: resourcesAt(p, "spec", "limits"), Made: resourcesAt(p, "status", "resources")}
}

// resourcesAt reads the resource list at path of u; nil for none. A
// quantity that does not parse is left out.
func resourcesAt(u *unstructured.Unstructured, path ...string) flavors.Resources {
	m, ok, _ := unstructured.NestedMap(u.Object, path...)
	if !ok {
		return nil
	}
	list := corev1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err == nil {
			list[corev1.ResourceName(k)] = q
		}
	}
	return flavors.FromList(list)
}

// UnhostableFlavor is a flavor of the config that no Ready node can host
// and no NodePool can make, or, when Unsure, that no Ready node can host
// and some NodePool may make, if its provider or a node labeller sets
// labels of the flavor that its template says nothing of
// (flavors.MayMake).
type UnhostableFlavor struct {
	Flavor string
	// Labels and Taints are the flavor's, as the message shows them.
	Labels string
	Taints string
	// Nodes counts the Ready nodes, Pools the NodePools looked at.
	Nodes, Pools int
	// Unsure: tally cannot tell. MayPools names the NodePools that may
	// make one, Open the flavor's labels they say nothing of.
	Unsure   bool
	MayPools []string
	Open     []string
	// Topology names the flavor's topology when what hosts the flavor
	// (Ready nodes or NodePools that make its nodes) lacks labels of its
	// levels, Levels: such nodes join no domain of the topology, and no
	// workload is admitted in the flavor until some carry them all.
	// MadePools names the NodePools that make its nodes without them.
	Topology  string
	Levels    []string
	MadePools []string
}

// Message says what is wrong and what to do.
func (u UnhostableFlavor) Message() string {
	if u.Unsure {
		return fmt.Sprintf("ResourceFlavor %s (node labels %s, node taints %s): none of the %d Ready nodes has its labels and admits its pods; NodePool %s may make one, but its template says nothing of label %s, which its provider or a node labeller may or may not set on the nodes it makes: tally cannot tell whether workloads admitted in it will start (name the labels in the NodePool's template labels or requirements for tally to tell)",
			u.Flavor, orNone(u.Labels), orNone(u.Taints), u.Nodes, strings.Join(u.MayPools, ", "), strings.Join(u.Open, ", "))
	}
	if len(u.Levels) > 0 {
		made := ""
		if len(u.MadePools) > 0 {
			made = fmt.Sprintf(" (NodePool %s makes its nodes without them)", strings.Join(u.MadePools, ", "))
		}
		return fmt.Sprintf("ResourceFlavor %s (node labels %s, node taints %s, topology %s): no Ready node (of %d) that has its labels and admits its pods carries label %s of the topology's levels, and none of the %d NodePools makes such nodes with them%s; nodes without them join no domain of the topology, so no workload is admitted in it (label the nodes, or name the labels in a NodePool's template labels or requirements)",
			u.Flavor, orNone(u.Labels), orNone(u.Taints), u.Topology, u.Nodes, strings.Join(u.Levels, ", "), u.Pools, made)
	}
	return fmt.Sprintf("ResourceFlavor %s (node labels %s, node taints %s): none of the %d Ready nodes has its labels and admits its pods, and none of the %d NodePools can make one; workloads admitted in it will not start (make a NodePool whose template or requirements give its labels, or fix the flavor)",
		u.Flavor, orNone(u.Labels), orNone(u.Taints), u.Nodes, u.Pools)
}

// Severity is "warning" for a flavor nothing can host, "note" for one
// tally cannot tell of, as tally status and tally explain prefix it.
func (u UnhostableFlavor) Severity() string {
	if u.Unsure {
		return "note"
	}
	return "warning"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Unhostable lists, by name, the flavors of cfg that no Ready,
// schedulable node of nodes can host and no template can make, and those
// that no such node can host and some template only may make (Unsure).
// For a flavor with a topology, a node hosts it, and a template makes
// its nodes, only with a label for each of the topology's levels
// (flavors.NodeTemplate.SetsLabel): a node without joins no domain.
func Unhostable(cfg *queues.Config, nodes []corev1.Node, templates []flavors.NodeTemplate) []UnhostableFlavor {
	ready := make([]*corev1.Node, 0, len(nodes))
	for i := range nodes {
		if nodeReady(&nodes[i]) {
			ready = append(ready, &nodes[i])
		}
	}
	var out []UnhostableFlavor
	for _, name := range queues.SortedKeys(cfg.Flavors) {
		f := cfg.Flavors[name]
		var levels, unset, madePools []string
		if t := cfg.Topologies[f.TopologyName]; t != nil {
			levels = t.Levels
		}
		// lacking says whether has lacks a level's label, and adds
		// those it lacks to unset.
		lacking := func(has func(string) bool) bool {
			missing := false
			for _, l := range levels {
				if !has(l) {
					missing = true
					if !slices.Contains(unset, l) {
						unset = append(unset, l)
					}
				}
			}
			return missing
		}
		hosted := false
		for _, n := range ready {
			if f.HostedBy(n.Labels, n.Spec.Taints) && !lacking(func(l string) bool { return n.Labels[l] != "" }) {
				hosted = true
				break
			}
		}
		var mayPools, open []string
		for i := 0; !hosted && i < len(templates); i++ {
			switch f.MadeBy(templates[i]) {
			case flavors.Makes:
				if !lacking(templates[i].SetsLabel) {
					hosted = true
				} else {
					madePools = append(madePools, templates[i].Name)
				}
			case flavors.MayMake:
				mayPools = append(mayPools, templates[i].Name)
				for _, k := range f.OpenLabels(templates[i]) {
					if !slices.Contains(open, k) {
						open = append(open, k)
					}
				}
			}
		}
		if hosted {
			continue
		}
		sort.Strings(open)
		labels := make([]string, 0, len(f.NodeLabels))
		for k, v := range f.NodeLabels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		taints := make([]string, 0, len(f.NodeTaints))
		for _, t := range f.NodeTaints {
			taints = append(taints, t.ToString())
		}
		u := UnhostableFlavor{Flavor: name, Labels: strings.Join(labels, ","), Taints: strings.Join(taints, ","),
			Nodes: len(ready), Pools: len(templates), Unsure: len(mayPools) > 0, MayPools: mayPools, Open: open}
		if len(unset) > 0 {
			u.Topology, u.Levels, u.MadePools = f.TopologyName, unset, madePools
		}
		out = append(out, u)
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadUnhostable lists the nodes and NodePools and says which flavors of
// cfg nothing can host. A reader that may not list nodes gets an error;
// a cluster without NodePools has none.
func ReadUnhostable(ctx context.Context, c client.Reader, cfg *queues.Config) ([]UnhostableFlavor, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	pools := NewNodePoolList()
	var templates []flavors.NodeTemplate
	switch err := c.List(ctx, pools); {
	case err == nil:
		templates = NodeTemplates(pools)
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
	default:
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	return Unhostable(cfg, nodes.Items, templates), nil
}
