package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewClient returns an uncached client (with Watch) for the kubeconfig.
func NewClient(kubeconfig string) (client.WithWatch, error) {
	return newClient(kubeconfig, nil)
}

// Warnings collects the warnings the API server returns, such as those of
// admission webhooks.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// Take returns the warnings collected since the last Take.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// NewClientWithWarnings returns a client like NewClient whose requests'
// warnings are collected in the Warnings returned.
func NewClientWithWarnings(kubeconfig string) (client.WithWatch, *Warnings, error) {
	w := &Warnings{}
	c, err := newClient(kubeconfig, w)
	return c, w, err
}

// NewUserClient returns a client of kubeconfig's cluster that acts as
// user, by impersonation: what it may do is what the cluster's RBAC grants
// user, as for an ordinary user of the cluster.
func NewUserClient(kubeconfig, user string) (client.WithWatch, error) {
	return newClient(kubeconfig, nil, func(cfg *rest.Config) { cfg.Impersonate = rest.ImpersonationConfig{UserName: user} })
}

func newClient(kubeconfig string, warnings rest.WarningHandlerWithContext, adjust ...func(*rest.Config)) (client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, f := range adjust {
		f(cfg)
	}
	if warnings != nil {
		cfg.WarningHandlerWithContext = warnings
	}
	cfg.QPS, cfg.Burst = 200, 400
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// ApplyConfig creates namespace ns if needed and creates or replaces its
// ConfigMap tally-config with the given config documents.
func ApplyConfig(ctx context.Context, c client.Client, ns, docs string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName}}
	err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	if apierrors.IsNotFound(err) {
		cm.Data = map[string]string{ConfigKey: docs}
		return c.Create(ctx, cm)
	}
	if err != nil {
		return err
	}
	cm.Data = map[string]string{ConfigKey: docs}
	return c.Update(ctx, cm)
}

// CreateNamespace creates a namespace, bound to clusterQueue unless it is
// empty.
func CreateNamespace(ctx context.Context, c client.Client, name, clusterQueue string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if clusterQueue != "" {
		ns.Annotations = map[string]string{AnnotationQueue: clusterQueue}
	}
	return c.Create(ctx, ns)
}

// BindNamespace creates a namespace bound to clusterQueue and waits until
// Jobs created in it go through tally's webhook (see WaitManaged).
func BindNamespace(ctx context.Context, c client.Client, name, clusterQueue string) error {
	if err := CreateNamespace(ctx, c, name, clusterQueue); err != nil {
		return err
	}
	return WaitManaged(ctx, c, name, nil)
}

// WaitManaged waits until Jobs with probeLabels created in namespace name
// go through tally's webhook: the namespace carries tally.dev/managed=true
// and a server-side dry-run of such a Job comes back suspended and
// labelled. Without the second check, a Job created just after the label
// appears may still miss the webhook.
func WaitManaged(ctx context.Context, c client.Client, name string, probeLabels map[string]string) error {
	return Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return false, err.Error(), nil
		}
		if ns.Labels[LabelManaged] != "true" {
			return false, fmt.Sprintf("namespace %s labels %v", name, ns.Labels), nil
		}
		b := NewJob(name, "webhook-probe")
		for k, v := range probeLabels {
			b.Label(k, v)
		}
		probe := b.Obj()
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, "dry-run Job: " + err.Error(), nil
		}
		if !Suspended(probe) || probe.Labels[LabelState] != StatePending {
			return false, fmt.Sprintf("dry-run Job not queued: suspend=%v labels=%v", probe.Spec.Suspend, probe.Labels), nil
		}
		return true, "", nil
	})
}

// CreateJobs creates the Jobs in order; each is updated in place with what
// the API server returned, including what the webhook wrote.
func CreateJobs(ctx context.Context, c client.Client, jobs ...*batchv1.Job) error {
	for _, j := range jobs {
		if err := c.Create(ctx, j); err != nil {
			return fmt.Errorf("creating Job %s/%s: %w", j.Namespace, j.Name, err)
		}
	}
	return nil
}

// ListJobs lists the Jobs of a namespace.
func ListJobs(ctx context.Context, c client.Reader, ns string) ([]batchv1.Job, error) {
	var l batchv1.JobList
	if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// AdmittedEvents counts, per Job name, the Admitted Events of a namespace,
// including repeats that the event recorder folded into one object.
func AdmittedEvents(ctx context.Context, c client.Client, ns string) (map[string]int, error) {
	var l corev1.EventList
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{"reason": ReasonAdmitted, "involvedObject.kind": "Job"}); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range l.Items {
		n := int(max(e.Count, 1))
		if e.Series != nil {
			n = max(n, int(e.Series.Count))
		}
		out[e.InvolvedObject.Name] += n
	}
	return out, nil
}
