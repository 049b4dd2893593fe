package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// tasNode creates a Ready node of pool tas in block/rack with gpus GPUs.
func tasNode(t *testing.T, name, block, rack string, gpus int64) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pool": "tas", "example.com/block": block, "example.com/rack": rack, corev1.LabelHostname: name}}}
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	n.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourcePods: resource.MustParse("110"),
			"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// rackJob is a Job of pods pods of gpus GPUs each that asks for one rack.
func rackJob(ns, name string, pods int32, gpus int64) *batchv1.Job {
	job := newJob(ns, name, "100m")
	job.Spec.Parallelism, job.Spec.Completions = ptr.To(pods), ptr.To(pods)
	job.Spec.Template.Annotations = map[string]string{queues.AnnotationRequiredTopology: "example.com/rack"}
	job.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return job
}

// pinnedRack is the rack a Job's template requires, or "".
func pinnedRack(job *batchv1.Job) string {
	a := job.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == "example.com/rack" && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return ""
}

// TestIntegrationTopology: a Job that asks for one rack is admitted into
// the tightest rack that holds it, its template pinned there and its
// placement recorded, and a pod of it is denied elsewhere; the next,
// which no rack has room for once the first holds its rack, waits,
// saying why, and is admitted into a rack as soon as a node joins it. A
// pod outside any queue, bound to a rack's node, takes its room. A node
// of the first's rack deleted while another node of the rack holds its
// pods there has them given that node; deleted with no room left in the
// rack to make them again, it has the first requeued. The third's only
// node, once it has not been Ready for 30 s, has the third requeued.
func TestIntegrationTopology(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "tas"
	bindManaged(t, ns, "tas")
	// Rack r1: two 4-GPU nodes; rack r2: a 4-GPU and a 2-GPU node.
	tasNode(t, "tas-n1", "b1", "r1", 4)
	tasNode(t, "tas-n2", "b1", "r1", 4)
	tasNode(t, "tas-n3", "b1", "r2", 4)
	tasNode(t, "tas-n4", "b1", "r2", 2)

	if err := k8s.Create(ctx, rackJob(ns, "first", 4, 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "first"), "Job first (4 pods of 2 GPUs, one rack) not admitted"
	})
	first := getJob(t, ns, "first")
	if got := pinnedRack(first); got != "r1" {
		t.Fatalf("Job first is pinned to rack %q, want r1, the one rack that holds 4 pods of 2 GPUs; affinity %+v", got, first.Spec.Template.Spec.Affinity)
	}
	if got, want := first.Annotations[queues.AnnotationTopology], "tas-gpu;main=b1/r1/tas-n1:2,b1/r1/tas-n2:2"; got != want {
		t.Fatalf("%s = %q, want %q", queues.AnnotationTopology, got, want)
	}

	// A pod that names Job first as its controller keeps to rack r1, as
	// the Job's own pods do, or is denied.
	for name, sel := range map[string]map[string]string{
		"other-rack": {"pool": "tas", "example.com/rack": "r2"}, "any-rack": {"pool": "tas"},
	} {
		p := newPod(ns, name, "100m", first, "Job")
		p.Spec.Affinity, p.Spec.NodeSelector = nil, sel
		if err := k8s.Create(ctx, p); err == nil || !strings.Contains(err.Error(), "must run in the topology domain of flavor tas-gpu") ||
			!strings.Contains(err.Error(), "example.com/block=b1,example.com/rack=r1") {
			t.Errorf("a pod of Job first with nodeSelector %v: %v; want a denial naming its rack r1", sel, err)
		}
	}

	if err := k8s.Create(ctx, rackJob(ns, "second", 4, 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "second", "Pending", "no example.com/rack domain holds 4 pods; the largest, b1/r2, holds 3")
	})
	if !suspended(t, ns, "second") {
		t.Fatal("Job second admitted with no rack room for it")
	}
	tasNode(t, "tas-n5", "b1", "r2", 2)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "second"), "Job second not admitted once rack r2 has room for it"
	})
	if got := pinnedRack(getJob(t, ns, "second")); got != "r2" {
		t.Fatalf("Job second is pinned to rack %q, want r2", got)
	}

	// A pod bound to a rack's node outside any queue takes its room: the
	// third Job waits until it is gone.
	tasNode(t, "tas-n6", "b1", "r3", 2)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tas-other"},
		Spec: corev1.PodSpec{NodeName: "tas-n6", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}}}
	if err := k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, rackJob(ns, "third", 1, 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "third", "Pending", "no example.com/rack domain holds 1 pods")
	})
	if !suspended(t, ns, "third") {
		t.Fatal("Job third admitted into rack r3, whose node a pod outside the queue fills")
	}
	if err := k8s.Delete(ctx, other, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "third"), "Job third not admitted once the pod that filled rack r3 is gone"
	})
	if got := pinnedRack(getJob(t, ns, "third")); got != "r3" {
		t.Fatalf("Job third is pinned to rack %q, want r3", got)
	}

	// Node tas-n2 goes while rack r1 has another node with room for
	// Job first's 2 pods there: they are given that node, in the
	// placement recorded, and first runs on.
	tasNode(t, "tas-n7", "b1", "r1", 4)
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tas-n2"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "first", "NodeReplaced", "Node tas-n2 was deleted: the 2 pods of pod set main placed there go to another node of the same domain; pod set main now runs in b1/r1/tas-n1 (2), b1/r1/tas-n7 (2)")
	})
	if got, want := getJob(t, ns, "first").Annotations[queues.AnnotationTopology], "tas-gpu;main=b1/r1/tas-n1:2,b1/r1/tas-n7:2"; got != want {
		t.Fatalf("after node tas-n2 went, %s = %q, want %q", queues.AnnotationTopology, got, want)
	}
	if suspended(t, ns, "first") {
		t.Fatal("Job first was suspended when its lost node's pods had another node of its rack")
	}
	// Node tas-n7 goes too: rack r1 has no room left to make first's 2
	// pods there again, so it is requeued.
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tas-n7"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "first", "Evicted", "NodeFailures: node tas-n7 was deleted, and b1/r1 has no room to make its 2 pods there again; requeued")
	})
	if !suspended(t, ns, "first") {
		t.Fatal("Job first still runs after losing a node its rack cannot replace")
	}
	// Node tas-n6, rack r3's only node, where Job third has its room,
	// stops being Ready: once it has stayed so for 30 s, third is
	// requeued, not before, since no other node of r3 holds its pod.
	n6 := &corev1.Node{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "tas-n6"}, n6); err != nil {
		t.Fatal(err)
	}
	n6.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if err := k8s.Status().Update(ctx, n6); err != nil {
		t.Fatal(err)
	}
	notReady := time.Now()
	eventually(t, 45*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "third", "Evicted", "NodeFailures: node tas-n6 was not Ready (or was cordoned) for 30s, and b1/r3 has no room to make its 1 pods there again; requeued")
	})
	if took := time.Since(notReady); took < 29*time.Second {
		t.Errorf("Job third was requeued %s after its node stopped being Ready, want 30s", took.Round(time.Second))
	}
	for _, name := range []string{"first", "second", "third"} {
		if err := k8s.Delete(ctx, getJob(t, ns, name), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
}

// deviceNode creates a Ready node of pool tasdra in block/rack, with no
// GPU in its allocatable: its GPUs are published in ResourceSlices.
func deviceNode(t *testing.T, name, block, rack string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pool": "tasdra", "example.com/block": block, "example.com/rack": rack, corev1.LabelHostname: name}}}
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	n.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// gpuSlice is a ResourceSlice of driver gpu.example.com that publishes
// gpus devices on node, in pool node at generation gen.
func gpuSlice(node string, gen int64, gpus int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}}}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

