package flavors

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHostedBy(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	f := &Flavor{Name: "gpu", NodeLabels: map[string]string{"gpu": "a100"}, NodeTaints: []corev1.Taint{gpuTaint}}
	tolerant := &Flavor{Name: "t", NodeLabels: map[string]string{"gpu": "a100"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}
	for _, tc := range []struct {
		name   string
		f      *Flavor
		labels map[string]string
		taints []corev1.Taint
		want   bool
	}{
		{"labels and its own taint", f, map[string]string{"gpu": "a100", "x": "y"}, []corev1.Taint{gpuTaint}, true},
		{"another value", f, map[string]string{"gpu": "t4"}, nil, false},
		{"label missing", f, map[string]string{}, nil, false},
		{"a taint the flavor does not declare", f, map[string]string{"gpu": "a100"}, []corev1.Taint{other}, false},
		{"a taint it tolerates", tolerant, map[string]string{"gpu": "a100"}, []corev1.Taint{other}, true},
		{"a soft taint", f, map[string]string{"gpu": "a100"}, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}, true},
		{"a flavor without labels", &Flavor{Name: "any"}, nil, nil, true},
	} {
		if got := tc.f.HostedBy(tc.labels, tc.taints); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMadeBy(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	f := &Flavor{Name: "gpu", NodeLabels: map[string]string{"gpu": "a100"}, NodeTaints: []corev1.Taint{gpuTaint}}
	in := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	// Labels that Karpenter's AWS provider, or NVIDIA's GPU feature
	// discovery, set on the nodes they make, and a NodePool need not name.
	provider := &Flavor{NodeLabels: map[string]string{
		"karpenter.k8s.aws/instance-gpu-name": "a100", "karpenter.k8s.aws/instance-family": "p4d", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}
	for _, tc := range []struct {
		name string
		f    *Flavor
		t    NodeTemplate
		want Making
		open string
	}{
		{"template label", f, NodeTemplate{Labels: map[string]string{"gpu": "a100"}, Taints: []corev1.Taint{gpuTaint}}, Makes, ""},
		{"template label, another value", f, NodeTemplate{Labels: map[string]string{"gpu": "t4"}}, CannotMake, ""},
		{"requirement allows it", f, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in("gpu", "t4", "a100")}}, Makes, ""},
		{"requirement allows only T4", f, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in("gpu", "t4")}}, CannotMake, ""},
		{"NotIn", f, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a100"}}}}, CannotMake, ""},
		{"Exists", f, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}, Makes, ""},
		{"DoesNotExist", f, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist}}}, CannotMake, ""},
		{"a label the template says nothing of", f, NodeTemplate{}, MayMake, "gpu"},
		{"provider labels a NodePool leaves open", provider, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in("karpenter.sh/capacity-type", "on-demand")}},
			MayMake, "karpenter.k8s.aws/instance-family,karpenter.k8s.aws/instance-gpu-name,nvidia.com/gpu.product"},
		{"provider labels, one constrained away", provider, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in("karpenter.k8s.aws/instance-family", "g5")}},
			CannotMake, "karpenter.k8s.aws/instance-gpu-name,nvidia.com/gpu.product"},
		{"provider labels, all constrained", provider, NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{
			in("karpenter.k8s.aws/instance-family", "p4d", "p5"), in("karpenter.k8s.aws/instance-gpu-name", "a100", "h100")},
			Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}, Makes, ""},
		{"a taint the flavor does not declare", f, NodeTemplate{Labels: map[string]string{"gpu": "a100"},
			Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}}, CannotMake, ""},
		{"an open label does not excuse a taint", f, NodeTemplate{Taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}}}, CannotMake, "gpu"},
		{"a well-known label left open", &Flavor{NodeLabels: map[string]string{corev1.LabelInstanceTypeStable: "g5.xlarge"}}, NodeTemplate{}, Makes, ""},
		{"a well-known label constrained away", &Flavor{NodeLabels: map[string]string{corev1.LabelInstanceTypeStable: "g5.xlarge"}},
			NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(corev1.LabelInstanceTypeStable, "m5.large")}}, CannotMake, ""},
		{"its own pool's name", &Flavor{NodeLabels: map[string]string{"karpenter.sh/nodepool": "gpu"}}, NodeTemplate{Name: "gpu"}, Makes, ""},
		{"another pool's name", &Flavor{NodeLabels: map[string]string{"karpenter.sh/nodepool": "gpu"}}, NodeTemplate{Name: "cpu"}, CannotMake, ""},
		{"Gt", &Flavor{NodeLabels: map[string]string{"gpus": "8"}},
			NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{{Key: "gpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}}}, Makes, ""},
	} {
		if got := tc.f.MadeBy(tc.t); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := strings.Join(tc.f.OpenLabels(tc.t), ","); got != tc.open {
			t.Errorf("%s: open labels %q, want %q", tc.name, got, tc.open)
		}
	}
}

func TestSetsLabel(t *testing.T) {
	tmpl := NodeTemplate{Name: "p", Labels: map[string]string{"team": "a"},
		Requirements: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}}}
	for label, want := range map[string]bool{
		corev1.LabelHostname: true, corev1.LabelTopologyZone: true, "team": true, "rack": true, "block": false,
	} {
		if got := tmpl.SetsLabel(label); got != want {
			t.Errorf("SetsLabel(%s) = %v, want %v", label, got, want)
		}
	}
}

func TestTemplateValue(t *testing.T) {
	in := func(k string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	zone := corev1.LabelTopologyZone
	for _, tc := range []struct {
		name string
		t    NodeTemplate
		want string // "" for none
	}{
		{"a label", NodeTemplate{Labels: map[string]string{zone: "a"}}, "a"},
		{"one value", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(zone, "a")}}, "a"},
		{"two values", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(zone, "a", "b")}}, ""},
		{"narrowed to one", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(zone, "a", "b"), in(zone, "b")}}, "b"},
		{"ruled out", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(zone, "a"), {Key: zone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}}, ""},
		{"two single values", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{in(zone, "a"), in(zone, "b")}}, ""},
		{"exists", NodeTemplate{Requirements: []corev1.NodeSelectorRequirement{{Key: zone, Operator: corev1.NodeSelectorOpExists}}}, ""},
		{"another label", NodeTemplate{Labels: map[string]string{"rack": "r1"}, Requirements: []corev1.NodeSelectorRequirement{in("block", "b1")}}, ""},
		{"nothing", NodeTemplate{}, ""},
	} {
		got, ok := tc.t.Value(zone)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: Value = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
