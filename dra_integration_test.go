package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// draClass is the DeviceClass the test config maps to draResource.
const (
	draClass    = "gpu.example.com"
	draResource = "example.com/gpu"
)

// claimTemplate is a ResourceClaimTemplate of ns whose claims ask for
// count devices of DeviceClass class.
func claimTemplate(ns, name, class string, count int64) *resourcev1.ResourceClaimTemplate {
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	t.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}}
	return t
}

// claimingJob is a Job of pods pods, each asking for 100m CPU and a claim
// made from template.
func claimingJob(ns, name, template string, pods int32) *batchv1.Job {
	job := newJob(ns, name, "100m")
	job.Spec.Parallelism, job.Spec.Completions = ptr.To(pods), ptr.To(pods)
	spec := &job.Spec.Template.Spec
	spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
	spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return job
}

func suspended(t *testing.T, ns, name string) bool {
	return ptr.Deref(getJob(t, ns, name).Spec.Suspend, false)
}

// TestIntegrationClaims: Jobs whose pods claim devices through
// ResourceClaimTemplates are charged the devices, as the mapped
// resource, within the queue's quota; one whose template does not exist
// yet waits until it does; one whose claims tally cannot charge (a class
// no mapping names, a claim named directly) is inadmissible, with why.
func TestIntegrationClaims(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "dra"
	bindManaged(t, ns, "dra") // 4 example.com/gpu
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(claimingJob(ns, "first", "two-gpus", 2))
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "first", "Inadmissible", `ResourceClaimTemplate "two-gpus" not found`)
	})
	if !suspended(t, ns, "first") {
		t.Fatal("Job first runs before its ResourceClaimTemplate exists")
	}
	two := claimTemplate(ns, "two-gpus", draClass, 2)
	create(two)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "first"), "Job first (2 pods of 2 GPUs, in a queue of 4) not admitted once its template exists"
	})
	// Inadmissible at its creation, it was narrowed to its queue's
	// flavors all the same: its pods tolerate the GPU nodes' taint.
	if tol := getJob(t, ns, "first").Spec.Template.Spec.Tolerations; !slices.ContainsFunc(tol, func(t corev1.Toleration) bool { return t.Key == "gpu" }) {
		t.Errorf("Job first, admitted in flavor gpu, does not tolerate its taint: tolerations %v", tol)
	}
	if got, want := getJob(t, ns, "first").Annotations[queues.AnnotationClaimTemplates], "two-gpus="+string(two.UID); got != want {
		t.Errorf("Job first records the templates it was charged from as %q, want %q", got, want)
	}
	// A running Job's template stays as it was charged.
	err := k8s.Delete(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-gpus"}})
	if want := "ResourceClaimTemplate dra/two-gpus is in use by Job dra/first"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("deleting the template of running Job first: %v, want a denial saying %q", err, want)
	}

	// The queue's 4 GPUs are taken: a Job of one more waits for them.
	create(claimTemplate(ns, "one-gpu", draClass, 1), claimingJob(ns, "second", "one-gpu", 1))
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "second", "Pending", draResource)
	})
	if !suspended(t, ns, "second") {
		t.Fatal("Job second runs beyond the queue's 4 GPUs")
	}

	create(claimTemplate(ns, "fpga", "fpga.example.com", 1), claimingJob(ns, "unmapped", "fpga", 1))
	direct := claimingJob(ns, "direct", "unused", 1)
	direct.Spec.Template.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("shared")}
	all := claimTemplate(ns, "all", draClass, 0)
	all.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	create(direct, all, claimingJob(ns, "every", "all", 1))
	for job, says := range map[string]string{
		"unmapped": `DeviceClass "fpga.example.com" is not mapped to a resource`,
		"direct":   `spec.template.spec.resourceClaims[0].resourceClaimName: the pods name ResourceClaim "shared" directly`,
		"every":    `exactly.allocationMode: All asks for every matching device`,
	} {
		eventually(t, 10*time.Second, func() (bool, string) {
			ok, why := hasEvent(t, ns, job, "Inadmissible", says)
			return ok && suspended(t, ns, job), fmt.Sprintf("Job %s: %s", job, why)
		})
	}

	// Job first ends: Job second gets its GPU, and the template of
	// Job first may go.
	complete(t, ns, "first")
	eventually(t, 10*time.Second, func() (bool, string) {
		return !suspended(t, ns, "second"), "Job second not admitted once Job first ended"
	})
	if err := k8s.Delete(ctx, two); err != nil {
		t.Errorf("deleting the template of finished Job first: %v", err)
	}
}

// claimingPod is newPod, of 100m CPU, with a claim made from template.
func claimingPod(ns, name, template string, controller metav1.Object) *corev1.Pod {
	p := newPod(ns, name, "100m", controller, "Job")
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

// TestIntegrationClaimingPods: the pod gate judges a pod by the devices
// its claims will get. A pod of an admitted Job whose claim asks for
// more devices than the Job was admitted with is held, and the Job
// requeued at that size; one whose claim names a ResourceClaim directly
// is denied; a bare pod that claims a device is queued and charged for
// it.
func TestIntegrationClaimingPods(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "drapods"
	bindManaged(t, ns, "drapods") // 2 example.com/gpu
	for _, tpl := range []*resourcev1.ResourceClaimTemplate{claimTemplate(ns, "one-gpu", draClass, 1), claimTemplate(ns, "four-gpus", draClass, 4)} {
		if err := k8s.Create(ctx, tpl); err != nil {
			t.Fatal(err)
		}
	}
	job := claimingJob(ns, "one", "one-gpu", 1)
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { return !suspended(t, ns, "one"), "Job one not admitted" })
	job = getJob(t, ns, "one")

	direct := claimingPod(ns, "one-direct", "", job)
	direct.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("shared")}
	err := k8s.Create(ctx, direct)
	if want := `spec.resourceClaims[0].resourceClaimName: the pods name ResourceClaim "shared" directly`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a pod of Job one that names a ResourceClaim directly: %v, want a denial saying %s", err, want)
	}

	bigger := claimingPod(ns, "one-bigger", "four-gpus", job)
	if err := k8s.Create(ctx, bigger); err != nil {
		t.Fatal(err)
	}
	if !gated(bigger) {
		t.Fatal("pod one-bigger, whose claim asks for 4 GPUs, runs in Job one, admitted with 1")
	}
	requeuedWithOverhead(t, ns, "one", "one-bigger", draResource+"=3", "Inadmissible", draResource)

	solo := claimingPod(ns, "solo", "one-gpu", nil)
	if err := k8s.Create(ctx, solo); err != nil {
		t.Fatal(err)
	}
	if !gated(solo) {
		t.Fatal("bare pod solo, which claims a GPU, was not queued")
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		p := getPod(t, ns, "solo")
		return !gated(p) && p.Annotations[queues.AnnotationFlavors] != "", fmt.Sprintf("pod solo not admitted: gates %v, annotations %v", p.Spec.SchedulingGates, p.Annotations)
	})
}
