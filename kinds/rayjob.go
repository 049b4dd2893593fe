package kinds

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RayJob is KubeRay's ray.io/v1 RayJob. Its pod sets are the head of
// spec.rayClusterSpec (1 pod), each worker group (the workers KubeRay
// starts × numOfHosts; maxReplicas × numOfHosts when the cluster
// autoscales, of which those above the workers it starts are Autoscaled:
// see workerCount) and, in the default K8sJobMode, the
// submitter: spec.submitterPodTemplate, or KubeRay's default submitter
// (500m CPU, 200Mi), which the RayJob does not hold and so is only
// counted. It is suspended by spec.suspend and finished when its
// status.jobDeploymentStatus is Complete, Failed or ValidationFailed. On
// suspend KubeRay deletes the RayCluster and the submitter Job; their
// pods, labelled by the admission, hold the quota until they are gone.
// A RayJob that runs on an existing cluster (spec.clusterSelector) has
// no pods of its own to queue and is refused.
type RayJob struct{}

var (
	rayJobSuspend = []string{"spec", "suspend"}
	rayGVK        = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
	// raySubmitter is KubeRay's default submitter pod (its
	// GetDefaultSubmitterContainer).
	raySubmitter = corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "ray-job-submitter", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}}}
)

func (RayJob) GVK() schema.GroupVersionKind { return rayGVK }
func (RayJob) Resource() string             { return "rayjobs" }
func (RayJob) New() client.Object           { return newUnstructured(rayGVK) }
func (RayJob) NewList() client.ObjectList   { return newUnstructuredList(rayGVK) }
func (RayJob) SuspendPath() []string        { return rayJobSuspend }

// podParents: KubeRay makes a RayJob's head and workers through a
// RayCluster (see PodParents).
func (RayJob) podParents() []string { return []string{"RayCluster"} }

// Shape is the kind's pod templates, where it holds them.
func (RayJob) Shape() any {
	type group struct {
		Template corev1.PodTemplateSpec `json:"template"`
	}
	return &struct {
		Spec struct {
			Cluster struct {
				Head    group   `json:"headGroupSpec"`
				Workers []group `json:"workerGroupSpecs"`
			} `json:"rayClusterSpec"`
			Submitter *corev1.PodTemplateSpec `json:"submitterPodTemplate"`
		} `json:"spec"`
	}{}
}

