package e2e

import "testing"

// A tree of cohorts: root cohort e2e-tree-org holds 2 GPUs of its own;
// below it, cohort e2e-tree-ml holds ClusterQueue e2e-tree-a (1 GPU) and
// cohort e2e-tree-infra holds e2e-tree-b (3 GPUs). 6 GPUs in all.
const cohortTreeDocs = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: e2e-tree-org
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: e2e-tree-ml
spec:
  parentName: e2e-tree-org
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: e2e-tree-infra
spec:
  parentName: e2e-tree-org
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: e2e-tree-a
spec:
  cohortName: e2e-tree-ml
  namespaceSelector: {}
  preemption:
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: e2e-tree-b
spec:
  cohortName: e2e-tree-infra
  namespaceSelector: {}
  preemption:
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: memory, nominalQuota: 128Gi}
      - {name: nvidia.com/gpu, nominalQuota: 3}
`

// ClusterQueue a (1 GPU, alone in cohort ml) borrows through the tree:
// five 1-GPU Jobs run, beyond its own quota and its cohort's, on the
// root's own 2 GPUs and b's idle 3. A Job of b, in the other subtree,
// asking for its nominal 3 GPUs arrives: tally reclaims, preempting
// exactly two of a's Jobs (the 6-GPU tree has 1 free), and says so in
// Events, naming the root, the lowest cohort both queues share. Read
// from the pods, the tree never runs more than 6 GPUs; every Job
// finishes.
func TestCohortTree(t *testing.T) {
	reclaimAcross(t, reclaimRun{
		docs: cohortTreeDocs, cohort: "e2e-tree-org", lender: "e2e-tree-b", borrower: "e2e-tree-a",
		borrowers: 5, victims: 2, running: 3,
		why: "b needs 3 GPUs, the tree of 6 has 1 free", runningWhy: "its nominal 1 plus 2 still borrowed",
	})
}
