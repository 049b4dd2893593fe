package inspect

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// TestUnhostable: a flavor is hostable by a Ready, schedulable node with
// its labels, or by a NodePool that can make one; every other flavor is
// listed.
func TestUnhostable(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(queuestest.New().
		Flavor("cpu", "nodeLabels:", "  node-type: cpu").
		Flavor("a100", "nodeLabels:", "  gpu: a100").
		Flavor("t4", "nodeLabels:", "  gpu: t4").
		Flavor("anywhere").String()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	node := func(labels map[string]string, ready bool, unschedulable bool) corev1.Node {
		n := corev1.Node{}
		n.Labels = labels
		n.Spec.Unschedulable = unschedulable
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		return n
	}
	pools := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{{Object: map[string]any{
		"metadata": map[string]any{"name": "gpu"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "ml"}},
			"spec": map[string]any{"requirements": []any{
				map[string]any{"key": "gpu", "operator": "In", "values": []any{"t4"}},
			}},
		}},
	}}}}
	templates := NodeTemplates(pools)
	if len(templates) != 1 || templates[0].Labels["team"] != "ml" || len(templates[0].Requirements) != 1 || templates[0].Requirements[0].Values[0] != "t4" {
		t.Fatalf("NodePool read as %+v", templates)
	}
	for _, tc := range []struct {
		name      string
		nodes     []corev1.Node
		templates bool
		want      string
	}{
		{"no nodes, no pools", nil, false, "a100,anywhere,cpu,t4"},
		{"a cpu node", []corev1.Node{node(map[string]string{"node-type": "cpu"}, true, false)}, false, "a100,t4"},
		{"a cpu node not ready", []corev1.Node{node(map[string]string{"node-type": "cpu"}, false, false)}, false, "a100,anywhere,cpu,t4"},
		{"a cpu node cordoned", []corev1.Node{node(map[string]string{"node-type": "cpu"}, true, true)}, false, "a100,anywhere,cpu,t4"},
		{"a pool of T4s", []corev1.Node{node(map[string]string{"node-type": "cpu"}, true, false)}, true, "a100"},
	} {
		var ts = templates
		if !tc.templates {
			ts = nil
		}
		var got []string
		for _, u := range Unhostable(cfg, tc.nodes, ts) {
			got = append(got, u.Flavor)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s: unhostable %v, want %s", tc.name, got, tc.want)
		}
	}
	msg := Unhostable(cfg, nil, templates)[0].Message()
	if !strings.HasPrefix(msg, "ResourceFlavor a100 (node labels gpu=a100, node taints none): none of the 0 Ready nodes has its labels and admits its pods, and none of the 1 NodePools can make one") {
		t.Errorf("message %q", msg)
	}
}

// TestUnhostableCannotTell: a flavor keyed on labels that Karpenter's
// provider or a node labeller sets on the nodes it makes, which a
// NodePool leaves open, is not reported as one no node can host: tally
// cannot tell, and says so. A NodePool that rules a label out still
// makes the verdict sure.
func TestUnhostableCannotTell(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(queuestest.New().
		Flavor("a100", "nodeLabels:", "  karpenter.k8s.aws/instance-gpu-name: a100", "  nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB").
		Flavor("p4d", "nodeLabels:", "  karpenter.k8s.aws/instance-family: p4d").String()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	pool := func(name string, reqs ...any) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"requirements": reqs}}},
		}}
	}
	onDemand := map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}}
	g5 := map[string]any{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": []any{"g5"}}
	got := Unhostable(cfg, nil, NodeTemplates(&unstructured.UnstructuredList{Items: []unstructured.Unstructured{pool("gpu", onDemand, g5)}}))
	if len(got) != 2 {
		t.Fatalf("verdicts %+v, want one for each flavor", got)
	}
	a100, p4d := got[0], got[1]
	if !a100.Unsure || a100.Severity() != "note" || strings.Join(a100.MayPools, ",") != "gpu" ||
		strings.Join(a100.Open, ",") != "karpenter.k8s.aws/instance-gpu-name,nvidia.com/gpu.product" {
		t.Errorf("flavor a100, keyed on labels NodePool gpu leaves open: %+v; want tally to say it cannot tell", a100)
	}
	if msg := a100.Message(); !strings.Contains(msg, "NodePool gpu may make one") || !strings.Contains(msg, "tally cannot tell") ||
		strings.Contains(msg, "will not start") {
		t.Errorf("message %q", msg)
	}
	if p4d.Unsure || p4d.Severity() != "warning" {
		t.Errorf("flavor p4d, whose instance family NodePool gpu rules out: %+v; want a sure verdict", p4d)
	}
}