func (k RayJob) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{Kind: k, Obj: u, Meta: metaOf(u), suspendParent: true}
	o.Suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "suspend")
	status, _, _ := unstructured.NestedString(u.Object, "status", "jobDeploymentStatus")
	o.Finished = status == "Complete" || status == "Failed" || status == "ValidationFailed"
	if end, _, _ := unstructured.NestedString(u.Object, "status", "endTime"); o.Finished {
		o.FinishedAt, _ = time.Parse(time.RFC3339, end)
	}
	cluster, ok, _ := unstructured.NestedMap(u.Object, "spec", "rayClusterSpec")
	if !ok {
		return nil, fmt.Errorf("spec.rayClusterSpec: a queued RayJob needs a cluster of its own; one that runs on an existing RayCluster (spec.clusterSelector) is not supported")
	}
	base := []string{"spec", "rayClusterSpec"}
	head, err := template(cluster, "headGroupSpec", "template")
	if err != nil {
		return nil, fmt.Errorf("spec.rayClusterSpec.headGroupSpec.template: %w", err)
	}
	o.PodSets = append(o.PodSets, PodSet{Name: "head", Count: 1, Template: head, Path: Join(base, "headGroupSpec", "template")})
	autoscaling, _, _ := unstructured.NestedBool(cluster, "enableInTreeAutoscaling")
	groups, _, _ := unstructured.NestedSlice(cluster, "workerGroupSpecs")
	seen := map[string]bool{"head": true, "submitter": true}
	for i, g := range groups {
		at := Join(base, "workerGroupSpecs", strconv.Itoa(i))
		m, ok := g.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not an object", FieldPath(at))
		}
		name, _ := m["groupName"].(string)
		if name == "" || seen[name] {
			return nil, fmt.Errorf("%s.groupName: %q is empty or names another pod set (head, submitter, or another group)", FieldPath(at), name)
		}
		seen[name] = true
		replicas, started, field, err := workerCount(m, autoscaling)
		if err != nil {
			return nil, fmt.Errorf("%s.%w", FieldPath(at), err)
		}
		hosts := int64(1)
		if v, ok := m["numOfHosts"]; ok && v != nil {
			if hosts, ok = number(v); !ok {
				return nil, fmt.Errorf("%s.numOfHosts: not a number", FieldPath(at))
			}
			hosts = max(hosts, 1)
		}
		tpl, err := template(m, "template")
		if err != nil {
			return nil, fmt.Errorf("%s.template: %w", FieldPath(at), err)
		}
		o.PodSets = append(o.PodSets, PodSet{Name: name, Count: replicas * hosts, Autoscaled: (replicas - started) * hosts, Template: tpl,
			Path: Join(at, "template"), CountPath: Join(at, field), Injected: rayWorkerInjected})
	}
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "submissionMode")
	if mode == "" || mode == "K8sJobMode" {
		submitter := PodSet{Name: "submitter", Count: 1, Template: raySubmitter.DeepCopy()}
		if raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "submitterPodTemplate"); ok {
			tpl := &corev1.PodTemplateSpec{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl); err != nil {
				return nil, fmt.Errorf("spec.submitterPodTemplate: %w", err)
			}
			submitter.Template, submitter.Path = tpl, []string{"spec", "submitterPodTemplate"}
		}
		o.PodSets = append(o.PodSets, submitter)
	}
	return o, nil
}

// workerCount is how many workers a worker group m of a RayJob's cluster
// may run, how many of them KubeRay starts, and the field the first
// derives from. KubeRay starts replicas clamped to [minReplicas,
// maxReplicas] (minReplicas when replicas is unset, maxReplicas when the
// bounds cross, none when the group is suspended), and without
// autoscaling runs that many. With in-tree autoscaling, the autoscaler
// may run up to maxReplicas at any time without a write tally could hold
// back, so the quota must cover maxReplicas (a group that sets none gets
// KubeRay's default, 2147483647, and its RayJob can never fit), while the
// cluster starts with the workers KubeRay starts.
func workerCount(m map[string]any, autoscaling bool) (count, started int64, field string, err error) {
	num := func(field string, def int64) (int64, bool, error) {
		v, ok := m[field]
		if !ok || v == nil {
			return def, false, nil
		}
		n, ok := number(v)
		if !ok {
			return 0, true, fmt.Errorf("%s: not a number", field)
		}
		return max(n, 0), true, nil
	}
	lo, _, err := num("minReplicas", 0)
	if err != nil {
		return 0, 0, "", err
	}
	hi, _, err := num("maxReplicas", math.MaxInt32)
	if err != nil {
		return 0, 0, "", err
	}
	n, set, err := num("replicas", 0)
	suspended, _ := m["suspend"].(bool)
	switch {
	case err != nil:
		return 0, 0, "", err
	case suspended:
		started, field = 0, "suspend"
	case lo > hi:
		started, field = hi, "maxReplicas"
	case !set || n < lo:
		started, field = lo, "minReplicas"
	case n > hi:
		started, field = hi, "maxReplicas"
	default:
		started, field = n, "replicas"
	}
	if autoscaling {
		return hi, started, "maxReplicas", nil
	}
	return started, started, field, nil
}

// template converts the pod template at path in m.
func template(m map[string]any, path ...string) (*corev1.PodTemplateSpec, error) {
	tpl := &corev1.PodTemplateSpec{}
	raw, ok, err := unstructured.NestedMap(m, path...)
	if err != nil || !ok {
		return tpl, err
	}
	return tpl, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl)
}
