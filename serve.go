package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger"
	"tally.dev/tally/queues"
	"tally.dev/tally/webhook"
)

type serveFlags struct {
	kubeconfig, configFile, namespace  string
	tallyUser                          string
	webhookHost, certDir, webhookURL   string
	webhookPort                        int
	register, certManager, leaderElect bool
	watchFinished                      bool
	metricsAddr, probeAddr, pprofAddr  string
	dashboardAddr                      string
	shutdownDelay, recount             time.Duration
	leaseDuration, renewDeadline       time.Duration
	retryPeriod                        time.Duration
	finishedLabelRate, qps             float64
	burst                              int
	apiContentType                     string
	ledger                             ledger.Options
	zap                                zap.Options
}

func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("tally serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then the in-cluster config.")
	fs.StringVar(&f.configFile, "config", "", "Read config documents from this file instead of the ConfigMap <namespace>/tally-config (key queues.yaml).")
	fs.StringVar(&f.namespace, "namespace", "tally-system", "tally's own namespace: holds the config ConfigMap, the leader lease and the certificate Secret, and is never managed.")
	fs.StringVar(&f.tallyUser, "tally-user", "", "User name tally acts as, besides the service account tally in --namespace: the Job webhook lets only these un-suspend or re-pin managed Jobs. Empty: ask the API server (SelfSubjectReview).")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "Port the webhook server listens on.")
	fs.StringVar(&f.webhookHost, "webhook-host", "", "Address the webhook server listens on (all when empty).")
	fs.StringVar(&f.certDir, "cert-dir", "", "Directory holding tls.crt and tls.key. Defaults to <tmp>/k8s-webhook-server/serving-certs.")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "Base URL the API server calls the webhooks at, e.g. https://127.0.0.1:9443 when tally runs on the host. Empty: the Service tally-webhook in --namespace.")
	fs.BoolVar(&f.register, "register-webhooks", true, "Create or update the webhook configurations named tally, with the CA bundle.")
	fs.BoolVar(&f.certManager, "cert-manager", false, "cert-manager provides the serving certificate in --cert-dir and injects the CA: tally makes no certificates.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader among replicas to run the ledger. Every replica serves the webhooks.")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a replica waits, after the leader last renewed the lease, before it takes the lease over.")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leading; it writes nothing once its last renewal is this old. Less than the lease duration.")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often replicas try to acquire or renew the lease.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "Address the metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address to serve Go's /debug/pprof profiles on; empty disables it.")
	fs.StringVar(&f.dashboardAddr, "dashboard-bind-address", "", "Address to serve the read-only dashboard page on (for example 127.0.0.1:8090); empty disables it.")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", 2*time.Second, "On SIGTERM, keep serving this long while not ready, so in-flight admissions finish.")
	fs.DurationVar(&f.recount, "recount-interval", 5*time.Minute, "How often the ledger recounts usage from scratch and repairs drift.")
	fs.IntVar(&f.ledger.Workers, "max-concurrent-writes", ledger.DefaultWorkers, "The most admission and preemption writes the ledger has in flight at once.")
	fs.Float64Var(&f.qps, "kube-api-qps", 500, "The most requests a second tally sends to the API server (client-side rate limit of each client; the ledger's writes share one, and an admission pass decides no more writes than it has free; Events are paced apart by client-go).")
	fs.IntVar(&f.burst, "kube-api-burst", 1000, "The most requests tally sends in a burst above --kube-api-qps.")
	var finishedLabel, events, admissionPatch string
	fs.StringVar(&finishedLabel, "finished-label", string(ledger.FinishedLabelEager), "How the ledger writes the label tally.dev/state=finished: eager (when the workload finishes), lazy (coalesced, at most --finished-label-rate a second, and only while no admission or preemption write is in flight), or off (never: a finished workload keeps its label; its status says it finished).")
	fs.Float64Var(&f.finishedLabelRate, "finished-label-rate", 100, "With --finished-label=lazy, the most finished labels written a second.")
	fs.BoolVar(&f.watchFinished, "watch-finished", false, "Keep watching batch/v1 Jobs labelled tally.dev/state=finished until they are deleted. By default they leave tally's watch once labelled, so tally's memory follows the Jobs queued and running, not the cluster's history of finished ones.")
	fs.StringVar(&events, "events", string(ledger.EventsAll), "Which Events the ledger records: all, or minimal (no Queued or Pending Event for a workload admitted by the first pass that sees it; every other Event is recorded).")
	fs.StringVar(&admissionPatch, "admission-patch", string(ledger.AdmissionPatchMerge), "How the admission write is encoded, one write guarded by resourceVersion in each: merge (JSON merge patch), json (JSON patch), or apply (server-side apply, forced; it cannot delete fields).")
	fs.StringVar(&f.apiContentType, "api-content-type", "protobuf", "The encoding of tally's API requests, responses and watches: protobuf (for built-in kinds, custom resources in JSON: controller-runtime's choice) or json (for all, but the metadata-only answers to its patches, always protobuf).")
	f.zap.Development = false
	f.zap.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: tally serve [flags]\n\nRuns tally: the webhooks on every replica, and the ledger on the leader (with\n--leader-elect) or on the one replica. Logs are structured (zap; see the -zap- flags).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err := usageError(fs, err); err != nil {
		return nil, err
	}
	if f.ledger.FinishedLabel, err = ledger.ParseMode("finished-label", finishedLabel, ledger.FinishedLabels); err != nil {
		return nil, err
	}
	if f.ledger.Events, err = ledger.ParseMode("events", events, ledger.EventModes); err != nil {
		return nil, err
	}
	if f.ledger.AdmissionPatch, err = ledger.ParseMode("admission-patch", admissionPatch, ledger.AdmissionPatches); err != nil {
		return nil, err
	}
	if _, err = ledger.ParseMode("api-content-type", f.apiContentType, []string{"protobuf", "json"}); err != nil {
		return nil, err
	}
	if f.ledger.Workers < 1 {
		return nil, fmt.Errorf("--max-concurrent-writes: %d is less than 1", f.ledger.Workers)
	}
	if !(f.qps > 0) || f.burst < 1 {
		return nil, fmt.Errorf("--kube-api-qps %v, --kube-api-burst %d: both must be positive", f.qps, f.burst)
	}
	if !(f.finishedLabelRate > 0) {
		return nil, fmt.Errorf("--finished-label-rate: %v is not a positive number", f.finishedLabelRate)
	}
	f.ledger.FinishedLabelRate = f.finishedLabelRate
	if len(pos) > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", pos)
	}
	if f.leaderElect && !(f.retryPeriod > 0 && f.retryPeriod < f.renewDeadline && f.renewDeadline < f.leaseDuration) {
		return nil, fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold", f.retryPeriod, f.renewDeadline, f.leaseDuration)
	}
	return f, nil
}

