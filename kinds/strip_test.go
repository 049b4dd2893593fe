package kinds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestStripJobTwice: stripping keeps a container's name, resources and
// restart policy only; stripping a stripped Job again changes nothing and
// keeps its containers, as a watched Job's spec taken from the store is.
func TestStripJobTwice(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	job := &batchv1.Job{}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep"}, Resources: res}}
	job.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "proxy", RestartPolicy: &always}}
	out, _ := StripJob(job)
	once := out.(*batchv1.Job).Spec.Template.Spec
	want := corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "main", Resources: res}},
		InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always}},
	}
	if diff := cmp.Diff(want, once); diff != "" {
		t.Fatalf("stripped spec (-want +got):\n%s", diff)
	}
	again := &batchv1.Job{}
	again.Spec = *out.(*batchv1.Job).Spec.DeepCopy()
	again.Spec.Template.Spec.Containers = once.Containers
	out2, _ := StripJob(again)
	twice := out2.(*batchv1.Job).Spec.Template.Spec
	if diff := cmp.Diff(want, twice); diff != "" {
		t.Errorf("stripped twice (-want +got):\n%s", diff)
	}
	if &twice.Containers[0] != &once.Containers[0] {
		t.Errorf("stripping stripped containers copied them")
	}
}
