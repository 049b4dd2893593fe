package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"tally.dev/tally/e2e/perf/scenario"
)

// A creation-policy run (Options.CreationPolicy) measures what tally's
// webhook round trip costs at creation: an in-process
// MutatingAdmissionPolicy (CEL) makes the changes tally's Job webhook
// makes to the scenario's Jobs (suspend, the state and queue labels), and
// the Job webhook is taken out of tally's configuration. It is a
// measurement only: the policy knows nothing of flavors, LocalQueues or
// the config, so it refuses a scenario whose Jobs the webhook changes in
// any other way.

const (
	creationPolicy = "tally-bench-creation"
	jobWebhook     = "jobs.tally.dev"
)

// useCreationPolicy learns from a dry run what tally's webhook does to a
// Job of q, installs a policy that does the same, removes tally's Job
// webhook and waits until a dry run shows the policy at work.
func useCreationPolicy(ctx context.Context, cs kubernetes.Interface, q scenario.ClusterQueue) error {
	probe := newJob(&scenario.Job{Namespace: q.Namespace, Name: "policy-probe", CPUMilli: 1}, scenario.Class{Name: "probe"})
	got, err := cs.BatchV1().Jobs(q.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	apply, patch, err := creationExpression(probe, got, q.Name)
	if err != nil {
		return err
	}
	mutations := []admissionregistrationv1.Mutation{{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: apply},
	}}
	if patch != "" {
		mutations = append(mutations, admissionregistrationv1.Mutation{
			PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: patch},
		})
	}
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: creationPolicy},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelManaged: "true"}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				}}},
			},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations:          mutations,
		},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("MutatingAdmissionPolicy: %w", err)
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: creationPolicy},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: creationPolicy},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("MutatingAdmissionPolicyBinding: %w", err)
	}
	cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configurationName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n := len(cfg.Webhooks)
	cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == jobWebhook })
	if len(cfg.Webhooks) == n {
		return fmt.Errorf("no webhook %s in MutatingWebhookConfiguration %s", jobWebhook, configurationName)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		return err
	}
	// The policy is loaded, and the webhook gone, when a dry run still
	// comes back as the webhook made it.
	last := ""
	err = poll(ctx, 100*time.Millisecond, time.Minute, func() (bool, error) {
		again, err := cs.BatchV1().Jobs(q.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("suspend=%v labels=%v annotations=%v", again.Spec.Suspend, again.Labels, again.Annotations)
		return apiequality.Semantic.DeepEqual(again.Spec.Suspend, got.Spec.Suspend) && maps.Equal(again.Labels, got.Labels) &&
			maps.Equal(again.Annotations, got.Annotations), nil
	})
	if err != nil {
		return fmt.Errorf("the creation policy does not take effect (last: %s): %w", last, err)
	}
	return nil
}

// creationExpression is the CEL apply configuration, and the JSON patch
// when the pod template changes, that turn before into after, as tally's webhook did for a Job of ClusterQueue queue: a
// label or annotation naming the queue reads it from the namespace's
// binding annotation. after may carry the API server's defaults besides:
// only what tally's webhook changes is compared (the Job's labels and
// annotations, suspend, and its pod template's affinity, tolerations and
// nodeSelector), and a change it cannot make is refused.
func creationExpression(before, after *batchv1.Job, queue string) (apply, patch string, err error) {
	b, a := before, after
	// The flavor's node affinity and tolerations are the same for every
	// Job of a scenario: the policy sets them as they came back.
	var pod []string
	if ba, aa := b.Spec.Template.Spec.Affinity, a.Spec.Template.Spec.Affinity; !apiequality.Semantic.DeepEqual(ba, aa) {
		if ba != nil {
			return "", "", fmt.Errorf("tally's webhook changes the Jobs' own affinity; a creation policy cannot stand in for it")
		}
		lit, err := celLiteral("Object.spec.template.spec.affinity", aa)
		if err != nil {
			return "", "", err
		}
		pod = append(pod, `JSONPatch{op: "add", path: "/spec/template/spec/affinity", value: `+lit+"}")
	}
	if bt, at := b.Spec.Template.Spec.Tolerations, a.Spec.Template.Spec.Tolerations; !apiequality.Semantic.DeepEqual(bt, at) {
		if len(bt) > 0 {
			return "", "", fmt.Errorf("tally's webhook changes the Jobs' own tolerations; a creation policy cannot stand in for it")
		}
		lit, err := celLiteral("Object.spec.template.spec.tolerations", at)
		if err != nil {
			return "", "", err
		}
		pod = append(pod, `JSONPatch{op: "add", path: "/spec/template/spec/tolerations", value: `+lit+"}")
	}
	// The rest of the template differs by the API server's defaults only,
	// but for a nodeSelector, which tally's webhook may clear.
	if !maps.Equal(b.Spec.Template.Spec.NodeSelector, a.Spec.Template.Spec.NodeSelector) {
		return "", "", fmt.Errorf("tally's webhook changes the Jobs' nodeSelector; a creation policy cannot stand in for it")
	}
	value := func(v string) string {
		if v == queue {
			return "namespaceObject.metadata.annotations[" + strconv.Quote(annotationQueue) + "]"
		}
		return strconv.Quote(v)
	}
	added := func(before, after map[string]string) (string, error) {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(after)) {
			if bv, ok := before[k]; ok && bv == after[k] {
				continue
			}
			kv = append(kv, strconv.Quote(k)+": "+value(after[k]))
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				return "", fmt.Errorf("tally's webhook removes %s; a creation policy cannot stand in for it", k)
			}
		}
		return "{" + strings.Join(kv, ", ") + "}", nil
	}
	labels, err := added(before.Labels, after.Labels)
	if err != nil {
		return "", "", err
	}
	annotations, err := added(before.Annotations, after.Annotations)
	if err != nil {
		return "", "", err
	}
	meta := "labels: " + labels
	if annotations != "{}" {
		meta += ", annotations: " + annotations
	}
	suspend := after.Spec.Suspend != nil && *after.Spec.Suspend
	apply = fmt.Sprintf("Object{metadata: Object.metadata{%s}, spec: Object.spec{suspend: %t}}", meta, suspend)
	if len(pod) > 0 {
		// Apply cannot set atomic structs such as the node affinity.
		patch = "[" + strings.Join(pod, ", ") + "]"
	}
	return apply, patch, nil
}

// celLiteral writes v (through its JSON form) as a CEL literal of the
// object type typ, naming each nested object's type by its path as
// MutatingAdmissionPolicy expressions do.
func celLiteral(typ string, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return "", err
	}
	var lit func(typ string, v any) string
	lit = func(typ string, v any) string {
		switch v := v.(type) {
		case map[string]any:
			var fields []string
			for _, k := range slices.Sorted(maps.Keys(v)) {
				fields = append(fields, k+": "+lit(typ+"."+k, v[k]))
			}
			return typ + "{" + strings.Join(fields, ", ") + "}"
		case []any:
			items := make([]string, len(v))
			for i, e := range v {
				items[i] = lit(typ, e)
			}
			return "[" + strings.Join(items, ", ") + "]"
		case string:
			return strconv.Quote(v)
		case float64:
			return strconv.FormatInt(int64(v), 10)
		case bool:
			return strconv.FormatBool(v)
		}
		return "null"
	}
	return lit(typ, tree), nil
}
