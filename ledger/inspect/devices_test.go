package inspect

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// TestTopologyDomainsCountDevices: the domains explain judges on count a
// node's devices of a mapped class, less those a claim holds; without
// the devices (a user who may not list them), a node has none. A mapped
// class whose selector does not compile is named, for explain's notes.
func TestTopologyDomainsCountDevices(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(explainTopologyConfig + `---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  deviceClassMappings:
  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	node := func(name, rack string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack, corev1.LabelHostname: name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	nodes := []corev1.Node{node("n1", "r1"), node("n2", "r2")}
	devices := &Devices{
		Classes: []resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}},
		Slices: []resourcev1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", NodeName: ptr.To("n2"), Pool: resourcev1.ResourcePool{Name: "n2", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "g0"}, {Name: "g1"}, {Name: "g2"}}}}},
		Claims: []resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "n2", Device: "g1"}}}}}}},
	}
	broken := *devices
	broken.Classes = []resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver =="}}}}}}
	if _, _, problems := topologyDomains(cfg, nodes, nil, nil, &broken, nil); len(problems) != 1 ||
		!strings.HasPrefix(problems[0].Message(), "DeviceClass gpu.example.com (mapped to example.com/gpu): spec.selectors[0].cel.expression does not compile") {
		t.Errorf("a class whose selector does not compile: problems %+v, want it named", problems)
	}
	perPod := flavors.Resources{"example.com/gpu": 1, corev1.ResourcePods: 1}
	for _, tc := range []struct {
		name    string
		devices *Devices
		r1, r2  int32
	}{
		{"with the devices", devices, 0, 2},
		{"without them", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			domains, _, _ := topologyDomains(cfg, nodes, nil, nil, tc.devices, nil)
			if got := domains["default"].Holds([]string{"r1"}, perPod); got != tc.r1 {
				t.Errorf("rack r1 holds %d 1-GPU pods, want %d", got, tc.r1)
			}
			if got := domains["default"].Holds([]string{"r2"}, perPod); got != tc.r2 {
				t.Errorf("rack r2 holds %d 1-GPU pods, want %d", got, tc.r2)
			}
		})
	}
}
