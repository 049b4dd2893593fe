package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// The topology of these tests: block b1 of two racks, r1 of two 2-GPU
// nodes and r2 of two 4-GPU nodes, made for the test as kwok nodes.
const (
	labelBlock = "example.com/block"
	labelRack  = "example.com/rack"
)

const topologyDocs = `apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata:
  name: e2e-dc
spec:
  levels:
  - nodeLabel: example.com/block
  - nodeLabel: example.com/rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: e2e-tas-flavor
spec:
  nodeLabels:
    e2e-pool: tas
  topologyName: e2e-dc
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-tas
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: e2e-tas-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 16}
`

// topologyNodes creates the test's kwok nodes and deletes them when it
// ends.
func topologyNodes(ctx context.Context, t *testing.T, s *suite) {
	t.Helper()
	rackNodes(ctx, t, s, "tas", []rackNode{{"tas-r1-n1", "r1", 2}, {"tas-r1-n2", "r1", 2}, {"tas-r2-n1", "r2", 4}, {"tas-r2-n2", "r2", 4}})
}

// rackNode is a kwok node of block b1 in rack, with gpus nvidia.com/gpu.
type rackNode struct {
	name, rack string
	gpus       int64
}

// rackNodes creates kwok nodes labelled e2e-pool=pool, and deletes them
// when the test ends.
func rackNodes(ctx context.Context, t *testing.T, s *suite, pool string, nodes []rackNode) {
	t.Helper()
	for _, n := range nodes {
		gpus := *resource.NewQuantity(n.gpus, resource.DecimalSI)
		list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
			corev1.ResourcePods: resource.MustParse("110"), framework.ResourceGPU: gpus}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"type": "kwok", "e2e-pool": pool, labelBlock: "b1", labelRack: n.rack, corev1.LabelHostname: n.name}},
			Status: corev1.NodeStatus{Allocatable: list, Capacity: list},
		}
		if err := s.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating node %s: %v", n.name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", n.name, err)
			}
		})
	}
}

// deletedNode stands, in racksOf, for the rack of a node deleted since.
const deletedNode = "(deleted)"

// racksOf reads, from the nodes its pods ran on (the last each pod name
// was bound to), the racks a PyTorchJob's pods ran in, and fails the
// test for a pod that ran on a node of no rack.
func racksOf(ctx context.Context, t *testing.T, s *suite, rec *framework.Recorder, name string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for pod, node := range rec.Pods(name) {
		n := &corev1.Node{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: node}, n); apierrors.IsNotFound(err) {
			out[deletedNode]++
			continue
		} else if err != nil {
			t.Fatalf("pod %s: node %q: %v", pod, node, err)
		}
		if n.Labels[labelRack] == "" || n.Labels[labelBlock] != "b1" {
			t.Errorf("pod %s of PyTorchJob %s ran on node %s, outside the topology's block b1", pod, name, node)
		}
		out[n.Labels[labelRack]]++
	}
	return out
}

