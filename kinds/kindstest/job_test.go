package kindstest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/kinds/kindstest"
)

// TestJob: a builder sets only what it is told, and the container
// options share one container "c".
func TestJob(t *testing.T) {
	if diff := cmp.Diff(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}, kindstest.Job("ns", "j").Obj()); diff != "" {
		t.Errorf("a bare Job (-want +got):\n%s", diff)
	}
	got := kindstest.Job("ns", "j").Image("busybox").Request(corev1.ResourceCPU, "1").Request(corev1.ResourceMemory, "1Gi").Obj()
	want := []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	if diff := cmp.Diff(want, got.Spec.Template.Spec.Containers); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
}
