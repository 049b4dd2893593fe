package flavors

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// A flavor no node can host holds its workloads' quota for nothing: they
// are admitted, and their pods stay Pending. HostedBy and MadeBy say
// whether a node, or a node an autoscaler can make, can run the flavor's
// pods.

// HostedBy says whether a node with these labels and taints can run pods
// of flavor f: it carries the flavor's labels, and each of its taints that
// keeps pods off is declared by the flavor (nodeTaints, which its
// workloads must tolerate) or tolerated by the flavor's tolerations.
func (f *Flavor) HostedBy(labels map[string]string, taints []corev1.Taint) bool {
	for k, v := range f.NodeLabels {
		if have, ok := labels[k]; !ok || have != v {
			return false
		}
	}
	return f.admitsTaints(taints)
}

func (f *Flavor) admitsTaints(taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		declared := slices.ContainsFunc(f.NodeTaints, func(d corev1.Taint) bool { return d.MatchTaint(t) })
		if !declared && !tolerates(f.Tolerations, t) {
			return false
		}
	}
	return true
}

// NodeTemplate is what an autoscaler's node group (a Karpenter NodePool)
// puts on the nodes it makes: labels every node gets, requirements on
// the others, and taints.
type NodeTemplate struct {
	Name         string
	Labels       map[string]string
	Requirements []corev1.NodeSelectorRequirement
	Taints       []corev1.Taint
}

// wellKnownLabels are the labels an autoscaler sets from the instance
// type and offering it picks (Karpenter's well-known labels): a template
// that leaves one unconstrained can produce any value of it.
var wellKnownLabels = []string{
	corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelArchStable, corev1.LabelOSStable, "karpenter.sh/capacity-type",
}

// Making says whether the nodes of a template can run a flavor's pods.
// The values are ordered: the least of a flavor's labels is the
// template's answer.
type Making int

const (
	// CannotMake: the template gives a label of the flavor another value,
	// its requirements rule the flavor's value out, or its taints keep
	// the flavor's pods off.
	CannotMake Making = iota
	// MayMake: nothing rules it out, but a label of the flavor is one the
	// template says nothing of. The autoscaler's provider or a node
	// labeller may set it on the nodes it makes (Karpenter's AWS
	// provider sets karpenter.k8s.aws/instance-gpu-name, NVIDIA's GPU
	// feature discovery nvidia.com/gpu.product), or nothing may: tally
	// cannot tell.
	MayMake
	// Makes: the template sets each label, its requirements allow it,
	// or it is a well-known label they leave open.
	Makes
)

// MadeBy says whether the nodes of template t can run pods of flavor f:
// each of the flavor's labels is one t sets, one its requirements allow,
// or a well-known label they leave open (Makes); one that t says nothing
// of leaves it open (MayMake); and its taints admit the flavor's pods as
// HostedBy says.
func (f *Flavor) MadeBy(t NodeTemplate) Making {
	if !f.admitsTaints(t.Taints) {
		return CannotMake
	}
	out := Makes
	for k, v := range f.NodeLabels {
		out = min(out, labelMade(t, k, v))
	}
	return out
}

// OpenLabels lists, sorted, the labels of f that template t says nothing
// of (see MayMake).
func (f *Flavor) OpenLabels(t NodeTemplate) []string {
	var out []string
	for k, v := range f.NodeLabels {
		if labelMade(t, k, v) == MayMake {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func labelMade(t NodeTemplate, k, v string) Making {
	if have, ok := t.Labels[k]; ok {
		return made(have == v)
	}
	if k == "karpenter.sh/nodepool" {
		return made(v == t.Name)
	}
	constrained := false
	for _, r := range t.Requirements {
		if r.Key != k {
			continue
		}
		constrained = true
		if !requirementAllows(r, v) {
			return CannotMake
		}
	}
	if constrained || slices.Contains(wellKnownLabels, k) {
		return Makes
	}
	return MayMake
}

func made(ok bool) Making {
	if ok {
		return Makes
	}
	return CannotMake
}

func requirementAllows(r corev1.NodeSelectorRequirement, v string) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return true
	case corev1.NodeSelectorOpDoesNotExist:
		return false
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || len(r.Values) != 1 {
			return false
		}
		bound, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return n > bound
		}
		return n < bound
	}
	return false
}

// SetsLabel says whether the nodes of template t carry label k with a
// value known before they are made: one t sets, one its requirements
// name, a well-known label the autoscaler sets from what it picks, or
// the node's own name (kubernetes.io/hostname). A topology level of such
// a label can have nodes made into its domains; one of a label t says
// nothing of (a rack, a block) cannot.
func (t NodeTemplate) SetsLabel(k string) bool {
	if k == corev1.LabelHostname || slices.Contains(wellKnownLabels, k) {
		return true
	}
	if _, ok := t.Labels[k]; ok {
		return true
	}
	return slices.ContainsFunc(t.Requirements, func(r corev1.NodeSelectorRequirement) bool { return r.Key == k })
}

// Value is the value every node of template t carries for label k, known
// before it is made: the one t sets, or the one value its requirements
// allow (an In of one value that every other requirement on k allows).
// False when its nodes may differ there (a zone the autoscaler picks
// among several), or t says nothing of k.
func (t NodeTemplate) Value(k string) (string, bool) {
	if v, ok := t.Labels[k]; ok {
		return v, true
	}
	var one string
	for _, r := range t.Requirements {
		if r.Key == k && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			one = r.Values[0]
		}
	}
	if one == "" {
		return "", false
	}
	for _, r := range t.Requirements {
		if r.Key == k && !requirementAllows(r, one) {
			return "", false
		}
	}
	return one, true
}
