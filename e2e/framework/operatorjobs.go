package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The kinds of the operators of operators.go, and the kinds their
// operators make.
var (
	JobSetGVK           = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
	MPIJobGVK           = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"}
	RayJobGVK           = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"}
	RayClusterGVK       = schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}
	KubeflowTrainJobGVK = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	// ClusterTrainingRuntimeGVK is the kind of the runtimes TorchRuntime
	// builds.
	ClusterTrainingRuntimeGVK = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "ClusterTrainingRuntime"}
)

// OperatorJob says what the JobSets, MPIJobs and RayJobs built here hold.
type OperatorJob struct {
	Namespace, Name string
	// Workers is the JobSet's pods (one replicated Job of one Job with
	// that parallelism and completions), the MPIJob's workers (besides its
	// launcher) or the RayJob's workers (one group, besides the head).
	Workers int64
	// Runtime is how long the pods that finish run on the simulated
	// nodes: the JobSet's pods, the MPIJob's launcher, the RayJob's
	// submitter (see AnnotationRuntime). The others (MPI workers, Ray head
	// and workers) run until their operator deletes them.
	Runtime time.Duration
	// Suspend creates it suspended.
	Suspend bool
	// Labels go on the object.
	Labels map[string]string
}

func (o OperatorJob) podTemplate(container string, runtime bool) map[string]any {
	tpl := map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{
			"name": container, "image": "registry.example/" + container + ":v1",
			"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
		}},
	}}
	if runtime && o.Runtime > 0 {
		tpl["metadata"] = map[string]any{"annotations": map[string]any{AnnotationRuntime: o.Runtime.String()}}
	}
	return tpl
}

func (o OperatorJob) object(gvk schema.GroupVersionKind, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(o.Namespace)
	u.SetName(o.Name)
	if len(o.Labels) > 0 {
		u.SetLabels(o.Labels)
	}
	return u
}

// JobSet is a JobSet of one replicated Job (workers, 1 replica) of Workers
// pods that all must succeed. Its controller's webhook fills in the rest.
func (o OperatorJob) JobSet() *unstructured.Unstructured {
	tpl := o.podTemplate("worker", true)
	tpl["spec"].(map[string]any)["restartPolicy"] = "Never"
	return o.object(JobSetGVK, map[string]any{
		"suspend": o.Suspend,
		"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{
				"parallelism": o.Workers, "completions": o.Workers, "backoffLimit": int64(0),
				"template": tpl,
			}},
		}},
	})
}

// MPIJob is an MPIJob of a launcher (a Job, whose pod finishes after
// Runtime) and Workers workers (pods that run until the operator deletes
// them: cleanPodPolicy Running removes them once the MPIJob finishes).
func (o OperatorJob) MPIJob() *unstructured.Unstructured {
	return o.object(MPIJobGVK, map[string]any{
		"slotsPerWorker": int64(1),
		"runPolicy":      map[string]any{"suspend": o.Suspend, "cleanPodPolicy": "Running"},
		"mpiReplicaSpecs": map[string]any{
			"Launcher": map[string]any{"replicas": int64(1), "template": o.podTemplate("launcher", true)},
			"Worker":   map[string]any{"replicas": o.Workers, "template": o.podTemplate("worker", false)},
		},
	})
}

// RayJob is a RayJob (submitted by a Job, the default submission mode)
// whose RayCluster has a head and one group of Workers workers; its
// submitter's pod finishes after Runtime. shutdownAfterJobFinishes is set,
// as KubeRay allows suspending only such RayJobs; the RayCluster is deleted
// once the RayJob finishes.
func (o OperatorJob) RayJob() *unstructured.Unstructured {
	submitter := o.podTemplate("ray-job-submitter", true)
	submitter["spec"].(map[string]any)["restartPolicy"] = "Never"
	return o.object(RayJobGVK, map[string]any{
		"suspend":                  o.Suspend,
		"shutdownAfterJobFinishes": true,
		"entrypoint":               `python -c "print(1)"`,
		"submitterPodTemplate":     submitter,
		"rayClusterSpec": map[string]any{
			"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": o.podTemplate("ray-head", false)},
			"workerGroupSpecs": []any{map[string]any{
				"groupName": "workers", "replicas": o.Workers, "minReplicas": o.Workers, "maxReplicas": o.Workers,
				"rayStartParams": map[string]any{}, "template": o.podTemplate("ray-worker", false),
			}},
		},
	})
}

