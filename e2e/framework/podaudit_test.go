package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// auditPod is a running pod of ns on a node that asks for gpus GPUs.
func auditPod(ns, name string, gpus int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// An excess in a namespace without tolerance is a violation at once; in
// one with, it is Brief when it ends within the tolerance, and a
// violation when it lasts longer, whether it has ended or not.
func TestPodAuditTolerate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newPodAudit(ResourceGPU, map[string]int64{"strict": 2, "brief": 2, "long": 2, "ongoing": 2})
	a.now = func() time.Time { return now }
	for _, ns := range []string{"brief", "long", "ongoing"} {
		a.Tolerate(ns, 5*time.Second)
	}
	for _, ns := range []string{"strict", "brief", "long", "ongoing"} {
		a.change(auditPod(ns, "a", 2), false)
		a.change(auditPod(ns, "b", 2), false)
	}
	now = now.Add(5 * time.Second)
	a.change(auditPod("brief", "b", 2), true)
	now = now.Add(time.Millisecond)
	a.change(auditPod("long", "b", 2), true)

	rep := a.Report()
	for ns, want := range map[string]bool{"strict": true, "brief": false, "long": true, "ongoing": true} {
		found := false
		for _, v := range rep.Violations {
			found = found || strings.Contains(v, "namespace "+ns+" ")
		}
		if found != want {
			t.Errorf("namespace %s: a violation %v, want %v (violations %q)", ns, found, want, rep.Violations)
		}
	}
	if len(rep.Brief) != 1 || !strings.Contains(rep.Brief[0], "namespace brief ") {
		t.Errorf("brief excesses %q, want the one of namespace brief", rep.Brief)
	}
	if rep.Max["brief"] != 4 {
		t.Errorf("the most namespace brief's pods asked for: %d, want 4", rep.Max["brief"])
	}
}
