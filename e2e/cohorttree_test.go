package e2e

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
)

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
// Events. Read from the pods, the tree never runs more than 6 GPUs; every
// Job finishes.
func TestCohortTree(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const nsA, nsB, qA, qB, root = "e2e-tree-a", "e2e-tree-b", "e2e-tree-a", "e2e-tree-b", "e2e-tree-org"
	useQueues(ctx, t, s, []string{qA, qB}, cohortTreeDocs)
	for ns, q := range map[string]string{nsA: qA, nsB: qB} {
		if err := framework.BindNamespace(ctx, s.client, ns, q); err != nil {
			t.Fatalf("binding namespace %s: %v", ns, err)
		}
	}
	recA, _ := observe(ctx, t, s, nsA)
	recB, _ := observe(ctx, t, s, nsB)
	usage := watchUsage(ctx, t, s, map[string]string{nsA: qA, nsB: qB}, []framework.UsageLimit{
		{Name: "ClusterQueue " + qA, Queues: []string{qA}, Max: 6},
		{Name: "ClusterQueue " + qB, Queues: []string{qB}, Max: 6},
		{Name: "cohort tree " + root, Queues: []string{qA, qB}, Max: 6},
	})

	var borrowers []*batchv1.Job
	for i := range 5 {
		borrowers = append(borrowers, framework.NewJob(nsA, fmt.Sprintf("borrow-%d", i)).GPUs(1).Runtime(25*time.Second).Obj())
	}
	if err := framework.CreateJobs(ctx, s.client, borrowers...); err != nil {
		t.Fatal(err)
	}
	waitRunning(ctx, t, s.client, nsA, names(borrowers), time.Minute)

	reclaimer := framework.NewJob(nsB, "reclaimer").Parallelism(3).GPUs(1).Runtime(5 * time.Second).Obj()
	if err := framework.CreateJobs(ctx, s.client, reclaimer); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitAdmitted(ctx, t, s.client, reclaimer, time.Minute)
	t.Logf("reclaimer admitted %s after its creation", time.Since(start).Round(time.Millisecond))

	if v := resuspended(recB); len(v) > 0 {
		t.Errorf("Jobs of %s suspended again: %v", nsB, slices.Sorted(maps.Keys(v)))
	}
	victims := resuspended(recA)
	if len(victims) != 2 {
		t.Fatalf("Jobs of %s suspended again when the reclaimer was admitted: %v; want exactly 2 (b needs 3 GPUs, the tree of 6 has 1 free)",
			nsA, slices.Sorted(maps.Keys(victims)))
	}
	jobs, err := framework.ListJobs(ctx, s.client, nsA)
	if err != nil {
		t.Fatal(err)
	}
	var running int64
	for i := range jobs {
		j := &jobs[i]
		if _, ok := victims[j.Name]; ok {
			if pods, err := framework.JobPods(ctx, s.client, j); err != nil {
				t.Fatal(err)
			} else if len(pods) > 0 {
				t.Errorf("victim %s still has %d pods after the reclaimer was admitted", j.Name, len(pods))
			}
			continue
		}
		if j.Labels[framework.LabelState] == framework.StateAdmitted && !framework.Finished(j) {
			running += framework.GPUsOf(j)
		}
	}
	if running != 3 {
		t.Errorf("ClusterQueue %s runs %d GPUs after the reclaim, want 3 (its nominal 1 plus 2 still borrowed)", qA, running)
	}

	prios := map[string]int32{}
	for _, j := range borrowers {
		prios[j.Name] = 0
	}
	checkPreemptionEvents(ctx, t, s.client, nsA, nsB+"/"+reclaimer.Name, 0, victims, prios, "to reclaim quota lent to cohort "+root)

	waitFinishedAndLabelled(ctx, t, s.client, nsB, 1, 3*time.Minute)
	waitFinishedAndLabelled(ctx, t, s.client, nsA, len(borrowers), 3*time.Minute)
	checkCompleted(ctx, t, s.client, nsB, 1)
	checkCompleted(ctx, t, s.client, nsA, len(borrowers))
	checkHistories(t, recB, nil)
	checkHistories(t, recA, victims)
	rep := usage.Stop()
	checkUsage(t, rep, "cohort tree "+root, 6, 6)
	if rep.MaxPods["ClusterQueue "+qA] < 5 {
		t.Errorf("ClusterQueue %s never borrowed through the tree: at most %d GPUs in pods", qA, rep.MaxPods["ClusterQueue "+qA])
	}
}
