package perf

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/e2e/perf/scenario"
)

func TestCreationExpression(t *testing.T) {
	before := newJob(&scenario.Job{Namespace: "ns", Name: "j", CPUMilli: 1}, scenario.Class{Name: "small"})
	after := before.DeepCopy()
	after.Spec.Suspend = ptr.To(true)
	after.Labels[labelState] = statePending
	after.Labels[labelQueue] = "cq-1"
	after.Annotations = map[string]string{"tally.dev/note": "x"}
	got, err := creationExpression(before, after, "cq-1")
	if err != nil {
		t.Fatal(err)
	}
	want := `Object{metadata: Object.metadata{labels: {"tally.dev/cluster-queue": namespaceObject.metadata.annotations["tally.dev/cluster-queue"], "tally.dev/state": "pending"}, annotations: {"tally.dev/note": "x"}}, spec: Object.spec{suspend: true}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	affinity := after.DeepCopy()
	affinity.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	if _, err := creationExpression(before, affinity, "cq-1"); err == nil || !strings.Contains(err.Error(), "pod templates") {
		t.Fatalf("a changed pod template: got error %v", err)
	}
	removed := after.DeepCopy()
	delete(removed.Labels, labelPriorityClass)
	if _, err := creationExpression(before, removed, "cq-1"); err == nil || !strings.Contains(err.Error(), labelPriorityClass) {
		t.Fatalf("a removed label: got error %v", err)
	}
}
