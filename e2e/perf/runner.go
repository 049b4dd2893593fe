package perf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"tally.dev/tally/e2e/perf/scenario"
)

// Options configure a measured run.
type Options struct {
	Plan *scenario.Plan
	// Assets holds etcd and kube-apiserver (KUBEBUILDER_ASSETS).
	Assets string
	// TallyBin is the tally binary (TALLY_BIN).
	TallyBin string
	// Dir receives the kubeconfigs, certificates, tally's log and the
	// audit log. It is created if needed.
	Dir string
	// TallyArgs are added to `tally serve`'s command line, and TallyEnv
	// (KEY=VALUE) to its environment, such as GOMAXPROCS or GOGC.
	TallyArgs, TallyEnv []string
	// Timeout bounds the run from the first creation to the last
	// completion.
	Timeout time.Duration
	// Workers is the size of the create pool; zero picks one from the
	// largest burst of simultaneous arrivals.
	Workers int
	// Progress, when set, receives a line every few seconds.
	Progress io.Writer
	// Replay replaces tally's ledger with a replay of the ideal
	// scheduler's decisions (see replay.go): tally still serves its
	// webhooks, but never leads.
	Replay bool
	// HeldReplay makes the replay reference's scheduler hold quota until each Job's
	// completion is written, and never preempt (see replay.go). It implies
	// Replay.
	HeldReplay bool
	// CreationPolicy replaces tally's Job webhook with a
	// MutatingAdmissionPolicy that makes the same changes (see policy.go).
	CreationPolicy bool
	// Pods makes the runner play the job controller's pods too: it
	// creates each admitted Job's pod (through tally's pod gate), marks
	// it succeeded before it completes the Job, and deletes it when the
	// Job is preempted (see tracker.startPod).
	Pods bool
	// ExplainEvery, when set, asks `tally explain` this often during the
	// run when a few waiting Jobs are expected to start, for the
	// estimate's error (Summary.ExplainEstimate).
	ExplainEvery time.Duration
	// APIServerProfile, when set, is the prefix of the API server's CPU
	// profiles, 10 s each over the window, and of its allocations
	// (CPUProfiles); Result.APIServerProfiles lists them.
	APIServerProfile string
	// APIServerLogLevel, when positive, keeps the API server's log at that
	// verbosity in Dir/apiserver.log (at 1 it names each watch it cuts off
	// for falling behind, and how full its buffers were).
	APIServerLogLevel int
	// During, when set, runs from the first creation on; its context
	// ends with the measured window, and the run waits for it to return
	// and returns its error.
	During func(ctx context.Context) error
}

// Result is what a run measured. Times are from Start, the nominal
// creation time of the first Jobs.
type Result struct {
	Start time.Time
	// Outcomes are parallel to the plan's Jobs.
	Outcomes []scenario.Outcome
	// CreateLateness is, for each Job created, how long after its nominal
	// time the create was sent.
	CreateLateness []time.Duration
	// Admissions and Preemptions count admissions and cut-short runs;
	// Placed the admissions seen with tally's topology placement
	// (annotationTopology) on the Job.
	Admissions, Preemptions, Placed int
	// CreateRetries and CompleteRetries count failed creates and status
	// writes that were tried again.
	CreateRetries, CompleteRetries int
	// LabelledFinished counts Jobs that tally labelled finished by End,
	// which is the last completion or labelGrace after it.
	LabelledFinished int
	// End closes the measured window: after the last completion, once
	// tally has labelled every Job finished (or a grace period passed;
	// at once with --finished-label=off among the tally arguments).
	End time.Time
	// TallyCPU is the CPU time tally used in the window, TallyCPUTotal
	// over its whole life, including start-up.
	TallyCPU, TallyCPUTotal time.Duration
	// TallyPeakRSS is tally's peak resident set size, in bytes.
	TallyPeakRSS int64
	// APIServerCPU is the CPU time the API server used in the window, and
	// APIServerRequests the requests it served there, everyone's, by
	// "VERB resource [subresource]" (requestCounts).
	APIServerCPU      time.Duration
	APIServerRequests map[string]int
	// Sightings are what the runner's watch saw of each Job (see
	// admissionTimes).
	Sightings []sighting
	// ViewDelays are, for each Job whose first admission both the audit
	// log and the runner's watch saw, how long after the API server
	// answered that write the watch saw it.
	ViewDelays []time.Duration
	// TallyFlags is tally's command line after `serve`.
	TallyFlags []string
	// Requests counts tally's API requests in the window.
	Requests Requests
	// TallyMetrics are tally's own metrics over the window (differences).
	TallyMetrics metrics
	// WebhookSeconds is the API server's view of the Job webhooks: calls
	// and total seconds, by webhook name.
	WebhookCalls, WebhookSeconds map[string]float64
	// WatchersCut counts the Job watches the API server closed in the
	// window because their watcher fell too far behind.
	WatchersCut int
	// Pods counts the pods the runner made (Options.Pods), PodRetries
	// its pod writes that were tried again.
	Pods, PodRetries int
	// Replay tells a replay run; ReplayFailures counts its decisions whose
	// write failed for good.
	Replay, HeldReplay, CreationPolicy bool
	ReplayFailures                     int
	// APIServerProfiles are the CPU profiles Options.APIServerProfile
	// asked for.
	APIServerProfiles []string
	// estimates are tally explain's answers (Options.ExplainEvery).
	estimates []estimateSample
}