// TorchRuntime is a ClusterTrainingRuntime named Name in the shape of
// Trainer v2.3's torch-distributed: a torch policy of Workers nodes and
// one replicated Job, node (the trainer), whose container node asks for
// 1 CPU and whose pods finish after Runtime.
func (o OperatorJob) TorchRuntime() *unstructured.Unstructured {
	tpl := o.podTemplate("node", true)
	tpl["spec"].(map[string]any)["restartPolicy"] = "Never"
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"mlPolicy": map[string]any{"numNodes": o.Workers, "torch": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec":     map[string]any{"backoffLimit": int64(0), "template": tpl},
			},
		}}}},
	}}}
	u.SetGroupVersionKind(ClusterTrainingRuntimeGVK)
	u.SetName(o.Name)
	return u
}

// TrainJob is a Kubeflow TrainJob (KubeflowTrainJobGVK) of the
// ClusterTrainingRuntime runtime with Workers nodes (spec.trainer.numNodes).
func (o OperatorJob) TrainJob(runtime string) *unstructured.Unstructured {
	return o.object(KubeflowTrainJobGVK, map[string]any{
		"suspend":    o.Suspend,
		"runtimeRef": map[string]any{"name": runtime},
		"trainer":    map[string]any{"numNodes": o.Workers},
	})
}

// SuspendPath is the path of the suspend field of a JobSet, an MPIJob or a
// RayJob.
func SuspendPath(gvk schema.GroupVersionKind) []string {
	if gvk.Kind == MPIJobGVK.Kind {
		return []string{"spec", "runPolicy", "suspend"}
	}
	return []string{"spec", "suspend"}
}

// SetSuspend sets the suspend field of u (a JobSet, an MPIJob or a RayJob)
// with a merge patch.
func SetSuspend(ctx context.Context, c client.Client, u *unstructured.Unstructured, suspend bool) error {
	var patch any = suspend
	path := SuspendPath(u.GroupVersionKind())
	for i := len(path) - 1; i >= 0; i-- {
		patch = map[string]any{path[i]: patch}
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, u, client.RawPatch(types.MergePatchType, b))
}

// ConditionStatus is the status ("True", "False") of condition t of u, or
// "" when it has none: JobSets (Completed, Failed, Suspended, ...) and
// MPIJobs (Created, Running, Succeeded, Failed, Suspended, ...) have such
// conditions; RayJobs have a phase instead (RayJobDeploymentStatus).
func ConditionStatus(u *unstructured.Unstructured, t string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// Conditions lists the conditions of u as type=status, for messages.
func Conditions(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprintf("%v=%v", m["type"], m["status"]))
		}
	}
	return strings.Join(out, ",")
}

// RayJobDeploymentStatus is status.jobDeploymentStatus of a RayJob: ""
// (new), Initializing, Running, Complete, Failed, Suspending, Suspended,
// ValidationFailed, Retrying or Waiting.
func RayJobDeploymentStatus(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "jobDeploymentStatus")
	return s
}

// WaitTrainerSeesRuntime waits until the Trainer's validating webhook,
// which reads the training runtimes from its controller's cache, knows
// the ClusterTrainingRuntime named runtime: until then it refuses every
// TrainJob that names it ("must be created before the TrainJob"), though
// the API server has it. It asks with a dry-run create of a TrainJob in
// namespace default, which writes nothing.
func WaitTrainerSeesRuntime(ctx context.Context, c client.Client, runtime string) error {
	return Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		probe := OperatorJob{Namespace: "default", Name: "runtime-probe", Workers: 1}.TrainJob(runtime)
		err := c.Create(ctx, probe, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "must be created before") {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}
