package ledger

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
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

// TestPodDefaultsHandedOutStayAsMade: pod defaults handed out are read
// outside the ledger's lock (the gate's judgement), so a later change of
// their namespace's ResourceClaimTemplates or of a RuntimeClass makes new
// ones and leaves those handed out as they were made.
func TestPodDefaultsHandedOutStayAsMade(t *testing.T) {
	in := newPodInputs()
	tmpl := func(name string) *resourcev1.ResourceClaimTemplate {
		return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}}
	}
	setNamed(in.claimTemplates, "a", "gpu", tmpl("gpu"), false)
	in.setOverhead("kata", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")})
	d := in.defaultsOf("a", nil)

	setNamed(in.claimTemplates, "a", "nic", tmpl("nic"), false)
	setNamed(in.claimTemplates, "a", "gpu", nil, true)
	in.namespaceChanged("a")
	in.setOverhead("gvisor", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})
	in.setOverhead("kata", nil)
	if len(d.ClaimTemplates) != 1 || d.ClaimTemplates["gpu"] == nil {
		t.Errorf("the handed-out defaults' templates changed to %v; want gpu alone", slices.Sorted(maps.Keys(d.ClaimTemplates)))
	}
	if len(d.Overhead) != 1 || d.Overhead["kata"] == nil {
		t.Errorf("the handed-out defaults' overheads changed to %v; want kata alone", slices.Sorted(maps.Keys(d.Overhead)))
	}
	now := in.defaultsOf("a", nil)
	if len(now.ClaimTemplates) != 1 || now.ClaimTemplates["nic"] == nil || len(now.Overhead) != 1 || now.Overhead["gvisor"] == nil {
		t.Errorf("the new defaults have templates %v and overheads %v; want nic and gvisor",
			slices.Sorted(maps.Keys(now.ClaimTemplates)), slices.Sorted(maps.Keys(now.Overhead)))
	}
}