// A PyTorchJob whose master and workers ask for one rack
// (podset-required-topology, grouped by podset-group-name) runs with
// all four pods in the tightest rack that holds them, r1; a second such
// gang, admitted while r1 is taken, runs in r2; and a PyTorchJob of 9
// GPUs that prefers one rack, which none holds, spreads over both, each
// pod on the node its placement counted it on, while a pod its user
// makes with the labels and owner of one of its workers (the GPU left
// free would hold it) never runs beside them, nor outside the placement.
// Read from the pods' nodes. While
// the first runs, its user (with edit
// rights in the namespace) cannot make a pod of it in the other rack,
// nor move its pods by editing its pod template; then a node of its rack
// is deleted, and, with no room left in r1 to make its pods again, it is
// requeued and runs in r2.
func TestTopologyPyTorchJob(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-tas", "e2e-tas"
	useQueues(ctx, t, s, []string{queue}, topologyDocs)
	topologyNodes(ctx, t, s)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	grantEdit(ctx, t, s, ns, integrityUser)
	user, err := framework.NewUserClient(s.cluster.Kubeconfig, integrityUser)
	if err != nil {
		t.Fatal(err)
	}
	rec := recordPyTorchJobs(ctx, t, s, ns)
	gang := func(name, mode string, workers int64, runtime time.Duration) string {
		pj := framework.NewPyTorchJob(ns, name).Workers(workers).Runtime(runtime).
			TemplateAnnotation(mode, labelRack).TemplateAnnotation("kueue.x-k8s.io/podset-group-name", "train").Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatalf("creating PyTorchJob %s: %v", name, err)
		}
		checkQueued(t, pj, queue)
		return name
	}
	const required = "kueue.x-k8s.io/podset-required-topology"
	a := gang("gang-a", required, 3, 20*time.Second)
	var running *corev1.Pod
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning {
				running = p
				return true, "", nil
			}
		}
		return false, "no pod of PyTorchJob gang-a runs", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b := gang("gang-b", required, 3, 2*time.Second)

	// The user's attempts, while gang-a runs in r1.
	owner := running.OwnerReferences
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere", OwnerReferences: owner, Labels: running.Labels},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"e2e-pool": "tas", labelRack: "r2"},
			Containers: []corev1.Container{{Name: "c", Image: "registry.example/pytorch:v1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("1")}}}}}}
	err = userCreate(ctx, t, &attackRun{s: s, user: user, ns: ns}, pod)
	if err == nil || !strings.Contains(err.Error(), "topology domain") {
		t.Errorf("the user created pod %s of PyTorchJob gang-a in rack r2: %v; want a denial naming its topology domain", pod.Name, err)
	}
	patch := fmt.Sprintf(`{"spec":{"pytorchReplicaSpecs":{"Worker":{"template":{"spec":{"affinity":null,"nodeSelector":{"e2e-pool":"tas",%q:"r2"}}}}}}}`, labelRack)
	pj := framework.NewPyTorchJob(ns, a).Obj()
	if err := user.Patch(ctx, pj, client.RawPatch(types.MergePatchType, []byte(patch))); err == nil {
		t.Errorf("the user moved the workers of running PyTorchJob gang-a to rack r2 by its pod template")
	}

	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(context.Context) (bool, string, error) {
		pods := rec.Pods(a)
		bound := 0
		for _, node := range pods {
			if node != "" {
				bound++
			}
		}
		return bound == 4, fmt.Sprintf("pods of gang-a: %v", pods), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := racksOf(ctx, t, s, rec, a); got["r1"] != 4 || len(got) != 1 {
		t.Errorf("PyTorchJob gang-a (4 pods of 1 GPU, one rack) runs in racks %v, want all 4 pods in r1, the tightest rack that holds them", got)
	}

	// A node of r1 goes while gang-a runs there: r1 has no room to make
	// its pods again, so it is requeued, and runs again in r2.
	if err := s.client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tas-r1-n2"}}); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Evicted")
		if err != nil {
			return false, "", err
		}
		for _, e := range evs[a] {
			if strings.Contains(e.Message, "NodeFailures: node tas-r1-n2 was deleted") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("Evicted Events of gang-a: %v", evs[a]), nil
	})
	if err != nil {
		t.Fatalf("PyTorchJob gang-a was not requeued for its lost node: %v", err)
	}
	waitPyTorchJobs(ctx, t, s.client, ns, []string{a, b}, 2*time.Minute)
	// A pod that was on the deleted node may still be terminating there
	// when gang-a runs again (no kubelet ends it): its operator makes it
	// again only once the pod garbage collector has removed it.
	if got := racksOf(ctx, t, s, rec, a); got["r2"] < 2 || got["r1"] > 0 {
		t.Errorf("PyTorchJob gang-a, requeued, ran in racks %v, want its pods made again in r2, the rack with room, none in r1", got)
	}
	if master := rec.Pods(a)[a+"-master-0"]; !strings.HasPrefix(master, "tas-r2-") {
		t.Errorf("PyTorchJob gang-a, requeued, ran its master on %q, want a node of r2", master)
	}
	if got := racksOf(ctx, t, s, rec, b); got["r2"] != 4 || len(got) != 1 {
		t.Errorf("PyTorchJob gang-b ran in racks %v, want all 4 pods in r2, the rack left when gang-a held r1", got)
	}

	c := gang("spread", "kueue.x-k8s.io/podset-preferred-topology", 8, 15*time.Second)
	// While its nine pods run, the user makes a tenth that claims to
	// be one of them: a worker's owner and labels (its pod set's
	// tally.dev/podset among them), the flavor's node labels, and the
	// affinity the master's template pins (the master's node has a GPU
	// free), no node of its own.
	var worker, master *corev1.Pod
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		bound := 0
		for i := range pods.Items {
			if p := &pods.Items[i]; framework.Owner(p, framework.PyTorchJobGVK.Kind) == c && p.Spec.NodeName != "" {
				bound++
				if strings.HasPrefix(p.Name, c+"-worker-") {
					worker = p
				} else if p.Name == c+"-master-0" {
					master = p
				}
			}
		}
		return bound == 9 && worker != nil && master != nil, fmt.Sprintf("%d pods of PyTorchJob spread bound", bound), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread-forged", OwnerReferences: worker.OwnerReferences, Labels: worker.Labels},
		Spec: corev1.PodSpec{Affinity: master.Spec.Affinity, Tolerations: master.Spec.Tolerations, NodeSelector: map[string]string{"e2e-pool": "tas"},
			Containers: []corev1.Container{{Name: "c", Image: "registry.example/pytorch:v1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("1")}}}}}}
	forgedErr := userCreate(ctx, t, &attackRun{s: s, user: user, ns: ns}, forged)
	if forgedErr != nil {
		t.Logf("the user's pod %s, labelled as a worker of PyTorchJob spread: %v", forged.Name, forgedErr)
	} else {
		// It may run only in the place of one of the nine that has
		// ended (as a pod its controller makes again would): never
		// beside all nine.
		waitHeldBeside(ctx, t, s.client, ns, forged.Name, c, 9, time.Minute)
	}
	done := waitPyTorchJobs(ctx, t, s.client, ns, []string{c}, 2*time.Minute)[0]
	pods := rec.Pods(c)
	delete(pods, forged.Name)
	// Each pod ran on the node the placement counted it on: the gate gave
	// each pod of the spread pod set its own leaf.
	want := map[string]int{}
	for _, set := range strings.Split(done.GetAnnotations()["tally.dev/topology"], ";")[1:] {
		_, leaves, _ := strings.Cut(set, "=")
		for _, leaf := range strings.Split(leaves, ",") {
			path, n, _ := strings.Cut(leaf, ":")
			var count int
			fmt.Sscan(n, &count)
			want[path[strings.LastIndex(path, "/")+1:]] += count
		}
	}
	if node := rec.Pods(c)[forged.Name]; node != "" && want[node] == 0 {
		t.Errorf("the user's pod %s, labelled as a worker of PyTorchJob spread, ran on node %s, outside spread's placement %v", forged.Name, node, want)
	}
	got := map[string]int{}
	for _, node := range pods {
		got[node]++
	}
	if len(want) < 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("PyTorchJob spread (9 pods of 1 GPU, preferring one rack, which none holds) ran %v pods per node, want %v, its placement (tally.dev/topology %q) over several nodes",
			got, want, done.GetAnnotations()["tally.dev/topology"])
	}
}

const nodeFitDocs = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: e2e-fit-flavor
  annotations:
    tally.dev/node-fit: "true"
spec:
  nodeLabels:
    e2e-pool: fit
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-fit
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: e2e-fit-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 30}
`

// fitNode creates a kwok node of pool fit with gpus GPUs allocatable,
// deleted when the test ends.
func fitNode(ctx context.Context, t *testing.T, s *suite, name string, gpus int64) {
	t.Helper()
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods: resource.MustParse("110"), framework.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"type": "kwok", "e2e-pool": "fit", corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: list, Capacity: list},
	}
	if err := s.client.Create(ctx, node); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.client.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
}

// The fragmentation Kueue admits: a PyTorchJob of two 8-GPU pods, in a
// queue of 30 GPUs whose flavor's nodes have 7, 7 and 8 GPUs, fits the
// quota but no two nodes. With the flavor's tally.dev/node-fit it waits,
// saying why, and makes no pod; once an 8-GPU node joins, it runs, each
// pod on an 8-GPU node. A Job on one node that loses it while it runs has
// its pods given another node with room, and runs on. Read from the pods.
func TestNodeFitFragmentation(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 6*time.Minute)
	const ns, queue = "e2e-fit", "e2e-fit"
	useQueues(ctx, t, s, []string{queue}, nodeFitDocs)
	for i, gpus := range []int64{7, 7, 8} {
		fitNode(ctx, t, s, fmt.Sprintf("fit-n%d", i), gpus)
	}
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	rec := recordPyTorchJobs(ctx, t, s, ns)
	pj := framework.NewPyTorchJob(ns, "eights").Workers(1).GPUs(8).Runtime(2 * time.Second).Obj()
	if err := s.client.Create(ctx, pj); err != nil {
		t.Fatal(err)
	}
	checkQueued(t, pj, queue)
	const why = "fits ClusterQueue e2e-fit's quota in flavor e2e-fit-flavor, but not its topology"
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Pending")
		if err != nil {
			return false, "", err
		}
		for _, m := range evs["eights"] {
			if strings.Contains(m.Message, why) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("Pending Events of eights: %v", evs["eights"]), nil
	})
	if err != nil {
		t.Fatalf("PyTorchJob eights did not wait saying %q: %v", why, err)
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("PyTorchJob eights has %d pods while no two nodes hold its two 8-GPU pods", len(pods.Items))
	}
	fitNode(ctx, t, s, "fit-n3", 8)
	waitPyTorchJobs(ctx, t, s.client, ns, []string{"eights"}, 2*time.Minute)
	ran := rec.Pods("eights")
	if len(ran) != 2 {
		t.Fatalf("PyTorchJob eights made pods %v, want 2", ran)
	}
	for pod, node := range ran {
		if node != "fit-n2" && node != "fit-n3" {
			t.Errorf("pod %s ran on %s, a node without 8 GPUs free", pod, node)
		}
	}

	// A Job of one 8-GPU pod runs on fit-n2 or fit-n3, the nodes with 8
	// GPUs free, given its node by the pod gate. That node is deleted
	// while it runs: the lost pod is given the other one, and the Job
	// runs on without being requeued.
	job := framework.NewJob(ns, "swap").Parallelism(1).GPUs(8).Runtime(45 * time.Second).Obj()
	if err := s.client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	running := map[string]string{} // pod name → node
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "swap"}); err != nil {
			return false, "", err
		}
		clear(running)
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Name] = p.Spec.NodeName
			}
		}
		return len(running) == 1, fmt.Sprintf("running pods of Job swap: %v", running), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var lost, other string
	for _, node := range running {
		lost = node
	}
	switch lost {
	case "fit-n2":
		other = "fit-n3"
	case "fit-n3":
		other = "fit-n2"
	default:
		t.Fatalf("Job swap runs its pod on %s, want fit-n2 or fit-n3, the nodes with 8 GPUs free", lost)
	}
	if err := s.client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: lost}}); err != nil {
		t.Fatal(err)
	}
	// The pod garbage collector deletes the pods of a deleted node after
	// 40 s; kwok, meanwhile, would run the pod there to its end. The
	// test deletes it at once, as the collector would.
	for pod, node := range running {
		if node == lost {
			err := s.client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}, client.GracePeriodSeconds(0))
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs, err := framework.WorkloadEvents(ctx, s.client, ns, "Job", "NodeReplaced")
		if err != nil {
			return false, "", err
		}
		for _, e := range evs["swap"] {
			if strings.Contains(e.Message, "Node "+lost+" was deleted") && strings.Contains(e.Message, "now runs in "+other+" (1)") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("NodeReplaced Events of Job swap: %v", evs["swap"]), nil
	})
	if err != nil {
		t.Fatalf("Job swap's pod on deleted node %s was not given %s: %v", lost, other, err)
	}
	// The namespace's user makes a pod with the labels and owner of the
	// Job's pod, asking for the node that runs it: while the Job runs the
	// one pod it was admitted with, that pod must not run beside it.
	grantEdit(ctx, t, s, ns, integrityUser)
	user, err := framework.NewUserClient(s.cluster.Kubeconfig, integrityUser)
	if err != nil {
		t.Fatal(err)
	}
	var real *corev1.Pod
	err = framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "swap"}); err != nil {
			return false, "", err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Spec.NodeName == other && p.Status.Phase == corev1.PodRunning {
				real = p
			}
		}
		return real != nil, "Job swap's pod not Running on " + other, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "swap-forged", OwnerReferences: real.OwnerReferences, Labels: real.Labels},
		Spec: corev1.PodSpec{Affinity: real.Spec.Affinity, Tolerations: real.Spec.Tolerations, NodeSelector: map[string]string{corev1.LabelHostname: other},
			Containers: []corev1.Container{{Name: "c", Image: "registry.example/job:v1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{framework.ResourceGPU: resource.MustParse("8")}}}}}}
	if err := userCreate(ctx, t, &attackRun{s: s, user: user, ns: ns}, forged); err != nil {
		t.Logf("the user's pod %s, labelled as Job swap's: %v", forged.Name, err)
	} else {
		t.Cleanup(func() { _ = s.client.Delete(context.Background(), forged, client.GracePeriodSeconds(0)) })
		lastOn := ""
		err = framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			p, f := &corev1.Pod{}, &corev1.Pod{}
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(real), p); err != nil {
				return false, "", err
			}
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(forged), f); apierrors.IsNotFound(err) {
				t.Logf("the user's pod %s, labelled as Job swap's, was deleted (by the Job controller or tally) while the Job's pod ran; node when last seen: %q", forged.Name, lastOn)
				return true, "", nil
			} else if err != nil {
				return false, "", err
			}
			lastOn = f.Spec.NodeName
			ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			if f.Spec.NodeName != "" && !ended {
				t.Errorf("the user's pod %s, labelled as Job swap's, was bound to %s beside the one pod the Job was admitted with", f.Name, f.Spec.NodeName)
				return true, "", nil
			}
			return ended, fmt.Sprintf("Job swap's pod %s is %s; the user's pod is on node %q", p.Name, p.Status.Phase, f.Spec.NodeName), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitJobFinished(ctx, t, s, ns, "swap")
	evicted, err := framework.WorkloadEvents(ctx, s.client, ns, "Job", "Evicted")
	if err != nil {
		t.Fatal(err)
	}
	if len(evicted["swap"]) > 0 {
		t.Errorf("Job swap was evicted after losing node %s: %v", lost, evicted["swap"][0].Message)
	}
	pods = &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "swap"}); err != nil {
		t.Fatal(err)
	}
	succeeded := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded[p.Spec.NodeName]++
		}
	}
	if succeeded[other] != 1 || len(succeeded) != 1 {
		t.Errorf("Job swap's pods succeeded on nodes %v, want one on %s, which replaced %s", succeeded, other, lost)
	}
}

// waitHeldBeside waits until fewer than n pods of PyTorchJob job run in
// ns, and fails if the user's pod forged is bound while all n do: it may
// run only in the place of one that has ended, as a pod the job's
// controller makes again would.
func waitHeldBeside(ctx context.Context, t *testing.T, c client.Reader, ns, forged, job string, n int, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(ctx, 200*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err.Error(), nil
		}
		running, forgedOn := 0, ""
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.Name == forged:
				forgedOn = p.Spec.NodeName
			case framework.Owner(p, framework.PyTorchJobGVK.Kind) == job && p.Spec.NodeName != "" &&
				p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
				running++
			}
		}
		if forgedOn != "" && running == n {
			t.Errorf("the user's pod %s, claiming to be PyTorchJob %s's, was bound to node %s beside all %d of its pods", forged, job, forgedOn, n)
			return true, "", nil
		}
		if running < n {
			t.Logf("the user's pod %s, claiming to be PyTorchJob %s's, was held while its %d pods ran; one has ended, and it is on node %q", forged, job, n, forgedOn)
		}
		return running < n, fmt.Sprintf("%d pods of PyTorchJob %s run; the user's pod is on node %q", running, job, forgedOn), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
