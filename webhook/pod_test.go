package webhook

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

func TestGuardPod(t *testing.T) {
	cfg, _, err := queues.Parse(queuestest.New().Flavor("default").
		ClusterQueue("q", "namespaceSelector: {}").Group("cpu").Quotas("default", "cpu=4").Bytes())
	if err != nil {
		t.Fatal(err)
	}
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{queues.LabelWorkload: queues.PodWorkload, "app": "x"},
				Annotations: map[string]string{queues.AnnotationUserAffinity: "{}"}},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: queues.SchedulingGate}},
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		sub    string
		change func(p *corev1.Pod)
		want   string // a part of the denial, "" for allowed
	}{
		{"a label of the user's own", "", func(p *corev1.Pod) { p.Labels["app"] = "y" }, ""},
		{"a finalizer", "", func(p *corev1.Pod) { p.Finalizers = []string{"x"} }, ""},
		{"tally's workload label", "", func(p *corev1.Pod) { p.Labels[queues.LabelWorkload] = "some-uid" }, "metadata.labels[tally.dev/workload]"},
		{"tally's workload label removed", "", func(p *corev1.Pod) { delete(p.Labels, queues.LabelWorkload) }, "metadata.labels[tally.dev/workload]"},
		{"tally's state label added", "", func(p *corev1.Pod) { p.Labels[queues.LabelState] = "admitted" }, "metadata.labels[tally.dev/state]"},
		{"Kueue's queue label", "", func(p *corev1.Pod) { p.Labels[queues.LabelKueueQueueName] = "other" }, "kueue.x-k8s.io/queue-name"},
		{"tally's annotation", "", func(p *corev1.Pod) { p.Annotations[queues.AnnotationUserAffinity] = "[]" }, "metadata.annotations[tally.dev/user-affinity]"},
		{"the gate removed", "", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }, "spec.schedulingGates[tally.dev/admission]"},
		{"another gate removed", "", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "x"}, {Name: queues.SchedulingGate}}
		}, ""},
		{"more CPU by resize", "resize", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}, "raising cpu from 1 to 2"},
		{"less CPU by resize", "resize", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		}, ""},
		{"more memory, not covered, by resize", "resize", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("2Gi")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			tc.change(cur)
			errs := strings.Join(GuardPod(old, cur, tc.sub, cfg), "; ")
			switch {
			case tc.want == "" && errs != "":
				t.Errorf("denied: %s", errs)
			case tc.want != "" && !strings.Contains(errs, tc.want):
				t.Errorf("denial %q does not name %q", errs, tc.want)
			}
		})
	}
}

// TestDeclaredKindScaleGuarded checks that the guard's rules cover the
// /scale subresource of a declared kind, which its CRD may declare.
func TestDeclaredKindScaleGuarded(t *testing.T) {
	declared := kinds.NewDeclared(queues.WorkloadKind{Name: "t", Group: "example.com", Version: "v1", Kind: "TrainJob",
		SuspendPath: []string{"spec", "suspend"},
		PodSets:     []queues.WorkloadKindPodSet{{Name: "worker", TemplatePath: []string{"spec", "template"}, CountPath: []string{"spec", "replicas"}}}}, "trainjobs")
	ks := kinds.NewRegistry()
	ks.Declare([]*kinds.Declared{declared})
	_, v := Configurations(ks, Endpoint{URL: "https://127.0.0.1:9443"}, "tally-system")
	found := false
	for _, w := range v.Webhooks {
		for _, r := range w.Rules {
			if slices.Contains(r.APIGroups, "example.com") {
				found = found || w.Name == "jobs.validate.tally.dev" && slices.Contains(r.Resources, "trainjobs/scale")
			}
		}
	}
	if !found {
		t.Error("the Job guard does not watch trainjobs/scale")
	}
}