// Run starts a control plane and tally, runs the plan's Jobs and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	o.Replay = o.Replay || o.HeldReplay
	env, err := startControlPlane(o, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = env.Stop()
		if log, ok := env.ControlPlane.GetAPIServer().Out.(io.Closer); ok {
			_ = log.Close() // Options.APIServerLogLevel's file
		}
	}()
	s, err := setUp(ctx, env, o)
	if s != nil {
		defer func() { _ = s.stopTally() }()
	}
	if err != nil {
		return nil, err
	}
	res, runErr := s.measure(ctx, o)
	if res == nil {
		return nil, runErr
	}
	if err := s.collect(ctx, o, res); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return res, fmt.Errorf("%w (tally's log: %s)", runErr, s.tally.logPath)
	}
	return res, nil
}

// session is a control plane with tally running and the namespaces bound.
type session struct {
	// cs creates the Jobs, as their users would; ctl completes them and
	// watch follows them, as the job controller would. Each has a
	// connection of its own: a storm of creates (each waiting on tally's
	// webhook) or of completions must not hold up the watch that sees
	// admissions.
	cs         kubernetes.Interface
	ctl        kubernetes.Interface
	watch      kubernetes.Interface
	tally      *process
	kubeconfig string // tally's
	replay     *replay
	stopped    bool
	rusage     *syscall.Rusage
	tr         *tracker
	// Figures read at the start of the measured window.
	cpuBefore time.Duration
	// apiBefore are the API server's metrics at the window's start.
	apiBefore     metrics
	metricsBefore metrics
}

func setUp(ctx context.Context, env *envtest.Environment, o Options) (*session, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "tally-bench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctlCfg := rest.CopyConfig(cfg)
	ctlCfg.UserAgent = "tally-bench-controller"
	// A Proxy function makes client-go give this config a transport of its
	// own rather than share cs's cached one (and its HTTP/2 connection).
	ctlCfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	ctl, err := kubernetes.NewForConfig(ctlCfg)
	if err != nil {
		return nil, err
	}
	// The runner's Job watch has a connection of its own (ctlCfg's Proxy
	// function comes with the copy), in protobuf, as the job controller's
	// informers do.
	watchCfg := rest.CopyConfig(ctlCfg)
	watchCfg.ContentType = runtime.ContentTypeProtobuf
	watchCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	watch, err := kubernetes.NewForConfig(watchCfg)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := tallyKubeconfig(env, o.Dir)
	if err != nil {
		return nil, err
	}
	const tallyNS = "tally-system"
	if t := o.Plan.Topology; t != nil {
		// The nodes exist before tally starts, as before Kueue's runner
		// makes its Workloads.
		if err := createNodes(ctx, cs, t); err != nil {
			return nil, err
		}
	}
	if err := applyConfig(ctx, cs, tallyNS, o.Plan.Config()); err != nil {
		return nil, err
	}
	if err := warmWatchCache(ctx, cs); err != nil {
		return nil, err
	}
	args := o.TallyArgs
	if o.Replay {
		if err := holdLease(ctx, cs, tallyNS); err != nil {
			return nil, err
		}
		args = append(slices.Clip(args), "--leader-elect")
	}
	tally, err := startTally(o.TallyBin, kubeconfig, tallyNS, o.Dir, args, o.TallyEnv)
	if err != nil {
		return nil, err
	}
	s := &session{cs: cs, ctl: ctl, watch: watch, tally: tally, kubeconfig: kubeconfig}
	if err := tally.waitReady(ctx, 2*time.Minute); err != nil {
		return s, err
	}
	if err := bindNamespaces(ctx, cs, o.Plan); err != nil {
		return s, fmt.Errorf("%w (tally's log: %s)", err, tally.logPath)
	}
	if o.CreationPolicy {
		if err := useCreationPolicy(ctx, cs, o.Plan.Queues[0]); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *session) stopTally() error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	var err error
	s.rusage, err = s.tally.stop(30 * time.Second)
	return err
}

