package webhook

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// A pod of an admitted workload is denied when a template it names is
// not the one the workload was charged from.
func TestReplacedTemplate(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train",
		Annotations: map[string]string{queues.AnnotationClaimTemplates: "gpu=u1"}}}
	root, err := kinds.Job{}.Read(job)
	if err != nil {
		t.Fatal(err)
	}
	tpl := func(uid types.UID) map[string]*resourcev1.ResourceClaimTemplate {
		return map[string]*resourcev1.ResourceClaimTemplate{"gpu": {ObjectMeta: metav1.ObjectMeta{Name: "gpu", UID: uid}},
			"other": {ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "o1"}}}
	}
	pod := func(names ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}
		for _, n := range names {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: n, ResourceClaimTemplateName: ptr.To(n)})
		}
		return p
	}
	for name, tc := range map[string]struct {
		templates map[string]*resourcev1.ResourceClaimTemplate
		pod       *corev1.Pod
		denied    bool
	}{
		"the template charged":  {templates: tpl("u1"), pod: pod("gpu")},
		"a template made again": {templates: tpl("u2"), pod: pod("gpu"), denied: true},
		"a template deleted":    {templates: nil, pod: pod("gpu"), denied: true},
		"no claims":             {templates: tpl("u2"), pod: pod()},
		"a template the workload was not charged from": {templates: tpl("u1"), pod: pod("other")},
	} {
		t.Run(name, func(t *testing.T) {
			got := replacedTemplate(root, &queues.PodDefaults{ClaimTemplates: tc.templates}, tc.pod)
			if (got != "") != tc.denied {
				t.Fatalf("denial %q, want one: %v", got, tc.denied)
			}
			if tc.denied && !strings.Contains(got, "spec.resourceClaims: ResourceClaimTemplate ns/gpu is not the one Job ns/train was admitted with") {
				t.Errorf("denial %q does not say which template and workload", got)
			}
		})
	}
}
