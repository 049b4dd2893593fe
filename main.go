// Command tally gives Kubernetes batch Jobs fair, quota-based queueing with
// no CustomResourceDefinitions. See README.md.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	"sigs.k8s.io/yaml"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger"
	"tally.dev/tally/queues"
	"tally.dev/tally/webhook"
)

const usage = `tally gives Kubernetes batch Jobs fair, quota-based queueing, with no CRDs.

Usage:
  tally [serve] [flags]          run the webhooks and the ledger (the default)
  tally status [flags]           show each ClusterQueue's usage, quota and Jobs
  tally explain [flags] [KIND/]NAME | -f FILE
                                 say why a workload waits, where it stands and when it may start
  tally check-config FILE...     validate config documents offline
  tally help                     show this help

Run "tally serve --help", "tally status --help" or "tally explain --help" for their flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stderr)
	case "status":
		return status(args, stdout, stderr)
	case "explain":
		return explain(args, stdout, stderr)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tally: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// checkConfig validates config files offline and prints every error with
// its field path.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: tally check-config FILE...\n\nValidates ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass and WorkloadKind\ndocuments and prints every error with its field path. Exits 1 if there is any. The paths of a\nWorkloadKind are checked against its CRD's schema too when the API server ($KUBECONFIG, or\nin-cluster) can be reached.")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cfg, warnings, errs := queues.ParseFiles(args...)
	if cfg != nil {
		errs = kinds.CheckDeclared(cfg.WorkloadKinds)
		more, notes := checkKindSchemas(cfg.WorkloadKinds)
		errs, warnings = append(errs, more...), append(warnings, notes...)
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if len(errs) > 0 {
		for _, e := range queues.FormatErrors(errs) {
			fmt.Fprintln(stderr, e)
		}
		fmt.Fprintf(stderr, "%d error(s)\n", len(errs))
		return 1
	}
	fmt.Fprintf(stdout, "ok: %d ResourceFlavor(s), %d ClusterQueue(s), %d LocalQueue(s), %d WorkloadPriorityClass(es), %d WorkloadKind(s)\n",
		len(cfg.Flavors), len(cfg.ClusterQueues), len(cfg.LocalQueues), len(cfg.PriorityClasses), len(cfg.WorkloadKinds))
	return 0
}

// checkKindSchemas checks the declared kinds' paths against their CRDs'
// schemas when the API server ($KUBECONFIG, or in-cluster) can be
// reached; notes say what could not be checked.
func checkKindSchemas(specs []queues.WorkloadKind) (field.ErrorList, []string) {
	if len(specs) == 0 {
		return nil, nil
	}
	offline := func(why error) []string {
		return []string{fmt.Sprintf("WorkloadKind paths are checked for their syntax only, not against the CRDs: %v", why)}
	}
	restCfg, err := restConfig("")
	if err != nil {
		return nil, offline(err)
	}
	restCfg.Timeout = 10 * time.Second
	scheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, offline(err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(context.Background(), crds); err != nil {
		return nil, offline(err)
	}
	var errs field.ErrorList
	var notes []string
	for _, spec := range specs {
		i := slices.IndexFunc(crds.Items, func(crd apiextensionsv1.CustomResourceDefinition) bool {
			return crd.Spec.Group == spec.Group && crd.Spec.Names.Kind == spec.Kind
		})
		if i < 0 {
			notes = append(notes, fmt.Sprintf("WorkloadKind %q: no CRD of the API server serves %s %s; its paths are checked for their syntax only", spec.Name, spec.Group, spec.Kind))
			continue
		}
		crd := &crds.Items[i]
		v := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == spec.Version })
		if v < 0 {
			errs = append(errs, field.NotFound(field.NewPath(fmt.Sprintf("WorkloadKind %q", spec.Name)).Child("spec", "version"), spec.Version))
			continue
		}
		if s := crd.Spec.Versions[v].Schema; s != nil && s.OpenAPIV3Schema != nil {
			errs = append(errs, kinds.CheckSchema(spec, s.OpenAPIV3Schema)...)
		}
	}
	return errs, notes
}

// loadConfig reads the config in force from file, or else from the
// ConfigMap in tally's namespace, and declares its kinds in the registry
// it returns.
func loadConfig(ctx context.Context, c client.Reader, namespace, file string) (*queues.Config, *kinds.Registry, error) {
	var (
		cfg  *queues.Config
		errs field.ErrorList
	)
	if file != "" {
		cfg, _, errs = queues.ParseFiles(file)
	} else {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ledger.ConfigName}, cm); err != nil {
			return nil, nil, fmt.Errorf("reading the config: %w", err)
		}
		cfg, _, errs = queues.Parse([]byte(cm.Data[queues.ConfigKey]))
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("the config does not validate (tally keeps its last good one in force, which this command cannot see): %s",
			strings.Join(queues.FormatErrors(errs), "; "))
	}
	// The client maps each kind to its resource itself.
	ks := kinds.NewRegistry()
	if err := ledger.DeclareKinds(ks, cfg, nil, logr.Discard()); err != nil {
		return nil, nil, fmt.Errorf("the config's WorkloadKinds: %w", err)
	}
	return cfg, ks, nil
}

// listWorkloads lists the managed workloads of every kind of ks, as
// the ledger counts them (each stripped to what the books need: a cluster
// may hold 100k Jobs). A kind whose CRD is not installed has none.
func listWorkloads(ctx context.Context, ks *kinds.Registry, c client.Reader, opts ...client.ListOption) ([]*kinds.Object, error) {
	var out []*kinds.Object
	for _, k := range ks.All() {
		list := k.NewList()
		for {
			err := c.List(ctx, list, append([]client.ListOption{client.HasLabels{queues.LabelQueue}, client.Limit(1000), client.Continue(list.GetContinue())}, opts...)...)
			if meta.IsNoMatchError(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", k.GVK().Kind, err)
			}
			if err := meta.EachListItem(list, func(obj runtime.Object) error {
				_, _ = ledger.StripJob(obj)
				if o, ok := ks.Of(obj); ok {
					out = append(out, o)
				}
				return nil
			}); err != nil {
				return nil, err
			}
			if list.GetContinue() == "" {
				break
			}
		}
	}
	return out, nil
}

// explain prints where one workload stands (see ledger.Explain).
func explain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then the in-cluster config.")
	ns := fs.String("n", "", "The workload's namespace. Defaults to the kubeconfig context's.")
	tallyNS := fs.String("tally-namespace", "tally-system", "tally's namespace, which holds the config ConfigMap "+ledger.ConfigName+".")
	configFile := fs.String("config", "", "Read the config from this file instead of the ConfigMap.")
	file := fs.String("f", "", "Explain the workload in this YAML or JSON file, as if it were submitted now.")
	output := fs.String("o", "text", "Output format: text or json.")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: tally explain [flags] [KIND/]NAME
       tally explain [flags] -f FILE

Says where a workload stands, rebuilt from the API server with the ledger's own rules:
its state, ClusterQueue and cohort, its position in the queue and in its namespace, what
it needs against what is free, the workloads ahead of it and the running ones that must
finish first, whom it would preempt or who preempted it, and when it may start (replayed
from the run times of finished workloads). KIND is Job (the default), or any kind tally
queues (pytorchjob, jobset, rayjob, mpijob, a declared kind). With -f, for a workload not
submitted yet: the queue it would go to, whether it can ever fit, its flavor and its wait.

It reads the config ConfigMap, the workload, its Events, and the queued workloads of every
namespace; a user who may list workloads only in their own namespace gets counts, not
names, for the others (see the README for the RBAC).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if (*file == "") == (fs.NArg() != 1) || fs.NArg() > 1 || (*output != "text" && *output != "json") {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "tally explain: %v\n", err)
		return 1
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = *kubeconfig
	kcfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{})
	if *ns == "" {
		if n, _, err := kcfg.Namespace(); err == nil {
			*ns = n
		}
	}
	restCfg, err := restConfig(*kubeconfig)
	if err != nil {
		return fail(fmt.Errorf("kubeconfig: %w", err))
	}
	c, err := client.New(restCfg, client.Options{})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	x, err := explainWith(ctx, c, explainRequest{namespace: *ns, tallyNamespace: *tallyNS, configFile: *configFile, file: *file, name: fs.Arg(0)}, time.Now())
	if err != nil {
		return fail(err)
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(x)
	} else {
		err = ledger.WriteExplanation(stdout, x)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// explainRequest is what tally explain was asked.
type explainRequest struct {
	namespace, tallyNamespace, configFile string
	// file names a workload not submitted yet; else name is [KIND/]NAME.
	file, name string
}

func explainWith(ctx context.Context, c client.Reader, req explainRequest, now time.Time) (ledger.Explanation, error) {
	cfg, ks, err := loadConfig(ctx, c, req.tallyNamespace, req.configFile)
	if err != nil {
		return ledger.Explanation{}, err
	}
	in := ledger.ExplainInput{Config: cfg, Now: now, AllNamespaces: true, PriorityClasses: map[string]int32{}}
	if req.file != "" {
		if in.Target, err = readWorkloadFile(ks, req.file, req.namespace); err != nil {
			return ledger.Explanation{}, err
		}
		in.New = true
		meta := in.Target.Meta
		nsObj := &corev1.Namespace{}
		// A user who cannot read namespaces is routed by labels and
		// LocalQueues alone.
		_ = c.Get(ctx, client.ObjectKey{Name: meta.Namespace}, nsObj)
		if in.Queue, err = cfg.Route(meta.Namespace, nsObj.Annotations[queues.AnnotationNamespaceQueue], meta.Labels); err != nil {
			return ledger.Explanation{}, err
		}
		if in.Queue == "" {
			return ledger.Explanation{Workload: in.Target.Describe(), State: "unmanaged",
				Notes: []string{"it would not be queued: it names no LocalQueue or ClusterQueue, and namespace " + meta.Namespace + " is not bound to one (or you cannot read it)"}}, nil
		}
	} else {
		k, name, err := kindAndName(ks, req.name)
		if err != nil {
			return ledger.Explanation{}, err
		}
		obj := k.New()
		if err := c.Get(ctx, client.ObjectKey{Namespace: req.namespace, Name: name}, obj); err != nil {
			return ledger.Explanation{}, fmt.Errorf("reading %s %s/%s: %w", k.GVK().Kind, req.namespace, name, err)
		}
		_, _ = ledger.StripJob(obj)
		var ok bool
		if in.Target, ok = ks.Of(obj); !ok {
			return ledger.Explanation{}, fmt.Errorf("%s %s/%s: not a workload tally can read", k.GVK().Kind, req.namespace, name)
		}
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(req.namespace), client.MatchingFields{"involvedObject.uid": string(in.Target.Meta.UID)}); err == nil {
			in.Events = events.Items
			slices.SortFunc(in.Events, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		}
	}
	if lq := in.Target.Meta.Labels[queues.LabelKueueQueueName]; lq != "" {
		in.LocalQueue = in.Target.Meta.Namespace + "/" + lq
	}
	in.Workloads, err = listWorkloads(ctx, ks, c)
	if apierrors.IsForbidden(err) {
		in.AllNamespaces = false
		in.Workloads, err = listWorkloads(ctx, ks, c, client.InNamespace(in.Target.Meta.Namespace))
	}
	if err != nil {
		return ledger.Explanation{}, err
	}
	pcs := &schedulingv1.PriorityClassList{}
	if err := c.List(ctx, pcs); err == nil {
		for _, pc := range pcs.Items {
			in.PriorityClasses[pc.Name] = pc.Value
		}
	}
	return ledger.Explain(in), nil
}

// eventTime is when an Event last happened.
func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// kindAndName reads [KIND/]NAME: KIND is the name or plural resource of
// a kind of ks, in any case; Job when left out.
func kindAndName(ks *kinds.Registry, s string) (kinds.Kind, string, error) {
	kind, name, found := strings.Cut(s, "/")
	if !found {
		return kinds.Job{}, s, nil
	}
	var names []string
	for _, k := range ks.All() {
		if strings.EqualFold(kind, k.GVK().Kind) || strings.EqualFold(kind, k.Resource()) {
			return k, name, nil
		}
		names = append(names, strings.ToLower(k.GVK().Kind))
	}
	return nil, "", fmt.Errorf("unknown kind %q: tally queues %s", kind, strings.Join(names, ", "))
}

// readWorkloadFile reads one workload of a kind of ks from a YAML or JSON
// file, in namespace ns unless it names one.
func readWorkloadFile(ks *kinds.Registry, path, ns string) (*kinds.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(cmp.Or(ns, "default"))
	}
	if ts := u.GetCreationTimestamp(); ts.IsZero() {
		u.SetCreationTimestamp(metav1.Now())
	}
	k := ks.For(u.GroupVersionKind())
	if k == nil {
		return nil, fmt.Errorf("%s: %s is not a kind tally queues", path, u.GroupVersionKind())
	}
	obj := k.New()
	if _, typed := obj.(*batchv1.Job); typed {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		obj = u
	}
	o, err := k.Read(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// status prints every ClusterQueue's books, rebuilt from the API server
// as the ledger builds them.
func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then the in-cluster config.")
	namespace := fs.String("namespace", "tally-system", "tally's namespace, which holds the config ConfigMap "+ledger.ConfigName+".")
	configFile := fs.String("config", "", "Read the config from this file instead of the ConfigMap.")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: tally status [flags]\n\nShows each ClusterQueue's pending, admitted and inadmissible Jobs and, per flavor and\nresource, its usage, nominal quota and borrowing (and its fair-sharing share), rebuilt from\nthe Jobs on the API server as tally's ledger counts them.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tally status: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	restCfg, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "tally status: kubeconfig: %v\n", err)
		return 1
	}
	c, err := client.New(restCfg, client.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "tally status: %v\n", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := statusWith(ctx, c, *namespace, *configFile, stdout); err != nil {
		fmt.Fprintf(stderr, "tally status: %v\n", err)
		return 1
	}
	return 0
}

func statusWith(ctx context.Context, c client.Reader, namespace, configFile string, out io.Writer) error {
	cfg, ks, err := loadConfig(ctx, c, namespace, configFile)
	if err != nil {
		return err
	}
	jobs, err := listWorkloads(ctx, ks, c)
	if err != nil {
		return err
	}
	return ledger.WriteStatus(out, cfg, ledger.Status(cfg, jobs))
}

type serveFlags struct {
	kubeconfig, configFile, namespace  string
	tallyUser                          string
	webhookHost, certDir, webhookURL   string
	webhookPort                        int
	register, certManager, leaderElect bool
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
	fs.Float64Var(&f.qps, "kube-api-qps", 500, "The most requests a second tally sends to the API server (client-side rate limit; Events are paced apart by client-go).")
	fs.IntVar(&f.burst, "kube-api-burst", 1000, "The most requests tally sends in a burst above --kube-api-qps.")
	var finishedLabel, events, admissionPatch string
	fs.StringVar(&finishedLabel, "finished-label", string(ledger.FinishedLabelEager), "How the ledger writes the label tally.dev/state=finished: eager (when the workload finishes), lazy (coalesced, at most --finished-label-rate a second, and only while no admission or preemption write is in flight), or off (never: a finished workload keeps its label; its status says it finished).")
	fs.Float64Var(&f.finishedLabelRate, "finished-label-rate", 100, "With --finished-label=lazy, the most finished labels written a second.")
	fs.StringVar(&events, "events", string(ledger.EventsAll), "Which Events the ledger records: all, or minimal (no Queued or Pending Event for a workload admitted by the first pass that sees it; every other Event is recorded).")
	fs.StringVar(&admissionPatch, "admission-patch", string(ledger.AdmissionPatchMerge), "How the admission write is encoded, one write guarded by resourceVersion in each: merge (JSON merge patch), json (JSON patch), or apply (server-side apply, forced; it cannot delete fields).")
	fs.StringVar(&f.apiContentType, "api-content-type", "protobuf", "The encoding of tally's API requests, responses and watches: protobuf (for built-in kinds, custom resources in JSON: controller-runtime's choice) or json (for all, but the metadata-only answers to its patches, always protobuf).")
	f.zap.Development = false
	f.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
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
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
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
		log.Error(err, "tally stopped")
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

	store := queues.NewStore(nil)
	if f.configFile != "" {
		cfg, warnings, errs := queues.ParseFiles(f.configFile)
		if len(errs) > 0 {
			return fmt.Errorf("--config %s: %s", f.configFile, strings.Join(queues.FormatErrors(errs), "; "))
		}
		for _, w := range warnings {
			log.Info("config warning", "warning", w)
		}
		store.Set(cfg)
	}

	if f.certDir == "" {
		f.certDir = ctrlwebhook.Options{}.CertDir
	}
	// The informers watch over a connection of their own. On the one
	// HTTP/2 connection that carries hundreds of admission writes a second,
	// watch events wait behind the write responses, and the ledger would
	// see finished Jobs, and so free quota, late. A Proxy function (the
	// default one) makes client-go build this config a transport of its own.
	watchCfg := rest.CopyConfig(restCfg)
	watchCfg.Proxy = http.ProxyFromEnvironment
	watchHTTP, err := rest.HTTPClientFor(watchCfg)
	if err != nil {
		return fmt.Errorf("watch client: %w", err)
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
		Cache: cache.Options{HTTPClient: watchHTTP, ByObject: ledger.CacheOptions(f.namespace, f.configFile == ""),
			DefaultTransform: cache.TransformStripManagedFields()},
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
		WebhookServer:                       ctrlwebhook.NewServer(ctrlwebhook.Options{Host: f.webhookHost, Port: f.webhookPort, CertDir: f.certDir}),
		Logger:                              log,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ks := kinds.NewRegistry()
	if cfg := store.Load(); cfg != nil {
		if err := ledger.DeclareKinds(ks, cfg, mgr.GetRESTMapper(), log); err != nil {
			return fmt.Errorf("--config %s: %w", f.configFile, err)
		}
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
		Store: store, Namespace: f.namespace, ConfigName: ledger.ConfigName, Users: users,
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