// measure creates the Jobs open-loop and plays the job controller until
// every Job finished (or the run fails), then waits for tally's last
// label writes. The Result it returns holds the window only.
func (s *session) measure(ctx context.Context, o Options) (*Result, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now().Add(500 * time.Millisecond)
	s.tr = newTracker(runCtx, s.cs, s.ctl, o.Plan, start)
	s.tr.pods = o.Pods
	defer s.tr.stop()
	if err := watchJobs(runCtx, s.watch, s.tr); err != nil {
		return nil, err
	}
	var replayDone sync.WaitGroup
	if o.Replay {
		var err error
		if s.replay, err = newReplay(s.kubeconfig, o.Plan, start, o.HeldReplay); err != nil {
			return nil, err
		}
		s.tr.onCreated = s.replay.arrived
		if o.HeldReplay {
			s.tr.onFinished = s.replay.finished
		}
		replayDone.Add(1)
		go func() {
			defer replayDone.Done()
			s.replay.run(runCtx, replayLanes)
		}()
	}
	defer func() {
		cancel()
		replayDone.Wait()
	}()
	var err error
	if s.cpuBefore, err = s.tally.cpu(); err != nil {
		return nil, err
	}
	if s.metricsBefore, err = s.tally.scrape(ctx); err != nil {
		return nil, err
	}
	if s.apiBefore, err = apiServerMetrics(ctx, s.cs, ""); err != nil {
		return nil, err
	}
	workers := o.Workers
	if workers <= 0 {
		workers = min(max(4*largestBurst(o.Plan), 256), 2048)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.tr.dispatch(runCtx, workers, o.Plan.Classes)
	}()
	duringCtx, stopDuring := context.WithCancel(runCtx)
	defer stopDuring()
	during := make(chan error, 1)
	if o.During != nil {
		go func() { during <- o.During(duringCtx) }()
	} else {
		during <- nil
	}

	var sampled sync.WaitGroup
	var estimates []estimateSample
	if o.ExplainEvery > 0 && !o.Replay {
		sampled.Add(1)
		go func() {
			defer sampled.Done()
			estimates = sampleEstimates(duringCtx, o.TallyBin, s.kubeconfig, s.tr, o.ExplainEvery, explainPerTick)
		}()
	}

	var apiProfiles []string
	var apiProfileErr error
	if o.APIServerProfile != "" {
		sampled.Add(1)
		go func() {
			defer sampled.Done()
			apiProfiles, apiProfileErr = CPUProfiles(duringCtx, restFetch(s.cs.CoreV1().RESTClient()), 10, o.APIServerProfile)
		}()
	}

	res := &Result{Start: start}
	runErr := s.tr.wait(runCtx, s.tally, o.Timeout, o.Progress, start)
	if runErr == nil && !o.Replay && labelsFinished(o.TallyArgs) {
		// tally labels each finished Job after the fact; those writes
		// belong to the run. Wait for them, but not for ever.
		select {
		case <-s.tr.allLabelled:
		case <-time.After(labelGrace):
		case <-runCtx.Done():
		}
	}
	res.End = time.Now()
	stopDuring()
	sampled.Wait()
	res.estimates, res.APIServerProfiles = estimates, apiProfiles
	if apiProfileErr != nil && runErr == nil {
		runErr = fmt.Errorf("the API server's profile: %w", apiProfileErr)
	}
	if err := <-during; err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		dumpUnfinished(ctx, s.cs, s.tr, filepath.Join(o.Dir, "unfinished.txt"))
	}
	cancel()
	wg.Wait()
	return res, runErr
}

