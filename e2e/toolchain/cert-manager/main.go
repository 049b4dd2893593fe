// Command cert-manager runs cert-manager's own controllers for the e2e
// tests, as a host process against a cluster's kubeconfig: the controllers
// that issue a Certificate through a self-signed or a CA Issuer (trigger,
// key manager, request manager, issuing, readiness, revision manager; the
// Issuer controller; the approver and the two CertificateRequest signers)
// and the cainjector's webhook-configuration injectors. cert-manager's
// cmd/controller and cmd/cainjector are nested modules that the Go module
// proxy does not serve; the controllers are in its main module, and this
// main does what those two commands do with them, less their flags,
// metrics, leader election and the ACME, Vault and Venafi issuers.
//
// It is a test tool, built on demand by e2e/toolchain/build.sh into the
// toolchain, not part of tally.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	// Each registers its controller with controller.Register.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The Issuer kinds the Issuer controller sets up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the names the packages above register.
var controllers = []string{
	"issuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
}

func main() {
	// controller-runtime defines --kubeconfig on the command line already.
	klog.InitFlags(nil)
	flag.Parse()
	kubeconfig := flag.Lookup("kubeconfig").Value.String()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctrl.SetLogger(klog.Background())
	ctx = logf.NewContext(ctx, klog.Background())
	if err := run(ctx, kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string) error {
	g, ctx := errgroup.WithContext(ctx)
	if err := startController(ctx, g, kubeconfig); err != nil {
		return err
	}
	if err := startCAInjector(ctx, g, kubeconfig); err != nil {
		return err
	}
	klog.Info("cert-manager started", "controllers", controllers)
	return g.Wait()
}

// startController does what cmd/controller does once elected: builds each
// controller, starts it, then the shared informers.
func startController(ctx context.Context, g *errgroup.Group, kubeconfig string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: "cert-manager"},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	for _, name := range controllers {
		newController, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(2, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return nil
}

// startCAInjector does what cmd/cainjector does for webhook
// configurations: a manager with the injectors, reading Secrets uncached.
func startCAInjector(ctx context.Context, g *errgroup.Group, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Logger:  klog.Background().WithName("cainjector"),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return err
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	}); err != nil {
		return err
	}
	g.Go(func() error { return mgr.Start(ctx) })
	return nil
}
