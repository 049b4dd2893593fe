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
	got, patch, err := creationExpression(before, after, "cq-1")
	if err != nil || patch != "" {
		t.Fatalf("got patch %q, error %v", patch, err)
	}
	want := `Object{metadata: Object.metadata{labels: {"tally.dev/cluster-queue": namespaceObject.metadata.annotations["tally.dev/cluster-queue"], "tally.dev/state": "pending"}, annotations: {"tally.dev/note": "x"}}, spec: Object.spec{suspend: true}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	flavored := after.DeepCopy()
	flavored.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	flavored.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tally.dev/bench", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}},
	}}}
	apply, patch, err := creationExpression(before, flavored, "cq-1")
	if err != nil || apply != want {
		t.Fatalf("got %s, %v", apply, err)
	}
	const terms = "Object.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	wantPatch := `[JSONPatch{op: "add", path: "/spec/template/spec/affinity", value: ` +
		`Object.spec.template.spec.affinity{nodeAffinity: Object.spec.template.spec.affinity.nodeAffinity{` +
		`requiredDuringSchedulingIgnoredDuringExecution: Object.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution{` +
		`nodeSelectorTerms: [` + terms + `{matchExpressions: [` + terms + `.matchExpressions{key: "tally.dev/bench", operator: "In", values: ["true"]}]}]}}}}, ` +
		`JSONPatch{op: "add", path: "/spec/template/spec/tolerations", value: [Object.spec.template.spec.tolerations{key: "gpu", operator: "Exists"}]}]`
	if patch != wantPatch {
		t.Fatalf("got  %s\nwant %s", patch, wantPatch)
	}

	// The API server's defaults are no change of the webhook's.
	defaulted := after.DeepCopy()
	defaulted.Spec.Template.Spec.SchedulerName = "default-scheduler"
	defaulted.Spec.Template.Labels = map[string]string{"batch.kubernetes.io/job-name": "j"}
	if got, patch, err := creationExpression(before, defaulted, "cq-1"); err != nil || got != want || patch != "" {
		t.Fatalf("with the API server's defaults: got %s, %q, %v", got, patch, err)
	}
	selector := before.DeepCopy()
	selector.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
	if _, _, err := creationExpression(selector, after, "cq-1"); err == nil || !strings.Contains(err.Error(), "nodeSelector") {
		t.Fatalf("a cleared nodeSelector: got error %v", err)
	}
	removed := after.DeepCopy()
	delete(removed.Labels, labelPriorityClass)
	if _, _, err := creationExpression(before, removed, "cq-1"); err == nil || !strings.Contains(err.Error(), labelPriorityClass) {
		t.Fatalf("a removed label: got error %v", err)
	}
}