func serve(args []string, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally serve: %v\n", err)
		return 2
	}
	log := zap.New(zap.UseFlagOptions(&f.zap))
	ctrl.SetLogger(log)
	ctx, draining := signalContext(f.shutdownDelay, log)
	if err := serveWith(ctx, f, log, draining); err != nil {
		// One plain line, as the other commands say theirs: a bad
		// kubeconfig or no cluster is the common case, and a stack
		// trace of main says nothing of it.
		fmt.Fprintf(stderr, "tally serve: %v\n", err)
		return 1
	}
	log.Info("tally stopped")
	return 0
}

// signalContext returns a context cancelled shutdownDelay after SIGTERM or
// SIGINT, and a flag that turns true at the signal, so readiness fails
// while in-flight admissions finish. A second signal exits at once.
func signalContext(delay time.Duration, log logr.Logger) (context.Context, *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	draining := &atomic.Bool{}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		draining.Store(true)
		log.Info("shutting down", "delay", delay.String())
		select {
		case <-time.After(delay):
		case <-ch:
			os.Exit(1)
		}
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx, draining
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

// watchConfig is the config of the informers' lists and watches, over
// connections of their own. On the one HTTP/2 connection that carries
// hundreds of admission writes a second, watch events wait behind the
// write responses, and the ledger would see finished Jobs, and so free
// quota, late. A Proxy function (the default one) makes client-go build
// the config a transport of its own. It speaks HTTP/1.1, a connection per
// watch: over HTTP/2 every event is copied from the connection's read
// loop to the watch's reader, and the reader answers every few kilobytes
// with a flow-control frame of its own, a write to the API server.
func watchConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Proxy = http.ProxyFromEnvironment
	c.NextProtos = []string{"http/1.1"}
	return c
}