// collect reads what tally used and did in the window, and stops it.
func (s *session) collect(ctx context.Context, o Options, res *Result) error {
	if cpu, err := s.tally.cpu(); err == nil {
		res.TallyCPU = cpu - s.cpuBefore
	}
	res.TallyPeakRSS, _ = s.tally.peakRSS()
	if m, err := s.tally.scrape(ctx); err == nil {
		res.TallyMetrics = m.minus(s.metricsBefore)
	}
	if m, err := apiServerMetrics(ctx, s.cs, filepath.Join(o.Dir, "apiserver.metrics")); err == nil {
		d := m.minus(s.apiBefore)
		res.APIServerCPU = time.Duration(d.sum("process_cpu_seconds_total", nil) * float64(time.Second))
		res.WebhookCalls = d.byLabel("apiserver_admission_webhook_admission_duration_seconds_count", "name")
		res.WebhookSeconds = d.byLabel("apiserver_admission_webhook_admission_duration_seconds_sum", "name")
		res.WatchersCut = int(d.sum("apiserver_terminated_watchers_total", map[string]string{"resource": "jobs"}))
		res.APIServerRequests = requestCounts(d)
	}
	stopErr := s.stopTally()
	if ru := s.rusage; ru != nil {
		res.TallyCPUTotal = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		res.TallyPeakRSS = max(res.TallyPeakRSS, s.tally.peak)
	}
	tr := s.tr
	res.Outcomes, res.CreateLateness = tr.outcomes(res.Start)
	res.Admissions, res.Preemptions, res.Placed = int(tr.admissions.Load()), int(tr.preemptions.Load()), int(tr.placed.Load())
	res.CreateRetries, res.CompleteRetries = int(tr.createRetries.Load()), int(tr.finishRetries.Load())
	res.LabelledFinished = int(tr.labelled.Load())
	res.Pods, res.PodRetries = int(tr.podsMade.Load()), int(tr.podRetries.Load())
	res.Replay, res.HeldReplay, res.CreationPolicy = o.Replay, o.HeldReplay, o.CreationPolicy
	if s.replay != nil {
		s.replay.mu.Lock()
		res.ReplayFailures = s.replay.failed
		s.replay.mu.Unlock()
	}
	res.Sightings = tr.sightings()
	res.TallyFlags = s.tally.cmd.Args[2:]
	reqs, err := countRequests(filepath.Join(o.Dir, "audit.log"), tallyUser, res.Start, res.End)
	res.Requests = reqs
	res.ViewDelays = tr.viewDelays(reqs.FirstAdmitted)
	return errors.Join(stopErr, err)
}

// explainPerTick is how many waiting Jobs each round of
// Options.ExplainEvery asks about.
const explainPerTick = 3

// replayLanes is how many writes a replay run has in flight at most.
const replayLanes = 128

// labelGrace is how long a run waits, after the last completion, for
// tally to label every Job finished. The labels share tally's client
// budget with its admission writes, so at 50,000 Jobs tens of thousands
// are still due when the last Job completes, a minute and more of writes
// at 500 a second; the window holds them all.
const labelGrace = 5 * time.Minute

// labelsFinished says whether tally, run with the extra arguments args,
// labels finished Jobs: not with --finished-label=off (the last one
// given counts, as for tally's flags).
func labelsFinished(args []string) bool {
	mode := ""
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "finished-label" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			v = args[i+1]
		}
		mode = v
	}
	return mode != "off"
}

// envtestLog gives envtest (controller-runtime's logger) somewhere to
// write: its warnings and errors go to the runner's standard error, its
// chatter nowhere. Without one, controller-runtime prints a stack trace
// to say it was never set.
var envtestLog sync.Once

// APIServerFlags are the kube-apiserver flags of every run, tally's and
// Kueue's alike, besides envtest's own and the audit log's: enough
// requests in flight not to throttle the run.
var APIServerFlags = [][2]string{
	{"max-requests-inflight", "5000"},
	{"max-mutating-requests-inflight", "2500"},
}

