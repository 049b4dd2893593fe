package ledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodInputs: a namespace's pod defaults are made once, made again
// after a change of that namespace (or of a RuntimeClass, for all), and
// each change counts; a PriorityClass event that changes nothing read is
// told apart.
func TestPodInputs(t *testing.T) {
	in := newPodInputs()
	a := in.defaultsOf("a", nil)
	if in.defaultsOf("a", nil) != a {
		t.Errorf("a namespace's defaults were made twice with no change")
	}
	b := in.defaultsOf("b", nil)
	setNamed(in.limitRanges, "a", "lr", &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}, false)
	in.namespaceChanged("a")
	if in.gen != 1 || in.defaultsOf("a", nil) == a || in.defaultsOf("b", nil) != b {
		t.Errorf("after a's LimitRange: gen %d; a made again %v, b kept %v", in.gen, in.defaultsOf("a", nil) != a, in.defaultsOf("b", nil) == b)
	}
	if got := in.defaultsOf("a", nil).Requests; len(got) == 0 {
		t.Errorf("a's defaults do not carry its LimitRange")
	}
	in.setOverhead("kata", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")})
	if in.gen != 2 || in.defaultsOf("b", nil) == b || in.defaultsOf("b", nil).Overhead["kata"] == nil {
		t.Errorf("after a RuntimeClass: gen %d, b not made again with its overhead", in.gen)
	}
	in.setOverhead("kata", nil)
	if _, ok := in.overheads["kata"]; ok || in.gen != 3 {
		t.Errorf("a RuntimeClass without overhead kept one, or did not count: gen %d", in.gen)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high", ResourceVersion: "1"}, Value: 100}
	if !in.setPriorityClass(pc, false) || in.priorities["high"] != 100 {
		t.Fatalf("a new PriorityClass: priorities %v", in.priorities)
	}
	pc.ResourceVersion = "2"
	if in.setPriorityClass(pc, false) {
		t.Errorf("a PriorityClass whose value and globalDefault did not change is a change")
	}
	pc.GlobalDefault = true
	if !in.setPriorityClass(pc, false) {
		t.Errorf("a PriorityClass that became the global default is no change")
	}
	if !in.setPriorityClass(pc, true) || len(in.priorities) != 0 {
		t.Errorf("a deleted PriorityClass is kept: %v", in.priorities)
	}
}
