package queues

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"tally.dev/tally/flavors"
)

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestLimitRangeRequests(t *testing.T) {
	lr := func(name string, items ...corev1.LimitRangeItem) *corev1.LimitRange {
		return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.LimitRangeSpec{Limits: items}}
	}
	got := LimitRangeRequests([]*corev1.LimitRange{
		lr("b", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, DefaultRequest: list("cpu", "2", "nvidia.com/gpu", "1")}),
		lr("a", corev1.LimitRangeItem{Type: corev1.LimitTypePod, DefaultRequest: list("memory", "9Gi")},
			corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, DefaultRequest: list("cpu", "500m")}),
	})
	want := list("cpu", "500m", "nvidia.com/gpu", "1")
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("LimitRangeRequests = %v, want %v: the first by name wins, and only type Container counts", got, want)
	}
	if got := LimitRangeRequests(nil); got != nil {
		t.Errorf("no LimitRanges: %v, want nil", got)
	}
}

// TestPodDefaultsApply: what a pod of a template requests once the API
// server has added the LimitRange defaults and the RuntimeClass overhead.
func TestPodDefaultsApply(t *testing.T) {
	d := &PodDefaults{Requests: list("cpu", "1", "nvidia.com/gpu", "1"), Overhead: map[string]corev1.ResourceList{"kata": list("cpu", "250m")}}
	container := func(reqs, limits corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs, Limits: limits}}
	}
	cases := map[string]struct {
		d    *PodDefaults
		spec corev1.PodSpec
		want flavors.Resources
		same bool // Apply returns spec itself
	}{
		"no defaults": {nil, corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, flavors.Resources{}, true},
		"a container that asks nothing gets every default": {d,
			corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, flavors.Resources{"cpu": 1000, "nvidia.com/gpu": 1}, false},
		"a request wins over the default": {d,
			corev1.PodSpec{Containers: []corev1.Container{container(list("cpu", "3"), nil)}}, flavors.Resources{"cpu": 3000, "nvidia.com/gpu": 1}, false},
		"a limit stands for the request, not the default": {d,
			corev1.PodSpec{Containers: []corev1.Container{container(nil, list("nvidia.com/gpu", "4"))}}, flavors.Resources{"cpu": 1000, "nvidia.com/gpu": 4}, false},
		"nothing missing": {d,
			corev1.PodSpec{Containers: []corev1.Container{container(list("cpu", "2", "nvidia.com/gpu", "2"), nil)}}, flavors.Resources{"cpu": 2000, "nvidia.com/gpu": 2}, true},
		"init containers get defaults too": {d,
			corev1.PodSpec{InitContainers: []corev1.Container{container(list("cpu", "5"), nil)}, Containers: []corev1.Container{container(list("nvidia.com/gpu", "1"), nil)}},
			flavors.Resources{"cpu": 5000, "nvidia.com/gpu": 1}, false},
		"a RuntimeClass's overhead": {&PodDefaults{Overhead: d.Overhead},
			corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Containers: []corev1.Container{container(list("cpu", "1"), nil)}}, flavors.Resources{"cpu": 1250}, false},
		"an overhead set already is kept": {&PodDefaults{Overhead: d.Overhead},
			corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Overhead: list("cpu", "100m"), Containers: []corev1.Container{container(list("cpu", "1"), nil)}},
			flavors.Resources{"cpu": 1100}, true},
		"an unknown RuntimeClass adds nothing": {&PodDefaults{Overhead: d.Overhead},
			corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{container(list("cpu", "1"), nil)}}, flavors.Resources{"cpu": 1000}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := c.spec.DeepCopy()
			got := c.d.Apply(&c.spec)
			if (got == &c.spec) != c.same {
				t.Errorf("Apply returned the spec itself: %v, want %v", got == &c.spec, c.same)
			}
			if r := PodRequests(got); !maps.Equal(r, c.want) {
				t.Errorf("requests %v, want %v", r, c.want)
			}
			if !equality.Semantic.DeepEqual(before, &c.spec) {
				t.Errorf("Apply changed the spec: %v, was %v", c.spec, before)
			}
		})
	}
}
