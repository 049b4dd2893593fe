package inspect

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/queues"
)

// tally status charges an admitted Job for the devices its pods claim
// through a template, as the ledger does.
func TestStatusChargesClaims(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(`
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: dra}
spec:
  resourceGroups:
  - coveredResources: [cpu, example.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: cpu, nominalQuota: 8}, {name: example.com/gpu, nominalQuota: 4}]
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  deviceClassMappings:
  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	j := statusJob("train", "dra", "1", "admitted", false, "main=gpu")
	j.Spec.Parallelism = ptr.To[int32](2)
	j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("two")}}
	tpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two"}}
	tpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 2}}}
	gpus := queues.FlavorResource{Flavor: "gpu", Resource: "example.com/gpu"}
	jobs := objects([]batchv1.Job{j})
	if got := Status(cfg, jobs, ClaimTemplates{"ns": {"two": tpl}})[0].Usage[gpus]; got != 4 {
		t.Errorf("the Job's 2 pods of 2 devices each: %d example.com/gpu in use, want 4", got)
	}
	if got := Status(cfg, jobs, nil)[0].Usage[gpus]; got != 0 {
		t.Errorf("without its template: %d example.com/gpu in use, want 0", got)
	}
}
