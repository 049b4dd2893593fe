package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ConfigurationName names both webhook configurations tally registers.
const ConfigurationName = "tally"

// Endpoint says how the API server reaches tally's webhook server: a base
// URL (tally on the host) or a Service (tally in the cluster).
type Endpoint struct {
	// URL is e.g. "https://127.0.0.1:9443". It wins over Service.
	URL              string
	ServiceNamespace string
	ServiceName      string
	ServicePort      int32
	CABundle         []byte
}

func (e Endpoint) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	if e.URL != "" {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(e.URL + path), CABundle: e.CABundle}
	}
	return admissionregistrationv1.WebhookClientConfig{
		CABundle: e.CABundle,
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: e.ServiceNamespace, Name: e.ServiceName, Path: ptr.To(path), Port: ptr.To(e.ServicePort),
		},
	}
}

// Configurations returns the webhook configurations for tally running in
// namespace own, queueing the kinds of ks (nil: the built-in ones). The
// Job webhooks fail closed but only ever see managed
// namespaces, or, outside them, workloads that carry tally.dev/state; the
// others fail open, so tally being down never blocks namespace or
// ConfigMap writes.
//
// users are the names tally acts as besides its service account in own
// (see JobGuard.Users): the guard is not called for their writes either.
func Configurations(ks *kinds.Registry, e Endpoint, own string, users ...string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	fail, ignore := ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.Ignore)
	versions := []string{"v1"}
	managed := &metav1.LabelSelector{
		MatchLabels: map[string]string{queues.LabelManaged: "true"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", own},
		}},
	}
	notSystem := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", own},
	}}}
	// The namespaces tally does not manage (system ones aside).
	unmanaged := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: queues.LabelManaged, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"},
	}, {
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", own},
	}}}
	stateLabelled := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: queues.LabelState, Operator: metav1.LabelSelectorOpExists,
	}}}
	onlyOwn := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{own},
	}}}
	// Each rule names its resource's scope (which the API server would
	// default to "*"), so that RuleSync finds nothing to change in a
	// configuration installed from deploy/ (hack/manifests writes it from
	// this function).
	namespaced, cluster := admissionregistrationv1.NamespacedScope, admissionregistrationv1.ClusterScope
	rule := func(group, version, resource string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource},
				Scope: ptr.To(scope)},
		}}
	}
	// The workload webhooks cover every registered kind, all namespaced;
	// with scale, also the scale subresource of the kinds that have one
	// (see hasScale).
	workloads := func(scale bool, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		var out []admissionregistrationv1.RuleWithOperations
		for _, k := range ks.All() {
			if kinds.IsPodKind(k) {
				continue // the pod gate's
			}
			gvk := k.GVK()
			r := rule(gvk.Group, gvk.Version, k.Resource(), namespaced, ops...)
			if scale && hasScale(k) {
				r[0].Resources = append(r[0].Resources, k.Resource()+"/scale")
			}
			out = append(out, r...)
		}
		return out
	}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "jobs.tally.dev", ClientConfig: e.clientConfig(JobPath),
			Rules:         workloads(false, create),
			FailurePolicy: fail, NamespaceSelector: managed, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}, {
			// Called again after other webhooks change the pod: it judges
			// the pod as it will run.
			Name: "pods.tally.dev", ClientConfig: e.clientConfig(PodPath),
			Rules:         rule("", "v1", "pods", namespaced, create),
			FailurePolicy: fail, NamespaceSelector: managed, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}, {
			Name: "namespaces.tally.dev", ClientConfig: e.clientConfig(NamespaceMutatePath),
			Rules:         rule("", "v1", "namespaces", cluster, create, update),
			FailurePolicy: ignore, NamespaceSelector: notSystem, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "jobs.validate.tally.dev", ClientConfig: e.clientConfig(JobGuardPath),
			Rules:         workloads(true, update),
			FailurePolicy: fail, NamespaceSelector: managed, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
			// tally's own writes (admissions, preemptions) skip the call.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "not-tally", Expression: notTally(own, users),
			}},
		}, {
			// Only for workloads (single-pod ones too) that carry tally's
			// state label, outside the managed namespaces: it fails
			// closed, and legitimate writes of those are few (a workload
			// queued before its namespace was unbound).
			Name: "unmanaged.validate.tally.dev", ClientConfig: e.clientConfig(UnmanagedGuardPath),
			Rules:         append(workloads(false, create, update), rule("", "v1", "pods", namespaced, create, update)...),
			FailurePolicy: fail, NamespaceSelector: unmanaged, ObjectSelector: stateLabelled, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "not-tally", Expression: notTally(own, users),
			}},
		}, {
			Name: "pods.validate.tally.dev", ClientConfig: e.clientConfig(PodGuardPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods", "pods/resize"}, Scope: ptr.To(namespaced)},
			}},
			FailurePolicy: fail, NamespaceSelector: managed, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
			// Called only for the updates the guard judges, so the pods'
			// many other updates (a finalizer removed) cost nothing.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "not-tally", Expression: notTally(own, users),
			}, {
				Name: "guarded", Expression: podGuarded,
			}},
		}, {
			Name: "claimtemplates.validate.tally.dev", ClientConfig: e.clientConfig(ClaimTemplateGuardPath),
			Rules:         rule("resource.k8s.io", "v1", "resourceclaimtemplates", namespaced, admissionregistrationv1.Delete),
			FailurePolicy: fail, NamespaceSelector: managed, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
		}, {
			Name: "namespaces.validate.tally.dev", ClientConfig: e.clientConfig(NamespaceValidatePath),
			Rules:         rule("", "v1", "namespaces", cluster, create, update),
			FailurePolicy: ignore, NamespaceSelector: notSystem, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
		}, {
			Name: "config.validate.tally.dev", ClientConfig: e.clientConfig(ConfigMapValidatePath),
			Rules:         rule("", "v1", "configmaps", namespaced, create, update),
			FailurePolicy: ignore, NamespaceSelector: onlyOwn, SideEffects: none,
			TimeoutSeconds: ptr.To[int32](5), AdmissionReviewVersions: versions,
		}},
	}
	return mutating, validating
}

