package inspect

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

const statusConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  cohort: ml
  fairSharing: {weight: 2}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4}]
    - name: spot
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: b}
spec:
  cohort: ml
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: solo}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 1}]
`

// statusJob is a Job of queue q asking for cpu, in state (its label),
// suspended or not, with flavors as its tally.dev/flavors annotation.
func statusJob(name, q, cpu, state string, suspended bool, flavors string) batchv1.Job {
	j := batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name,
			Labels:      map[string]string{queues.LabelQueue: q, queues.LabelState: state},
			Annotations: map[string]string{},
		},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(suspended),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}}},
		},
	}
	if flavors != "" {
		j.Annotations[queues.AnnotationFlavors] = flavors
	}
	return j
}

func TestStatus(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(statusConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	finished := statusJob("done", "a", "3", "finished", false, "main=on-demand")
	finished.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	// With --finished-label=off a finished Job keeps its admitted label:
	// its condition says it finished, and it counts nowhere either.
	finishedUnlabelled := statusJob("done-unlabelled", "a", "3", "admitted", false, "main=on-demand")
	finishedUnlabelled.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	stopping := statusJob("stopping", "b", "2", "pending", true, "main=on-demand")
	stopping.Status.Active = 1
	unlabelled := statusJob("unrecorded", "a", "5", "", false, "")
	jobs := []batchv1.Job{
		statusJob("a1", "a", "3", "admitted", false, "main=on-demand"),
		statusJob("a2", "a", "3", "admitted", false, "main=on-demand"),
		statusJob("a3", "a", "1", "admitted", false, "main=spot"),
		statusJob("a-wait", "a", "1", "pending", true, ""),
		statusJob("a-never", "a", "100", "inadmissible", true, ""),
		finished, finishedUnlabelled, stopping, unlabelled,
		// A running Job without the annotation is charged to the first
		// candidate flavor, as the ledger charges it.
		statusJob("b-late", "b", "1", "admitted", false, ""),
		statusJob("ghost", "gone", "1", "pending", true, ""),
	}
	st := Status(cfg, objects(jobs), nil)
	var names []string
	for _, s := range st {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "a,b,solo,gone" {
		t.Fatalf("queues %s, want a,b,solo,gone (config order, then unknown)", got)
	}
	onDemand := queues.FlavorResource{Flavor: "on-demand", Resource: corev1.ResourceCPU}
	spot := queues.FlavorResource{Flavor: "spot", Resource: corev1.ResourceCPU}
	a, b, solo, gone := st[0], st[1], st[2], st[3]
	checks := []struct {
		what      string
		got, want any
	}{
		{"a admitted", a.Admitted, 3}, {"a pending", a.Pending, 1}, {"a inadmissible", a.Inadmissible, 1},
		{"a on-demand", a.Usage[onDemand].Format(corev1.ResourceCPU), "6"},
		{"a spot", a.Usage[spot].Format(corev1.ResourceCPU), "1"},
		{"a fair", a.FairSharing, true},
		// a borrows 2 cpu of on-demand; the cohort can lend 4+8 on-demand
		// and 2 spot cpu: 1000*2/14 = 142.86, over weight 2 -> 72.
		{"a share", a.Share, int64(72)},
		{"b admitted", b.Admitted, 1}, {"b pending", b.Pending, 1},
		{"b on-demand", b.Usage[onDemand].Format(corev1.ResourceCPU), "3"},
		{"b share", b.Share, int64(0)},
		{"solo", solo.Admitted + solo.Pending + len(solo.Usage), 0},
		{"solo fair", solo.FairSharing, false},
		{"gone known", gone.Known, false}, {"gone pending", gone.Pending, 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}

	var out strings.Builder
	if err := WriteStatus(&out, cfg, st); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CLUSTERQUEUE  COHORT           PENDING  ADMITTED  INADMISSIBLE  FLAVOR     RESOURCE  USAGE  NOMINAL  BORROWING  SHARE",
		"a             ml               1        3         1             on-demand  cpu       6      4        2          72",
		"                                                                spot       cpu       1      2        0",
		"b             ml               1        1         0             on-demand  cpu       3      8        0          0",
		"solo          -                0        0         0             on-demand  cpu       0      1        0",
		"gone          (not in config)  1        0         0             -          -         -",
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

// TestStatusEvicting: a suspended Job holds its quota while its pods may
// still run, as the ledger's fold has it: pods active, or started and not
// yet marked stopped by its controller.
func TestStatusEvicting(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte(statusConfig))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	started := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*batchv1.Job)
		usage  string
	}{
		{"pods active", func(j *batchv1.Job) { j.Status.Active = 2 }, "2"},
		{"started, not marked stopped", func(j *batchv1.Job) { j.Status.StartTime = &started }, "2"},
		{"marked stopped", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, LastTransitionTime: started}}
		}, "0"},
		{"stopped, never started", func(*batchv1.Job) {}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, label := range []string{"pending", "admitted"} {
				j := statusJob("victim", "b", "2", label, true, "main=on-demand")
				tc.change(&j)
				b := Status(cfg, objects([]batchv1.Job{j}), nil)[1]
				got := b.Usage[queues.FlavorResource{Flavor: "on-demand", Resource: corev1.ResourceCPU}].Format(corev1.ResourceCPU)
				if b.Name != "b" || b.Pending != 1 || b.Admitted != 0 || got != tc.usage {
					t.Errorf("labelled %s: %s pending %d, admitted %d, using %s cpu; want b pending 1, admitted 0, using %s", label, b.Name, b.Pending, b.Admitted, got, tc.usage)
				}
			}
		})
	}
}

// objects reads Jobs as the ledger's informer delivers them.
func objects(jobs []batchv1.Job) []*kinds.Object {
	out := make([]*kinds.Object, len(jobs))
	for i := range jobs {
		out[i], _ = kinds.NewRegistry().Of(&jobs[i])
	}
	return out
}