// TestUnhostableTopology: a flavor with a topology of racks is hosted by
// a Ready node of its labels only if the node has a rack, and made by a
// NodePool only if its nodes get one; without, the verdict names the
// missing level and the NodePools that make rackless nodes.
func TestUnhostableTopology(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tas}
spec: {nodeLabels: {pool: gpu}, topologyName: dc}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: plain}
spec: {nodeLabels: {pool: gpu}}
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	node := func(labels map[string]string) corev1.Node {
		n := corev1.Node{}
		n.Labels = labels
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	pool := func(name string, labels map[string]any) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": labels}}},
		}}
	}
	racked := pool("racked", map[string]any{"pool": "gpu", "example.com/rack": "r9"})
	rackless := pool("rackless", map[string]any{"pool": "gpu"})
	for _, tc := range []struct {
		name      string
		nodes     []corev1.Node
		pools     []unstructured.Unstructured
		want      string // the flavors reported
		levels    string // tas's missing levels
		madePools string
	}{
		{"a node with a rack", []corev1.Node{node(map[string]string{"pool": "gpu", "example.com/rack": "r1", corev1.LabelHostname: "n1"})}, nil, "", "", ""},
		{"a node without a rack", []corev1.Node{node(map[string]string{"pool": "gpu", corev1.LabelHostname: "n1"})}, nil, "tas", "example.com/rack", ""},
		{"a node without a rack, and one with", []corev1.Node{node(map[string]string{"pool": "gpu", corev1.LabelHostname: "n1"}),
			node(map[string]string{"pool": "gpu", "example.com/rack": "r1", corev1.LabelHostname: "n2"})}, nil, "", "", ""},
		{"a NodePool of racked nodes", nil, []unstructured.Unstructured{racked}, "", "", ""},
		{"a NodePool of rackless nodes", nil, []unstructured.Unstructured{rackless}, "tas", "example.com/rack", "rackless"},
		{"both NodePools", nil, []unstructured.Unstructured{rackless, racked}, "", "", ""},
		{"nothing", nil, nil, "plain,tas", "", ""},
	} {
		got := Unhostable(cfg, tc.nodes, NodeTemplates(&unstructured.UnstructuredList{Items: tc.pools}))
		var names []string
		for _, u := range got {
			names = append(names, u.Flavor)
			if u.Flavor != "tas" {
				continue
			}
			if strings.Join(u.Levels, ",") != tc.levels || strings.Join(u.MadePools, ",") != tc.madePools || u.Severity() != "warning" {
				t.Errorf("%s: flavor tas: %+v; want levels %q, NodePools %q, a warning", tc.name, u, tc.levels, tc.madePools)
			}
			if msg := u.Message(); tc.levels != "" && (!strings.Contains(msg, "topology dc") || !strings.Contains(msg, "carries label example.com/rack") ||
				!strings.Contains(msg, "join no domain")) {
				t.Errorf("%s: message %q, want it to name topology dc and its missing level", tc.name, msg)
			}
		}
		if strings.Join(names, ",") != tc.want {
			t.Errorf("%s: unhostable %v, want %q", tc.name, names, tc.want)
		}
	}
	u := Unhostable(cfg, nil, NodeTemplates(&unstructured.UnstructuredList{Items: []unstructured.Unstructured{rackless}}))[0]
	if want := "ResourceFlavor tas (node labels pool=gpu, node taints none, topology dc): no Ready node (of 0) that has its labels and admits its pods carries label example.com/rack of the topology's levels, and none of the 1 NodePools makes such nodes with them (NodePool rackless makes its nodes without them); nodes without them join no domain of the topology, so no workload is admitted in it (label the nodes, or name the labels in a NodePool's template labels or requirements)"; u.Message() != want {
		t.Errorf("message\n%s\nwant\n%s", u.Message(), want)
	}
}