// podGuarded is the CEL condition of the pod updates the pod guard
// judges: a resize, or a change of labels, annotations or scheduling
// gates.
const podGuarded = `(has(request.subResource) && request.subResource == "resize") || ` +
	`has(object.metadata.labels) != has(oldObject.metadata.labels) || ` +
	`(has(object.metadata.labels) && object.metadata.labels != oldObject.metadata.labels) || ` +
	`has(object.metadata.annotations) != has(oldObject.metadata.annotations) || ` +
	`(has(object.metadata.annotations) && object.metadata.annotations != oldObject.metadata.annotations) || ` +
	`has(object.spec.schedulingGates) != has(oldObject.spec.schedulingGates) || ` +
	`(has(object.spec.schedulingGates) && object.spec.schedulingGates != oldObject.spec.schedulingGates)`

// notTally is the CEL condition that skips the Job guard for tally's own
// writes: its service account in own, and users.
func notTally(own string, users []string) string {
	names := []string{fmt.Sprintf("%q", ServiceAccountUser(own))}
	for _, u := range users {
		if q := fmt.Sprintf("%q", u); u != "" && !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	if len(names) == 1 {
		return "request.userInfo.username != " + names[0]
	}
	return "!(request.userInfo.username in [" + strings.Join(names, ", ") + "])"
}

// Register creates or updates tally's webhook configurations (see
// Configurations).
func Register(ctx context.Context, c client.Client, ks *kinds.Registry, e Endpoint, own string, users ...string) error {
	wantM, wantV := Configurations(ks, e, own, users...)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, m, func() error { m.Webhooks = wantM.Webhooks; return nil }); err != nil {
		return fmt.Errorf("registering MutatingWebhookConfiguration %s: %w", ConfigurationName, err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, v, func() error { v.Webhooks = wantV.Webhooks; return nil }); err != nil {
		return fmt.Errorf("registering ValidatingWebhookConfiguration %s: %w", ConfigurationName, err)
	}
	return nil
}

// RuleSync keeps the rules of tally's two workload webhooks (in the
// webhook configurations named ConfigurationName) in step with the kinds
// tally queues, Kinds, which change when a config declares a kind: it updates them at the start and after every config load. Only
// the leader runs it.
type RuleSync struct {
	Client client.Client
	Store  *queues.Store
	// Namespace and Users are as for Configurations.
	Namespace string
	Users     []string
	// Kinds are the kinds tally queues.
	Kinds *kinds.Registry
	Log   logr.Logger
}

// NeedLeaderElection: one replica writes.
func (r *RuleSync) NeedLeaderElection() bool { return true }

// Start syncs the rules until ctx ends.
func (r *RuleSync) Start(ctx context.Context) error {
	changed := r.Store.Subscribe()
	for {
		if err := r.Sync(ctx); err != nil {
			r.Log.Error(err, "updating the webhook rules to the workload kinds; a kind declared since may not be queued")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// Sync updates the workload webhooks' rules, if they differ.
func (r *RuleSync) Sync(ctx context.Context) error {
	wantM, wantV := Configurations(r.Kinds, Endpoint{}, r.Namespace, r.Users...)
	rules := map[string][]admissionregistrationv1.RuleWithOperations{}
	for _, w := range wantM.Webhooks {
		rules[w.Name] = w.Rules
	}
	for _, w := range wantV.Webhooks {
		rules[w.Name] = w.Rules
	}
	// set gives one webhook its rules and says whether they changed.
	set := func(name string, have *[]admissionregistrationv1.RuleWithOperations) bool {
		want, ok := rules[name]
		if !ok || equality.Semantic.DeepEqual(*have, want) {
			return false
		}
		*have = want
		return true
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.update(ctx, m, func() (changed bool) {
		for i := range m.Webhooks {
			changed = set(m.Webhooks[i].Name, &m.Webhooks[i].Rules) || changed
		}
		return changed
	}); err != nil {
		return err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return r.update(ctx, v, func() (changed bool) {
		for i := range v.Webhooks {
			changed = set(v.Webhooks[i].Name, &v.Webhooks[i].Rules) || changed
		}
		return changed
	})
}

// update reads the configuration obj named ConfigurationName, lets
// change change it, and writes it if it did, again on a conflict.
func (r *RuleSync) update(ctx context.Context, obj client.Object, change func() bool) error {
	kind := fmt.Sprintf("%T", obj)[len("*v1."):]
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ConfigurationName}, obj); err != nil {
			return err
		}
		if !change() {
			return nil
		}
		r.Log.Info("webhook rules updated to the workload kinds", "configuration", kind+"/"+ConfigurationName)
		return r.Client.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, ConfigurationName, err)
	}
	return nil
}
