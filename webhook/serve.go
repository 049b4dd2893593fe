package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"net/url"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/certs"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// Options configure Setup.
type Options struct {
	Store *queues.Store
	// Namespace is tally's own namespace; ConfigName its config
	// ConfigMap's name.
	Namespace, ConfigName string
	// Users are the user names tally acts as (see JobGuard.Users).
	Users []string
	// URL is the base URL the API server calls the webhooks at; empty for
	// the Service tally-webhook in Namespace.
	URL string
	// CertDir holds the serving certificate.
	CertDir string
	// CertManager says cert-manager provides the certificate and injects
	// the CA; Register says tally registers its webhook configurations.
	CertManager, Register bool
	// Kinds are the kinds tally queues, which a config may declare more
	// of while tally runs.
	Kinds *kinds.Registry
}

// Setup serves every webhook on the manager's webhook server, each bounded
// in body size and time (Limit) and reading requests in one pass (Review), and makes the serving certificate (or,
// with cert-manager, finds it) and registers the webhook configurations
// with its CA bundle, whose workload rules RuleSync keeps in step with the
// declared kinds. c reads from the API server, not a cache.
func Setup(ctx context.Context, mgr manager.Manager, c client.Client, opts Options, log logr.Logger) error {
	if err := setUpCerts(ctx, mgr, c, opts, log); err != nil {
		return err
	}
	decoder := admission.NewDecoder(mgr.GetScheme())
	srv := mgr.GetWebhookServer()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodWorkloadIndex, IndexPodWorkload); err != nil {
		return fmt.Errorf("indexing pods by %s: %w", queues.LabelWorkload, err)
	}
	jobs := &JobMutator{Store: opts.Store, Namespaces: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Namespace: opts.Namespace, Kinds: opts.Kinds, Decoder: decoder}
	gate := &PodGate{Jobs: jobs, Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Users: opts.Users, Decoder: decoder}
	for path, h := range map[string]admission.Handler{
		JobPath:                jobs,
		PodPath:                gate,
		PodGuardPath:           gate,
		JobGuardPath:           &JobGuard{Users: opts.Users, Decoder: decoder, Reader: mgr.GetAPIReader(), Kinds: opts.Kinds},
		UnmanagedGuardPath:     &UnmanagedGuard{Users: opts.Users},
		NamespaceMutatePath:    &NamespaceMutator{Store: opts.Store, Namespace: opts.Namespace, Decoder: decoder},
		NamespaceValidatePath:  &NamespaceValidator{Store: opts.Store, Namespace: opts.Namespace, Decoder: decoder},
		ConfigMapValidatePath:  &ConfigValidator{Namespace: opts.Namespace, Name: opts.ConfigName, Decoder: decoder},
		ClaimTemplateGuardPath: &ClaimTemplateGuard{Jobs: jobs, Reader: mgr.GetAPIReader()},
	} {
		srv.Register(path, Limit(Review(&ctrlwebhook.Admission{Handler: h, LogConstructor: plainLog})))
	}
	return mgr.Add(&RuleSync{Client: c, Store: opts.Store, Namespace: opts.Namespace, Users: opts.Users, Kinds: opts.Kinds, Log: log.WithName("webhook-rules")})
}

// plainLog gives each request the webhook's own logger. The default adds
// the request's fields with WithValues, which encodes them for every
// request (a fifth of the webhook's allocations) though tally's handlers
// log nothing; a failure to encode a response is still logged.
func plainLog(base logr.Logger, _ *admission.Request) logr.Logger { return base }

// setUpCerts makes (or, with cert-manager, finds) the serving certificate
// and registers the webhook configurations with its CA bundle.
func setUpCerts(ctx context.Context, mgr manager.Manager, c client.Client, opts Options, log logr.Logger) error {
	endpoint := Endpoint{URL: strings.TrimSuffix(opts.URL, "/"), ServiceNamespace: opts.Namespace, ServiceName: "tally-webhook", ServicePort: 443}
	var hosts []string
	var secret *client.ObjectKey
	if endpoint.URL != "" {
		u, err := url.Parse(endpoint.URL)
		if err != nil || u.Hostname() == "" {
			return fmt.Errorf("--webhook-url %q: not a URL with a host", opts.URL)
		}
		hosts = []string{u.Hostname(), "localhost", "127.0.0.1"}
	} else {
		svc := endpoint.ServiceName + "." + opts.Namespace + ".svc"
		hosts = []string{svc, svc + ".cluster.local"}
		secret = &client.ObjectKey{Namespace: opts.Namespace, Name: "tally-webhook-tls"}
	}
	if opts.CertManager {
		if opts.Register {
			return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				return Register(ctx, c, opts.Kinds, endpoint, opts.Namespace, opts.Users...)
			}))
		}
		return nil
	}
	rot := &certs.Rotator{Client: c, Dir: opts.CertDir, Hosts: hosts, Secret: secret}
	bundle, err := rot.Ensure(ctx)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if opts.Register {
		endpoint.CABundle = bundle.CACert
		if err := Register(ctx, c, opts.Kinds, endpoint, opts.Namespace, opts.Users...); err != nil {
			return err
		}
		log.Info("webhook configurations registered", "name", ConfigurationName, "url", endpoint.URL)
		// From now on each rotation round injects the CA it holds.
		rot.Mutating, rot.Validating = ConfigurationName, ConfigurationName
	}
	return mgr.Add(rot)
}
