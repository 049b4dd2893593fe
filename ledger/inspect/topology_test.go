package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

const explainTopologyConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
spec: {topologyName: dc}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 100}
`

// TestExplainTopology: a running Job holds 3 of rack r1's 4 CPUs (its
// tally.dev/topology says so, and explain shows where it runs), rack r2
// has 1; a Job of two 1-CPU pods that asks for one rack waits for room
// in one, and explain says which racks hold the most; without the nodes
// it is judged by quota alone.
func TestExplainTopology(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(explainTopologyConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	node := func(name, rack, cpu string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack, corev1.LabelHostname: name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	nodes := []corev1.Node{node("n1", "r1", "2"), node("n2", "r1", "2"), node("n3", "r2", "1")}
	run := explainJob("a", "run", 1, time.Hour, queues.StateAdmitted, time.Minute, 0, 0).Obj.(*batchv1.Job)
	run.Spec.Parallelism = ptr.To[int32](3)
	run.Annotations[queues.AnnotationTopology] = "default;main=r1/n1:2,r1/n2:1"
	running, _ := kinds.NewRegistry().Of(run)
	gang := explainJob("a", "gang", 1, time.Minute, queues.StatePending, 0, 0, 0).Obj.(*batchv1.Job)
	gang.Spec.Parallelism = ptr.To[int32](2)
	gang.Spec.Template.Annotations = map[string]string{queues.AnnotationRequiredTopology: "rack"}
	target, _ := kinds.NewRegistry().Of(gang)
	in := ExplainInput{Config: cfg, Workloads: []*kinds.Object{running, target}, AllNamespaces: true, Target: target, Now: explainNow, Nodes: nodes}

	x := Explain(in)
	if !strings.Contains(x.Reason, "no rack domain holds 2 pods; the largest") {
		t.Errorf("why: %q, want the rack level and its largest domain", x.Reason)
	}
	if len(x.Room) != 2 || x.Room[0].Level != "rack" || len(x.Room[0].Domains) != 2 || x.Room[0].Domains[0].Count != 1 {
		t.Errorf("room %+v, want racks r2 and r1 holding 1 pod each", x.Room)
	}
	var b bytes.Buffer
	if err := WriteExplanation(&b, x); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Room:         rack: r1 holds 1, r2 holds 1") && !strings.Contains(b.String(), "Room:         rack: r2 holds 1, r1 holds 1") ||
		!strings.Contains(b.String(), "Why:          fits ClusterQueue q's quota in flavor default, but not its topology") {
		t.Errorf("explanation:\n%s\nwant a Room line for the rack level", b.String())
	}

	// The running Job: where it runs.
	in.Target = running
	if x := Explain(in); len(x.Topology) != 1 || x.Topology[0].PodSet != "main" || len(x.Topology[0].Domains) != 2 {
		t.Errorf("topology of the running Job: %+v, want main in r1/n1 and r1/n2", x.Topology)
	}

	// Pods bound to the nodes use room too: a DaemonSet's pod takes rack
	// r2's one CPU; the running Job's own pod on n2 is already in its
	// placement, and a pod that has ended uses nothing.
	pod := func(name, node, cpu string, labels map[string]string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	own := pod("run-0", "n2", "1", map[string]string{queues.LabelWorkload: string(run.UID)}, corev1.PodRunning)
	own.Namespace = run.Namespace
	in.Target = target
	in.BoundPods = []corev1.Pod{pod("ds-n3", "n3", "1", nil, corev1.PodRunning), own, pod("done", "n2", "1", nil, corev1.PodSucceeded)}
	if x := Explain(in); len(x.Room) != 2 || len(x.Room[0].Domains) != 2 || strings.Join(x.Room[0].Domains[0].Values, "/") != "r1" || x.Room[0].Domains[0].Count != 1 || x.Room[0].Domains[1].Count != 0 {
		t.Errorf("room with bound pods %+v, want r1 holding 1 pod and r2 none", x.Room)
	}
	in.BoundPods = nil

	// Without nodes: by quota alone, it fits.
	in.Target, in.Nodes = target, nil
	if x := Explain(in); !strings.HasPrefix(x.Reason, "fits now") {
		t.Errorf("without nodes: %q, want it judged by quota alone", x.Reason)
	}
}

// TestExplainUnmadeLevels: a NodePool that makes nodes of a flavor with
// a topology of rack and node can make them into no rack: explain says
// so; one whose template labels its nodes' rack can, and counts; one
// that may pick among racks can make them, and counts in none.
func TestExplainUnmadeLevels(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(explainTopologyConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	target := explainJob("a", "gang", 1, time.Minute, queues.StatePending, 0, 0, 0)
	in := ExplainInput{Config: cfg, Workloads: []*kinds.Object{target}, AllNamespaces: true, Target: target, Now: explainNow,
		NodePools: []queues.NodePool{{Template: flavors.NodeTemplate{Name: "gpus"}}, {Template: flavors.NodeTemplate{Name: "racked", Labels: map[string]string{"rack": "r9"}}},
			{Template: flavors.NodeTemplate{Name: "racks", Requirements: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r8", "r9"}}}}}}}
	var notes []string
	for _, n := range Explain(in).Notes {
		if strings.HasPrefix(n, "NodePool") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "NodePool gpus can make nodes of flavor default, but not into its domains of rack:") ||
		!strings.HasPrefix(notes[1], "NodePool racks can make nodes of flavor default in several domains of rack: its room counts in none of them") {
		t.Errorf("notes %q, want one of NodePool gpus that makes no rack, and one of NodePool racks that may make two", notes)
	}
}
