package framework

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

// allocated is a ResourceClaim of ns with devices devices allocated.
func allocated(ns, name string, devices int) *resourcev1.ResourceClaim {
	rc := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if devices > 0 {
		rc.Status.Allocation = &resourcev1.AllocationResult{}
		for i := range devices {
			rc.Status.Allocation.Devices.Results = append(rc.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: "p", Device: fmt.Sprint("gpu-", i)})
		}
	}
	return rc
}

// A live pod holds the devices allocated to its claims, a claim shared
// by pods once; the claim made for an extended resource is not counted
// beside the request.
func TestPodAuditClaims(t *testing.T) {
	a := newPodAudit(ResourceGPU, map[string]int64{"ns": 3})
	a.devices = map[string]int64{}
	setClaim := func(rc *resourcev1.ResourceClaim) {
		if n := ClaimDevices(rc); n > 0 {
			a.devices[rc.Namespace+"/"+rc.Name] = n
		} else {
			delete(a.devices, rc.Namespace+"/"+rc.Name)
		}
		a.judge(rc.Namespace)
	}
	fromTemplate := auditPod("ns", "templated", 0)
	fromTemplate.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("templated-gpu")}}
	setClaim(allocated("ns", "templated-gpu", 0))
	a.change(fromTemplate, false)
	setClaim(allocated("ns", "templated-gpu", 2))
	if got := a.Report().Max["ns"]; got != 2 {
		t.Fatalf("a pod whose claim got 2 devices after it was bound: %d, want 2", got)
	}
	for _, name := range []string{"share-a", "share-b"} {
		p := auditPod("ns", name, 0)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}}
		a.change(p, false)
	}
	setClaim(allocated("ns", "shared", 1))
	ext := auditPod("ns", "ext", 0)
	ext.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext-claim"}
	setClaim(allocated("ns", "ext-claim", 1))
	a.change(ext, false)
	if rep := a.Report(); rep.Max["ns"] != 3 || len(rep.Violations) != 0 {
		t.Fatalf("2 devices, a shared claim's 1 and a claim for an extended resource: %d (violations %q), want 3 and none", rep.Max["ns"], rep.Violations)
	}
	a.change(auditPod("ns", "ext", 1), false)
	if rep := a.Report(); len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0], "ask for 4") {
		t.Errorf("the extended resource's request beside 3 devices: violations %q, want one of 4", rep.Violations)
	}
}
