package kinds

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Some operators add an init container to the pods of a pod set, which
// the scheduler reserves as it reserves the pod's own containers: the
// training operator adds init-pytorch to a PyTorchJob's workers, which
// waits for the master; KubeRay adds wait-gcs-ready to a RayJob's
// workers, which waits for the head. The kinds name them, with the
// operators' default requests, on the pod sets they read (PodSet.Injected),
// and a workload built with its namespace's pod defaults counts them, in
// the resources its queue covers (queues.PodDefaults.Inject), so that it
// is charged what its pods will reserve. An operator configured otherwise
// makes pods of another size, which the pod gate catches
// (webhook.PodGate): tally then charges the difference as pod overhead.

// pytorchInit is the training operator's (v1.9) init-pytorch container.
var pytorchInit = corev1.Container{Name: "init-pytorch", Resources: corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("20Mi")},
}}

// rayWorkerInjected is KubeRay's (v1.6) wait-gcs-ready container.
var rayWorkerInjected = []corev1.Container{rayWorkerInit}

var rayWorkerInit = corev1.Container{Name: "wait-gcs-ready", Resources: corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
}}