func serveWith(ctx context.Context, f *serveFlags, log logr.Logger, draining *atomic.Bool) error {
	restCfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	restCfg.QPS, restCfg.Burst = float32(f.qps), f.burst
	if f.apiContentType == "json" {
		// With no content type set, controller-runtime's clients and
		// informers use protobuf for client-go's kinds, JSON for others.
		restCfg.ContentType = runtime.ContentTypeJSON
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}

	if f.certDir == "" {
		f.certDir = webhook.DefaultCertDir
	}
	watchCfg := watchConfig(restCfg)
	watchHTTP, err := rest.HTTPClientFor(watchCfg)
	if err != nil {
		return fmt.Errorf("watch client: %w", err)
	}
	var jobWatch *ledger.JobWatch
	if f.apiContentType != "json" {
		if jobWatch, err = ledger.NewJobWatch(watchCfg, watchHTTP, ledger.JobSelector(f.watchFinished)); err != nil {
			return err
		}
	}
	grace := 30 * time.Second
	var lease *ledger.Lease
	if f.leaderElect {
		if lease, err = ledger.NewLease(restCfg, f.namespace, f.renewDeadline); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(restCfg, manager.Options{
		Scheme:         scheme,
		MapperProvider: newMapper,
		Cache: cache.Options{HTTPClient: watchHTTP, ByObject: ledger.CacheOptions(f.namespace, f.configFile == "", f.watchFinished),
			DefaultTransform: cache.TransformStripManagedFields(), NewInformer: ledger.ResumingInformers(log.WithName("watch"), jobWatch)},
		Metrics:                             metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:              f.probeAddr,
		PprofBindAddress:                    f.pprofAddr,
		LeaderElection:                      f.leaderElect,
		LeaderElectionID:                    ledger.LeaseName,
		LeaderElectionNamespace:             f.namespace,
		LeaderElectionResourceLockInterface: lease,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &f.leaseDuration,
		RenewDeadline:                       &f.renewDeadline,
		RetryPeriod:                         &f.retryPeriod,
		GracefulShutdownTimeout:             &grace,
		WebhookServer:                       webhook.NewServer(ctrlwebhook.Options{Host: f.webhookHost, Port: f.webhookPort, CertDir: f.certDir}, log.WithName("webhook-server")),
		Logger:                              log,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	store := queues.NewStore(nil)
	ks := kinds.NewRegistry()
	ks.SetLookup(kinds.ReaderLookup(ctx, mgr.GetCache()))
	if f.configFile != "" {
		cfg, err := loadConfigFile(ctx, ks, f.configFile, mgr.GetRESTMapper(), log)
		if err != nil {
			return err
		}
		store.Set(cfg)
	}

	direct, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	users := []string{webhook.ServiceAccountUser(f.namespace), f.tallyUser}
	if f.tallyUser == "" {
		if users[1], err = webhook.WhoAmI(ctx, direct); err != nil {
			return fmt.Errorf("learning tally's own user name (or set --tally-user): %w", err)
		}
	}
	log.Info("only these users may un-suspend or re-pin managed Jobs", "users", users)
	if err := webhook.Setup(ctx, mgr, direct, webhook.Options{
		Store: store, Namespace: f.namespace, ConfigName: queues.ConfigName, Users: users,
		URL: f.webhookURL, CertDir: f.certDir, CertManager: f.certManager, Register: f.register, Kinds: ks,
	}, log); err != nil {
		return err
	}
	opts := f.ledger
	opts.Namespace, opts.Recount, opts.DashboardAddr = f.namespace, f.recount, f.dashboardAddr
	opts.Kinds = ks
	if lease != nil {
		opts.Held = lease.Held
	}
	if err := ledger.Setup(mgr, store, f.configFile == "", log, opts); err != nil {
		return err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	webhookStarted := mgr.GetWebhookServer().StartedChecker()
	if err := mgr.AddReadyzCheck("ready", func(req *http.Request) error {
		switch {
		case draining.Load():
			return errors.New("shutting down")
		case store.Load() == nil:
			return errors.New("no valid config loaded yet")
		}
		return webhookStarted(req)
	}); err != nil {
		return err
	}
	log.Info("starting tally", "namespace", f.namespace, "webhookPort", f.webhookPort, "leaderElect", f.leaderElect, "configFile", f.configFile)
	return mgr.Start(ctx)
}

// loadConfigFile accepts serve's --config (kinds.Accept) and declares its
// kinds in ks. Where the ConfigMap's loader keeps its last good config, a bad
// file stops tally from starting.
func loadConfigFile(ctx context.Context, ks *kinds.Registry, file string, mapper meta.RESTMapper, log logr.Logger) (*queues.Config, error) {
	acc := kinds.Accept(ctx, kinds.Files(file), kinds.API{Mapper: mapper})
	if len(acc.Errs) > 0 {
		return nil, fmt.Errorf("--config %s: %s", file, strings.Join(queues.FormatErrors(acc.Errs), "; "))
	}
	for _, w := range acc.Warnings {
		log.Info("config warning", "warning", w)
	}
	for _, u := range acc.Unserved {
		log.Info("declared workload kind not served by the API server; not queued", "workloadKind", u.Spec.Name, "reason", u.Err.Error())
	}
	ks.Declare(acc.Kinds)
	return acc.Config, nil
}
