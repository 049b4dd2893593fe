package kinds

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

const claimingPyTorchJob = `{
  "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
  "metadata": {"name": "dra", "namespace": "team-a", "uid": "u1"},
  "spec": {
    "runPolicy": {"suspend": true},
    "pytorchReplicaSpecs": {
      "Master": {"replicas": 1, "template": {"spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "pytorch", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}},
      "Worker": {"replicas": 3, "template": {"spec": {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "%s"}],
        "containers": [{"name": "pytorch", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}}
    }
  }
}`

// A workload's pod sets are charged the devices their claims' templates
// ask for, and a claim that cannot be charged leaves it unresolved, with
// the path of its pod template.
func TestWorkloadChargesClaims(t *testing.T) {
	tpl := func(name string, count int64, class string) *resourcev1.ResourceClaimTemplate {
		t := &resourcev1.ResourceClaimTemplate{}
		t.Name = name
		t.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}}
		return t
	}
	d := &queues.PodDefaults{
		Config: &queues.Config{DeviceClasses: map[string]corev1.ResourceName{"gpu.example.com": "example.com/gpu"}},
		ClaimTemplates: map[string]*resourcev1.ResourceClaimTemplate{
			"one-gpu": tpl("one-gpu", 1, "gpu.example.com"), "two-gpus": tpl("two-gpus", 2, "gpu.example.com"), "fpga": tpl("fpga", 1, "fpga.example.com")},
	}
	read := func(worker string) *Object {
		o, ok := builtins.Of(decode(t, fmt.Sprintf(claimingPyTorchJob, worker)))
		if !ok {
			t.Fatal("Of: not a known kind")
		}
		return o
	}
	w := read("two-gpus").WorkloadIn("cq", 0, d)
	if w.Unresolved != "" {
		t.Fatalf("unresolved: %s", w.Unresolved)
	}
	if got := w.Total(); got["example.com/gpu"] != 1+3*2 || got[corev1.ResourceCPU] != 4000 {
		t.Errorf("total %v, want 7 example.com/gpu and 4 cpu", got)
	}
	for _, ps := range w.PodSets {
		want := flavors.Amount(1)
		if ps.Name == "worker" {
			want = 2
		}
		if ps.Requests["example.com/gpu"] != want {
			t.Errorf("pod set %s: %v per pod, want %d example.com/gpu", ps.Name, ps.Requests, want)
		}
	}
	for worker, want := range map[string]string{
		"missing": `spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "missing" not found; the workload waits until it exists`,
		"fpga": `spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims[0].resourceClaimTemplateName: ResourceClaimTemplate "fpga": spec.spec.devices.requests[0].exactly.deviceClassName: ` +
			`DeviceClass "fpga.example.com" is not mapped to a resource, so tally cannot charge its devices: add it to the deviceClassNames of a mapping in the Configuration document's resources.deviceClassMappings`,
	} {
		if got := read(worker).WorkloadIn("cq", 0, d).Unresolved; got != want {
			t.Errorf("worker template %s:\n got %s\nwant %s", worker, got, want)
		}
	}
}