// APIServerFlagsString is APIServerFlags as a command line.
func APIServerFlagsString() string {
	var b strings.Builder
	for i, f := range APIServerFlags {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "--%s=%s", f[0], f[1])
	}
	return b.String() + " --audit-log-path (the schedulers' users, Metadata)"
}

// startControlPlane starts etcd and a kube-apiserver with APIServerFlags
// that audits the schedulers' requests, with the CRDs in crds (none: "").
func startControlPlane(o Options, crds string) (*envtest.Environment, error) {
	policy := filepath.Join(o.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	auditLog := filepath.Join(o.Dir, "audit.log")
	_ = os.Remove(auditLog)
	envtestLog.Do(func() {
		ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	})
	env := &envtest.Environment{BinaryAssetsDirectory: o.Assets}
	if crds != "" {
		env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = []string{crds}, true
	}
	for _, f := range APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(f[0], f[1])
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog).
		Set("audit-log-format", "json")
	if o.APIServerLogLevel > 0 {
		f, err := os.Create(filepath.Join(o.Dir, "apiserver.log"))
		if err != nil {
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Configure().Set("v", strconv.Itoa(o.APIServerLogLevel))
		env.ControlPlane.GetAPIServer().Out, env.ControlPlane.GetAPIServer().Err = f, f
	}
	if _, err := env.Start(); err != nil {
		_ = env.Stop() // a failed Start may have started the control plane
		return nil, fmt.Errorf("control plane: %w", err)
	}
	return env, nil
}

// tallyKubeconfig writes a kubeconfig for tally's own user, a cluster
// admin whose requests the audit log records.
func tallyKubeconfig(env *envtest.Environment, dir string) (string, error) {
	u, err := env.AddUser(envtest.User{Name: tallyUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "tally.kubeconfig")
	return path, os.WriteFile(path, b, 0o600)
}

func applyConfig(ctx context.Context, cs kubernetes.Interface, ns, docs string) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: configMapName}, Data: map[string]string{configKey: docs}}
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// bindNamespaces creates one namespace per ClusterQueue, bound to it, and
// waits until Jobs created there go through tally's webhook: a dry-run Job
// comes back suspended and pending.
func bindNamespaces(ctx context.Context, cs kubernetes.Interface, p *scenario.Plan) error {
	sem := make(chan struct{}, 32)
	errs := make([]error, len(p.Queues))
	var wg sync.WaitGroup
	for i, q := range p.Queues {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = bindNamespace(ctx, cs, q)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func bindNamespace(ctx context.Context, cs kubernetes.Interface, q scenario.ClusterQueue) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: q.Namespace, Annotations: map[string]string{annotationQueue: q.Name}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The probe names no WorkloadPriorityClass: the webhook denies one
	// the config does not define.
	probe := newJob(&scenario.Job{Namespace: q.Namespace, Name: "webhook-probe", CPUMilli: 1}, scenario.Class{Name: "probe"})
	delete(probe.Labels, labelPriorityClass)
	last := ""
	err := poll(ctx, 100*time.Millisecond, time.Minute, func() (bool, error) {
		got, err := cs.BatchV1().Jobs(q.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if got.Spec.Suspend == nil || !*got.Spec.Suspend || got.Labels[labelState] != statePending || got.Labels[labelQueue] != q.Name {
			last = fmt.Sprintf("suspend=%v labels=%v", got.Spec.Suspend, got.Labels)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s: Jobs do not reach tally's webhook (last: %s): %w", q.Namespace, last, err)
	}
	return nil
}

// watchJobs feeds every Job update to the tracker, through an informer that
// keeps only what the tracker reads.
func watchJobs(ctx context.Context, cs kubernetes.Interface, tr *tracker) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripJob))
	inf := f.Batch().V1().Jobs().Informer()
	handle := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			tr.observe(j)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n any) { handle(n) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	return nil
}

// stripJob keeps what the tracker reads of a Job: its name, UID (its
// pod's owner), version, generation (which tells a preemption from
// another write when a completion conflicts), labels, tally's topology
// placement, suspension, completion time, and where its pod template
// places its pods (tally's pod gate lets a pod of an admitted Job run
// only on its flavor's nodes).
func stripJob(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name, UID: j.UID, ResourceVersion: j.ResourceVersion, Generation: j.Generation, Labels: j.Labels,
			Annotations: topologyOnly(j.Annotations)},
		Spec: batchv1.JobSpec{Suspend: j.Spec.Suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: j.Spec.Template.Spec.NodeSelector, Affinity: j.Spec.Template.Spec.Affinity, Tolerations: j.Spec.Template.Spec.Tolerations}}},
		Status: batchv1.JobStatus{CompletionTime: j.Status.CompletionTime},
	}, nil
}