// TestIntegrationTopologyDevices: in a flavor with a topology, a node's
// GPUs published in a ResourceSlice, of the DeviceClass that
// deviceClassMappings maps to example.com/gpu, are its room for pods
// that claim them. A Job whose two pods claim 2 GPUs each in one rack
// waits while no rack's nodes publish 4, and is admitted into the rack
// whose node publishes them once its slice comes; a slice of the other
// rack's pool's next generation, with fewer GPUs, leaves that rack too
// small for a second such Job.
func TestIntegrationTopologyDevices(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "tasdra"
	bindManaged(t, ns, "tasdra")
	deviceNode(t, "tasdra-n1", "d1", "r1")
	deviceNode(t, "tasdra-n2", "d1", "r2")
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
		}
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}}
	create(class, gpuSlice("tasdra-n1", 1, 2), claimTemplate(ns, "two-gpus", draClass, 2))
	gang := func(name string) *batchv1.Job {
		job := claimingJob(ns, name, "two-gpus", 2)
		job.Spec.Template.Annotations = map[string]string{queues.AnnotationRequiredTopology: "example.com/rack"}
		return job
	}
	create(gang("first"))
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "first", "Pending", "no example.com/rack domain holds 2 pods; the largest, d1/r1, holds 1")
	})
	if !suspended(t, ns, "first") {
		t.Fatal("Job first admitted with no rack that has 4 GPUs")
	}
	create(gpuSlice("tasdra-n2", 1, 4))
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "first"), "Job first not admitted once rack r2's node publishes 4 GPUs"
	})
	if got, want := getJob(t, ns, "first").Annotations[queues.AnnotationTopology], "tas-dra;main=d1/r2/tasdra-n2:2"; got != want {
		t.Fatalf("%s = %q, want %q", queues.AnnotationTopology, got, want)
	}
	// n1's pool, at its next generation, publishes 1 GPU: the old
	// generation's 2 no longer count.
	create(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "tasdra-n1-gpus-next"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", NodeName: ptr.To("tasdra-n1"), Pool: resourcev1.ResourcePool{Name: "tasdra-n1", Generation: 2, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0"}}}})
	second := claimingJob(ns, "second", "two-gpus", 1)
	second.Spec.Template.Annotations = map[string]string{queues.AnnotationRequiredTopology: "example.com/rack"}
	create(second)
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "second", "Pending", "no example.com/rack domain holds 1 pods")
	})
	if !suspended(t, ns, "second") {
		t.Fatal("Job second admitted into rack r1, whose pool's current generation has 1 GPU")
	}
	for _, name := range []string{"first", "second"} {
		if err := k8s.Delete(ctx, getJob(t, ns, name), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntegrationReadBoundPods: explain's room counts the pods bound to
// nodes that have not ended, which it lists with field selectors the
// API server must take: a running bound pod is listed; one that has
// succeeded, and one not bound, are not.
func TestIntegrationReadBoundPods(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	ns := "bound-pods"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pod := func(name, node string, phase corev1.PodPhase) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = phase
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod("running", "bound-n1", corev1.PodRunning)
	pod("done", "bound-n1", corev1.PodSucceeded)
	pod("unbound", "", corev1.PodPending)
	cfg, _, errs := queues.Parse([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f, annotations: {tally.dev/node-fit: \"true\"}}\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, p := range inspect.ReadBoundPods(ctx, k8s, cfg) {
		if p.Namespace == ns {
			got = append(got, p.Name)
		}
	}
	if len(got) != 1 || got[0] != "running" {
		t.Errorf("bound pods of %s: %v, want [running]", ns, got)
	}
	if none, _, _ := queues.Parse([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n")); inspect.ReadBoundPods(ctx, k8s, none) != nil {
		t.Error("bound pods listed for a config with no topology")
	}
}
