package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrainJob is a small test CRD that tally knows only by a WorkloadKind
// declaration (TrainJobKind): spec.suspend, and spec.worker's replicas ×
// template. RunTrainJobs plays its controller.
var TrainJobGVK = schema.GroupVersionKind{Group: "e2e.tally.dev", Version: "v1", Kind: "TrainJob"}

// TrainJobKind is the WorkloadKind document that declares TrainJob, as
// docs/kinds.md's example ("Declaring a kind") does, in group
// e2e.tally.dev and with the worker pod set alone.
const TrainJobKind = `apiVersion: tally.dev/v1
kind: WorkloadKind
metadata: {name: trainjobs.e2e.tally.dev}
spec:
  group: e2e.tally.dev
  version: v1
  kind: TrainJob
  suspendPath: .spec.suspend
  podSets:
  - name: worker
    templatePath: .spec.worker.template
    countPath: .spec.worker.replicas
  finishedConditions: [Succeeded, Failed]
`

// trainJobLabel marks the pods of a TrainJob, by name.
const trainJobLabel = "e2e.tally.dev/trainjob"

// InstallTrainJobCRD installs the TrainJob CRD and waits until it is
// served, and lets tally's service account read, watch and patch
// TrainJobs, as an admin who declares a kind grants it.
func InstallTrainJobCRD(ctx context.Context, c client.Client, tallyNamespace string) error {
	preserve := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "trainjobs.e2e.tally.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: TrainJobGVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "trainjobs", Singular: "trainjob", Kind: "TrainJob", ListKind: "TrainJobList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"suspend": {Type: "boolean"},
							"worker": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"replicas": {Type: "integer"}, "template": preserve}},
						}},
						"status": preserve,
					}}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("TrainJob CRD: %w", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tally-trainjobs"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{TrainJobGVK.Group}, Resources: []string{"trainjobs"}, Verbs: []string{"get", "list", "watch", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tally-trainjobs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tallyNamespace, Name: ServiceAccountName}}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return Poll(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "the TrainJob CRD is not established", nil
	})
}

// NewTrainJob returns a TrainJob of workers pods of gpus GPUs each that
// runs for runtime once un-suspended; it is created un-suspended, as a
// user who forgets suspend would.
func NewTrainJob(ns, name string, workers, gpus int, runtime time.Duration) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": map[string]any{"e2e.tally.dev/runtime": runtime.String()}},
		"spec": map[string]any{"suspend": false, "worker": map[string]any{"replicas": int64(workers), "template": map[string]any{
			"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "w", "image": "busybox",
				"resources": map[string]any{"requests": map[string]any{"cpu": "1", ResourceGPU: fmt.Sprint(gpus)},
					"limits": map[string]any{ResourceGPU: fmt.Sprint(gpus)}}}}}}}},
	}}
	u.SetGroupVersionKind(TrainJobGVK)
	return u
}

// RunTrainJobs plays the TrainJob controller in namespace ns until ctx
// ends, polling every interval, as a real one would: an un-suspended,
// unfinished TrainJob gets its worker pods from its template; a suspended
// one loses them; once its pods have all run for its runtime (annotation
// e2e.tally.dev/runtime), it is marked Succeeded and its pods are deleted.
// Errors (other than conflicts, retried on the next poll) are sent on the
// returned channel, which closes when it stops.
func RunTrainJobs(ctx context.Context, c client.Client, ns string, interval time.Duration) <-chan error {
	errs := make(chan error, 16)
	running := map[string]time.Time{}
	go func() {
		defer close(errs)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := reconcileTrainJobs(ctx, c, ns, running); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
				select {
				case errs <- err:
				default:
				}
			}
		}
	}()
	return errs
}

func reconcileTrainJobs(ctx context.Context, c client.Client, ns string, running map[string]time.Time) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(TrainJobGVK.GroupVersion().WithKind("TrainJobList"))
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		tj := &list.Items[i]
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{trainJobLabel: tj.GetName()}); err != nil {
			return err
		}
		suspended, _, _ := unstructured.NestedBool(tj.Object, "spec", "suspend")
		if suspended || TrainJobFinished(tj) {
			delete(running, tj.GetName())
			for j := range pods.Items {
				if err := c.Delete(ctx, &pods.Items[j]); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			continue
		}
		if len(pods.Items) == 0 {
			if err := createTrainJobPods(ctx, c, tj); err != nil {
				return err
			}
			continue
		}
		allRunning := true
		for _, p := range pods.Items {
			allRunning = allRunning && p.Status.Phase == corev1.PodRunning
		}
		if !allRunning {
			continue
		}
		since, ok := running[tj.GetName()]
		if !ok {
			running[tj.GetName()] = time.Now()
			continue
		}
		d, _ := time.ParseDuration(tj.GetAnnotations()["e2e.tally.dev/runtime"])
		if time.Since(since) < d {
			continue
		}
		_ = unstructured.SetNestedSlice(tj.Object, []any{map[string]any{"type": "Succeeded", "status": "True",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "reason": "Done", "message": "its workers ran"}}, "status", "conditions")
		if err := c.Update(ctx, tj); err != nil {
			return err
		}
	}
	return nil
}

// createTrainJobPods creates a TrainJob's worker pods from its template.
func createTrainJobPods(ctx context.Context, c client.Client, tj *unstructured.Unstructured) error {
	raw, _, _ := unstructured.NestedMap(tj.Object, "spec", "worker", "template")
	tpl := &corev1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl); err != nil {
		return err
	}
	n, _, _ := unstructured.NestedInt64(tj.Object, "spec", "worker", "replicas")
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()}
		p.Namespace, p.Name = tj.GetNamespace(), fmt.Sprintf("%s-worker-%d", tj.GetName(), i)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[trainJobLabel] = tj.GetName()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: TrainJobGVK.GroupVersion().String(), Kind: TrainJobGVK.Kind,
			Name: tj.GetName(), UID: tj.GetUID(), Controller: ptr.To(true)}}
		if err := c.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// TrainJobFinished says whether a TrainJob has a true Succeeded or Failed
// condition.
func TrainJobFinished(tj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Succeeded" || m["type"] == "Failed") && m["status"] == "True" {
			return true
		}
	}
	return false
}

// TrainJobPods lists a TrainJob's pods.
func TrainJobPods(ctx context.Context, c client.Reader, ns, name string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{trainJobLabel: name})
	return pods.Items, err
}

// WebhookCovers says whether tally's mutating webhook configuration has
// a rule for resource of group.
func WebhookCovers(ctx context.Context, c client.Reader, group, resource string) (bool, error) {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"})
	if err := c.Get(ctx, client.ObjectKey{Name: "tally"}, m); err != nil {
		return false, err
	}
	hooks, _, _ := unstructured.NestedSlice(m.Object, "webhooks")
	for _, h := range hooks {
		rules, _, _ := unstructured.NestedSlice(h.(map[string]any), "rules")
		for _, r := range rules {
			rm := r.(map[string]any)
			groups, _, _ := unstructured.NestedStringSlice(rm, "apiGroups")
			resources, _, _ := unstructured.NestedStringSlice(rm, "resources")
			if strings.Join(groups, ",") == group && strings.Join(resources, ",") == resource {
				return true, nil
			}
		}
	}
	return false, nil
}
