package inspect

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/queues"
)

// treeConfig is a tree of cohorts: org holds 2 cpu of its own; below it,
// cohort ml holds a (2 cpu) and b (none), and cohort infra holds c (4
// cpu), lending at most 3 of them up.
const treeConfig = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: ml}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: infra}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0, lendingLimit: 3}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  cohortName: ml
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: b}
spec:
  cohortName: ml
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 0}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: c}
spec:
  cohortName: infra
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
`

func TestStatusCohortTree(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(treeConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	jobs := []batchv1.Job{
		statusJob("b1", "b", "5", "admitted", false, "main=default"),
		statusJob("c1", "c", "1", "admitted", false, "main=default"),
	}
	var out strings.Builder
	if err := WriteStatus(&out, cfg, Status(cfg, objects(jobs), nil)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CLUSTERQUEUE  COHORT  PENDING  ADMITTED  INADMISSIBLE  FLAVOR   RESOURCE  USAGE  NOMINAL  BORROWING",
		"a             ml      0        0         0             default  cpu       0      2        0",
		"b             ml      0        1         0             default  cpu       5      0        5",
		"c             infra   0        1         0             default  cpu       1      4        0",
		"",
		"COHORT   PARENT  FLAVOR   RESOURCE  OWN QUOTA  SUBTREE QUOTA  SUBTREE USAGE",
		"org      -       default  cpu       2          7              6",
		"  infra  org     default  cpu       0          4              1",
		"  ml     org     default  cpu       -          2              5",
	}
	got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = strings.TrimRight(got[i], " ")
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, g, w)
		}
	}
}
