package queuestest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

func TestConfig(t *testing.T) {
	got := queuestest.New().
		Flavor("default").
		Flavor("spot", "nodeLabels: {tier: spot}").
		Flavor("gpu").
		ClusterQueue("q", "cohort: ml", "namespaceSelector: {}").Group("cpu", "memory").
		Quotas("default", "cpu=4", "memory=8Gi").Quotas("spot", "cpu=1500m/500m/1", "memory=1Gi/-/1Gi").
		Group("nvidia.com/gpu").Quotas("gpu", "nvidia.com/gpu=2").
		LocalQueue("team", "default", "q").
		PriorityClass("high", 1000).String()
	want := `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {tier: spot}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  cohort: ml
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 8Gi}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 1500m, borrowingLimit: 500m, lendingLimit: 1}, {name: memory, nominalQuota: 1Gi, lendingLimit: 1Gi}]
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: default, namespace: team}
spec: {clusterQueue: q}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	if _, warnings, errs := queues.Parse([]byte(got)); len(errs)+len(warnings) > 0 {
		t.Errorf("the YAML does not parse cleanly: %v %v", errs, warnings)
	}
}