// topologyOnly keeps tally's topology placement of a Job's annotations.
func topologyOnly(a map[string]string) map[string]string {
	if v, ok := a[annotationTopology]; ok {
		return map[string]string{annotationTopology: v}
	}
	return nil
}

// wait blocks until every Job finished, tally exits, the timeout passes or
// an error stops the run, reporting progress meanwhile.
func (t *tracker) wait(ctx context.Context, tally *process, timeout time.Duration, progress io.Writer, start time.Time) error {
	deadline := time.NewTimer(time.Until(start) + timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	report := func() {
		if progress != nil {
			fmt.Fprintf(progress, "  %5.0fs  created %d/%d  admitted %d  finished %d  preempted %d\n",
				time.Since(start).Seconds(), t.created.Load(), len(t.list), t.admitted.Load(), t.finished.Load(), t.preemptions.Load())
		}
	}
	for {
		if err := t.firstErr(); err != nil {
			return err
		}
		select {
		case <-t.allFinished:
			report()
			return t.firstErr()
		case <-tally.exited:
			return errors.New("tally exited during the run")
		case <-deadline.C:
			report()
			return fmt.Errorf("timed out after %s: %d of %d Jobs finished", timeout, t.finished.Load(), len(t.list))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			report()
		}
	}
}

// largestBurst is the most Jobs due at the same instant.
func largestBurst(p *scenario.Plan) int {
	most, run := 0, 0
	for i, j := range p.Jobs {
		if i > 0 && j.Arrival == p.Jobs[i-1].Arrival {
			run++
		} else {
			run = 1
		}
		most = max(most, run)
	}
	return most
}

// apiServerMetrics scrapes the API server's metrics, and keeps the text
// in file keep unless that is "".
func apiServerMetrics(ctx context.Context, cs kubernetes.Interface, keep string) (metrics, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	if keep != "" {
		if err := os.WriteFile(keep, raw, 0o644); err != nil {
			return nil, err
		}
	}
	return parseMetrics(bytes.NewReader(raw))
}

// requestCounts are the requests an API server served, from the
// difference of its metrics over a window, by "VERB resource
// [subresource]" (its apiserver_request_total).
func requestCounts(d metrics) map[string]int {
	out := map[string]int{}
	for k, v := range d.byLabels("apiserver_request_total", "verb", "resource", "subresource") {
		if n := int(v + 0.5); n > 0 {
			out[k] = n
		}
	}
	return out
}

// dumpUnfinished writes what the API server holds of the first Jobs that
// did not finish, and their Events, for a look at what went wrong.
func dumpUnfinished(ctx context.Context, cs kubernetes.Interface, tr *tracker, path string) {
	var b bytes.Buffer
	n := 0
	for _, tj := range tr.list {
		tj.mu.Lock()
		ph, admissions, preempted := tj.phase, tj.admissions, tj.preempted
		tj.mu.Unlock()
		if ph == finished || n == 20 {
			continue
		}
		n++
		ns, name := tj.spec.Namespace, tj.spec.Name
		fmt.Fprintf(&b, "=== %s/%s: %s, %d admissions, %d preemptions\n", ns, name, ph, admissions, preempted)
		job, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "get: %v\n", err)
			continue
		}
		fmt.Fprintf(&b, "resourceVersion %s suspend %v labels %v annotations %v\nconditions %+v\n", job.ResourceVersion, job.Spec.Suspend, job.Labels, job.Annotations, job.Status.Conditions)
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			fmt.Fprintf(&b, "events: %v\n", err)
			continue
		}
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "  %s %s x%d: %s\n", e.LastTimestamp.Format(time.RFC3339), e.Reason, e.Count, e.Message)
		}
	}
	_ = os.WriteFile(path, b.Bytes(), 0o644)
}
