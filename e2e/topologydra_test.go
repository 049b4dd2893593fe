package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// topologyDRADocs are a topology of racks whose nodes (e2e-pool=tasdra)
// have no GPU in their allocatable: their GPUs are devices of
// gpu.example.com, published in ResourceSlices and counted as
// example.com/gpu.
const topologyDRADocs = draConfig + `---
apiVersion: kueue.x-k8s.io/v1beta1
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
  name: e2e-tasdra-flavor
spec:
  nodeLabels:
    e2e-pool: tasdra
  topologyName: e2e-dc
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-tasdra
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, example.com/gpu]
    flavors:
    - name: e2e-tasdra-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: example.com/gpu, nominalQuota: 32}
`

// rackSlice publishes n devices of gpu.example.com on node, and removes
// them when the test ends.
func rackSlice(ctx context.Context, t *testing.T, s *suite, node string, n int) {
	t.Helper()
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for i := range n {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", i)})
	}
	if err := s.client.Create(ctx, slice); err != nil {
		t.Fatalf("publishing the devices of %s: %v", node, err)
	}
	t.Cleanup(func() {
		if err := s.client.Delete(context.Background(), slice); client.IgnoreNotFound(err) != nil {
			t.Errorf("removing the devices of %s: %v", node, err)
		}
	})
}

// A PyTorchJob whose master and worker each claim 4 GPUs of a DRA
// DeviceClass, in one rack, on nodes whose GPUs only their ResourceSlices
// publish: it runs in rack r1, the one whose nodes publish them; a second
// such gang waits while r1's devices are taken, and runs in r2 once r2's
// nodes publish theirs. The kube-scheduler allocates the claims on the
// nodes tally placed the pods on.
func TestTopologyDRA(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-tasdra", "e2e-tasdra"
	publishDevices(ctx, t, s)
	useQueues(ctx, t, s, []string{queue}, topologyDRADocs)
	rackNodes(ctx, t, s, "tasdra", []rackNode{{"tasdra-r1-n1", "r1", 0}, {"tasdra-r1-n2", "r1", 0}, {"tasdra-r2-n1", "r2", 0}, {"tasdra-r2-n2", "r2", 0}})
	rackSlice(ctx, t, s, "tasdra-r1-n1", 4)
	rackSlice(ctx, t, s, "tasdra-r1-n2", 4)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	if err := s.client.Create(ctx, claimTemplate(ns, "four-gpus", draClass, 4)); err != nil {
		t.Fatal(err)
	}
	rec := recordPyTorchJobs(ctx, t, s, ns)
	gang := func(name string, runtime time.Duration) string {
		pj := framework.NewPyTorchJob(ns, name).Workers(1).Runtime(runtime).ClaimFrom("four-gpus").
			TemplateAnnotation("kueue.x-k8s.io/podset-required-topology", labelRack).TemplateAnnotation("kueue.x-k8s.io/podset-group-name", "train").Obj()
		if err := s.client.Create(ctx, pj); err != nil {
			t.Fatalf("creating PyTorchJob %s: %v", name, err)
		}
		checkQueued(t, pj, queue)
		return name
	}
	bound := func(name string, want int) {
		t.Helper()
		err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(context.Context) (bool, string, error) {
			n := 0
			for _, node := range rec.Pods(name) {
				if node != "" {
					n++
				}
			}
			return n == want, fmt.Sprintf("pods of %s: %v", name, rec.Pods(name)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	a := gang("gang-a", 30*time.Second)
	bound(a, 2)
	b := gang("gang-b", 2*time.Second)
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs, err := framework.WorkloadEvents(ctx, s.client, ns, framework.PyTorchJobGVK.Kind, "Pending")
		if err != nil {
			return false, "", err
		}
		for _, e := range evs[b] {
			if strings.Contains(e.Message, "no "+labelRack+" domain holds 2 pods") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("no Pending Event on %s naming the rack level: %v", b, evs[b]), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := runningPods(ctx, s.client, ns, b); err != nil || n != 0 {
		t.Fatalf("%d pods of %s run (%v) while r1's devices are taken and r2 has none", n, b, err)
	}
	rackSlice(ctx, t, s, "tasdra-r2-n1", 4)
	rackSlice(ctx, t, s, "tasdra-r2-n2", 4)
	bound(b, 2)
	waitPyTorchJobs(ctx, t, s.client, ns, []string{a, b}, 2*time.Minute)
	if got := racksOf(ctx, t, s, rec, a); got["r1"] != 2 || len(got) != 1 {
		t.Errorf("PyTorchJob %s (2 pods of 4 GPUs, one rack) ran in racks %v, want both pods in r1, the rack whose nodes publish GPUs", a, got)
	}
	if got := racksOf(ctx, t, s, rec, b); got["r2"] != 2 || len(got) != 1 {
		t.Errorf("PyTorchJob %s ran in racks %v, want both pods in r2, once its nodes publish GPUs", b, got)
	}
}
