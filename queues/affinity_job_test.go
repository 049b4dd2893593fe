package queues

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds/kindstest"
)

// zoneJob is a one-pod Job of namespace ns asking for one CPU, whose pods
// require the given node selector terms (none: no node affinity).
func zoneJob(name string, required ...corev1.NodeSelectorTerm) *batchv1.Job {
	job := kindstest.Job("ns", name).UID("uid-"+name).Request(corev1.ResourceCPU, "1").Obj()
	spec := &job.Spec.Template.Spec
	if len(required) > 0 {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: required}}}
	}
	return job
}

func zoneIn(zones ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: zones}}}
}

// TestJobAffinityChoosesFlavor: a Job whose pods require zone b gets the
// flavor of zone b, though its ClusterQueue lists zone a first, whether the
// webhook has yet to see it (the terms are the pod template's) or has
// queued it (the pod template requires the candidate flavors, and the
// Job's own terms are in the annotation).
func TestJobAffinityChoosesFlavor(t *testing.T) {
	cq := makeCQ("q").Group(cpu).Flavor("zone-a", "cpu=10").Flavor("zone-b", "cpu=10").Obj()
	cfg := makeConfig([]*flavors.Flavor{flavor("zone-a", "zone", "a"), flavor("zone-b", "zone", "b")}, cq)

	queued := func(user string, required ...corev1.NodeSelectorTerm) *batchv1.Job {
		j := zoneJob("queued", required...)
		j.Annotations = map[string]string{AnnotationUserAffinity: user}
		return j
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		want string
	}{
		{"a new Job requiring zone b", zoneJob("new", zoneIn("b")), "zone-b"},
		{"a new Job requiring zone a", zoneJob("new", zoneIn("a")), "zone-a"},
		{"a new Job requiring nothing", zoneJob("new"), "zone-a"},
		{"a queued Job whose own terms require zone b",
			queued(`[{"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]}]`, zoneIn("a"), zoneIn("b")), "zone-b"},
		{"a queued Job that required nothing, though its pods now require the candidates",
			queued("", zoneIn("b")), "zone-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := WorkloadFromJob(tc.job, "q", 0)
			a, v := NewSnapshot(cfg, nil, map[string]labels.Set{"ns": {}}).Assign(w)
			if v.Kind != Fits {
				t.Fatalf("verdict %+v, want it to fit", v)
			}
			if len(a.Flavors) != 1 || a.Flavors[0] != tc.want {
				t.Errorf("flavors %v, want [%s]", a.Flavors, tc.want)
			}
		})
	}
}
