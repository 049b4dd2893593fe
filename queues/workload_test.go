package queues

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/flavors"
)

// TestPodRequests: what one pod requests, in the cases read directly (one
// container) and in those that take the scheduler's rule (init
// containers, sidecars, overhead, pod-level resources, several
// containers), with resources requested at zero left out.
func TestPodRequests(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	container := func(kv ...string) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: list(kv...)}}
	}
	limited := func(reqs corev1.ResourceList, kv ...string) corev1.Container {
		return corev1.Container{Name: "l", Resources: corev1.ResourceRequirements{Requests: reqs, Limits: list(kv...)}}
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecarLimited := limited(nil, "cpu", "500m")
	sidecarLimited.RestartPolicy = &always
	sidecar := container("cpu", "1")
	sidecar.RestartPolicy = &always
	cases := map[string]struct {
		spec corev1.PodSpec
		want flavors.Resources
	}{
		"one container": {
			corev1.PodSpec{Containers: []corev1.Container{container("cpu", "1500m", "memory", "1Gi", "nvidia.com/gpu", "2")}},
			flavors.Resources{"cpu": 1500, "memory": 1 << 30, "nvidia.com/gpu": 2}},
		"one container, a zero request left out": {
			corev1.PodSpec{Containers: []corev1.Container{container("cpu", "1", "memory", "0")}},
			flavors.Resources{"cpu": 1000}},
		"one container, rounded up to a millicore": {
			corev1.PodSpec{Containers: []corev1.Container{container("cpu", "0.0005")}},
			flavors.Resources{"cpu": 1}},
		"one container, no requests": {
			corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			flavors.Resources{}},
		"two containers, summed before rounding": {
			corev1.PodSpec{Containers: []corev1.Container{container("cpu", "0.0005"), container("cpu", "0.0005", "memory", "1Mi")}},
			flavors.Resources{"cpu": 1, "memory": 1 << 20}},
		"an init container larger than the containers": {
			corev1.PodSpec{InitContainers: []corev1.Container{container("cpu", "4")}, Containers: []corev1.Container{container("cpu", "1", "memory", "1Gi")}},
			flavors.Resources{"cpu": 4000, "memory": 1 << 30}},
		"a sidecar adds to the containers": {
			corev1.PodSpec{InitContainers: []corev1.Container{sidecar}, Containers: []corev1.Container{container("cpu", "1")}},
			flavors.Resources{"cpu": 2000}},
		"overhead adds": {
			corev1.PodSpec{Overhead: list("cpu", "250m"), Containers: []corev1.Container{container("cpu", "1")}},
			flavors.Resources{"cpu": 1250}},
		"pod-level requests take the place of the containers'": {
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: list("cpu", "3")}, Containers: []corev1.Container{container("cpu", "1", "memory", "1Gi")}},
			flavors.Resources{"cpu": 3000, "memory": 1 << 30}},
		"one container, limits only": {
			corev1.PodSpec{Containers: []corev1.Container{limited(nil, "nvidia.com/gpu", "8", "cpu", "2")}},
			flavors.Resources{"cpu": 2000, "nvidia.com/gpu": 8}},
		"one container, a request wins over its limit": {
			corev1.PodSpec{Containers: []corev1.Container{limited(list("cpu", "1"), "cpu", "2", "nvidia.com/gpu", "1")}},
			flavors.Resources{"cpu": 1000, "nvidia.com/gpu": 1}},
		"two containers, one with limits only": {
			corev1.PodSpec{Containers: []corev1.Container{container("cpu", "1"), limited(nil, "nvidia.com/gpu", "2")}},
			flavors.Resources{"cpu": 1000, "nvidia.com/gpu": 2}},
		"an init container with limits only, larger than the containers": {
			corev1.PodSpec{InitContainers: []corev1.Container{limited(nil, "cpu", "4")}, Containers: []corev1.Container{container("cpu", "1")}},
			flavors.Resources{"cpu": 4000}},
		"a sidecar with limits only adds to the containers": {
			corev1.PodSpec{InitContainers: []corev1.Container{sidecarLimited}, Containers: []corev1.Container{limited(nil, "nvidia.com/gpu", "1")}},
			flavors.Resources{"cpu": 500, "nvidia.com/gpu": 1}},
		"pod-level limits only take the place of the containers'": {
			corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: list("cpu", "3")}, Containers: []corev1.Container{container("cpu", "1")}},
			flavors.Resources{"cpu": 3000}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := c.spec.DeepCopy()
			if got := PodRequests(&c.spec); !maps.Equal(got, c.want) {
				t.Errorf("PodRequests = %v, want %v", got, c.want)
			}
			if !equality.Semantic.DeepEqual(before, &c.spec) {
				t.Errorf("PodRequests changed the spec: %v, was %v", c.spec, before)
			}
		})
	}
}

// TestStartCount: a Workload's pods are charged whole; it starts those
// its pod sets do not leave to an autoscaler, never more than a pod set
// holds nor fewer than none, and a copy at a larger pod size starts the
// same.
func TestStartCount(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}
	w := NewWorkload(&metav1.ObjectMeta{Namespace: "ns", Name: "w"}, "ray.io/v1", "RayJob", []PodTemplate{
		{Name: "head", Count: 1, Spec: spec},
		{Name: "workers", Count: 4, Autoscaled: 3, Spec: spec},
		{Name: "over", Count: 2, Autoscaled: 5, Spec: spec},
		{Name: "under", Count: 2, Autoscaled: -1, Spec: spec},
	}, "q", 0)
	if w.PodCount() != 9 || w.StartCount() != 4 {
		t.Errorf("%d pods, starting %d; want 9, starting 4 (1 + 1 + 0 + 2)", w.PodCount(), w.StartCount())
	}
	if got := w.Total()[corev1.ResourceCPU]; got != flavors.FromQuantity(corev1.ResourceCPU, resource.MustParse("9")) {
		t.Errorf("charged %v cpu, want 9: the autoscaled pods count", got)
	}
	big := w.WithPodOverhead(flavors.Resources{corev1.ResourceCPU: flavors.FromQuantity(corev1.ResourceCPU, resource.MustParse("1"))})
	if big.PodCount() != 9 || big.StartCount() != 4 {
		t.Errorf("with overhead: %d pods, starting %d; want 9, starting 4", big.PodCount(), big.StartCount())
	}
}
