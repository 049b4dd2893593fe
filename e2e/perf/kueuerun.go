package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/scenario"
)

// KueueOptions say how to run Kueue's scheduler-performance runner.
type KueueOptions struct {
	Plan *scenario.Plan
	// Tools is the folder e2e/toolchain/build.sh builds kueue-perf into:
	// runner, minimalkueue, minimalkueue-qps500, crds/, configs/ and
	// VERSION.
	Tools string
	// MinimalKueue is the minimalkueue binary's name in Tools
	// (minimalkueue or minimalkueue-qps500).
	MinimalKueue string
	// Assets holds etcd and kube-apiserver.
	Assets string
	// Generator is the generator config file; Dir gets the run's files.
	Generator, Dir string
	Timeout        time.Duration
	Progress       io.Writer
}

// KueueResult is what a run of Kueue measured: Kueue's runner's own
// summary, and the same figures as a run of tally's, taken the same way
// (see RunKueue).
type KueueResult struct {
	Own *KueueSummary
	// Start is the first sighting of a Workload, End the last sighting
	// of one finished; Workloads, Admitted and Finished count what the
	// watch saw, Admissions and Evictions the transitions it saw.
	Start, End                                time.Time
	Workloads, Admitted, Finished             int
	Admissions, Evictions                     int
	Sightings                                 []sighting
	CPU, CPUTotal, Wall                       time.Duration
	PeakRSS                                   int64
	APIServerCPU                              time.Duration
	APIServerRequests                         map[string]int
	Requests                                  Requests
	MinimalKueue, Version, Args, Edit, Budget string
}

// RunKueue runs Kueue's runner (its generator, its job-controller
// stand-in and its recorder) against an API server of the runner's own,
// started as for tally (APIServerFlags, the audit log) with Kueue's CRDs,
// and minimalkueue as a process of the runner's own, logs at level 2 to a
// file as Kueue's `make run-performance-scheduler` runs it, as the user
// kueueUser, whose requests the audit log records. Kueue's runner's
// clients run at 1,000 QPS (burst 2,000), as in Kueue's in-cluster target.
// A watch of the runner's own on the Workloads records when each was
// first seen, first and last admitted and finished, as tally's runner
// does for Jobs. The window runs from the first Workload seen to the last
// seen finished; minimalkueue is stopped (SIGINT, as Kueue's runner
// does) once Kueue's runner has written its summary, and its wall time
// runs from its start to then, as in Kueue's minimalkueue.stats.yaml,
// which is written the same way.
func RunKueue(ctx context.Context, o KueueOptions) (*KueueResult, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	version, err := os.ReadFile(filepath.Join(o.Tools, "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("%w (e2e/toolchain/build.sh DIR kueue-perf builds it)", err)
	}
	if o.MinimalKueue == "" {
		o.MinimalKueue = "minimalkueue"
	}
	env, err := startControlPlane(Options{Dir: o.Dir, Assets: o.Assets}, filepath.Join(o.Tools, "crds"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	kueueConfig, err := userKubeconfig(env, kueueUser, filepath.Join(o.Dir, "kueue.kubeconfig"))
	if err != nil {
		return nil, err
	}
	runnerConfig, err := userKubeconfig(env, "kueue-runner", filepath.Join(o.Dir, "runner.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "tally-bench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mkArgs := []string{"--kubeconfig", kueueConfig, "--zap-log-level=2"}
	res := &KueueResult{
		Version: strings.TrimSpace(string(version)), MinimalKueue: o.MinimalKueue,
		Args: "--kubeconfig kueue.kubeconfig --zap-log-level=2", Budget: "QPS 50, burst 100 (minimalkueue's own)",
	}
	if o.Plan.Topology != nil {
		// minimalkueue runs Kueue's TAS controllers and indexers only when
		// asked (its TopologyAwareScheduling feature gate is on by default
		// since v0.14), as Kueue's TAS target runs it.
		mkArgs = append(mkArgs, KueueTASFlag)
		res.Args += " " + KueueTASFlag
	}
	if o.MinimalKueue != "minimalkueue" {
		res.Budget = "QPS 500, burst 1000 (edited)"
		if b, err := os.ReadFile(filepath.Join(o.Tools, o.MinimalKueue+".edit")); err == nil {
			res.Edit = strings.TrimSpace(string(b))
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWorkloadWatch(o.Plan)
	if err := w.start(runCtx, dyn); err != nil {
		return nil, err
	}
	apiBefore, err := apiServerMetrics(ctx, cs, "")
	if err != nil {
		return nil, err
	}
	mk, err := startProcess(filepath.Join(o.Tools, o.MinimalKueue), mkArgs, nil, filepath.Join(o.Dir, "minimalkueue.log"))
	if err != nil {
		return nil, err
	}
	var mkStopped bool
	defer func() {
		if !mkStopped {
			_, _ = mk.stopWith(os.Interrupt, 30*time.Second)
		}
	}()
	cpuBefore, err := mk.cpu()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(o.Dir, "runner.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	runner := exec.CommandContext(runCtx, filepath.Join(o.Tools, "runner"),
		"--o", o.Dir, "--generatorConfig", o.Generator, "--qps=1000", "--burst=2000", "--timeout", o.Timeout.String())
	runner.Env = append(os.Environ(), "KUBECONFIG="+runnerConfig)
	runner.Stdout, runner.Stderr = logf, logf
	runner.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := runner.Start(); err != nil {
		return nil, err
	}
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- runner.Wait() }()

	// The window: until the watch saw every Workload finished.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	begun := time.Now()
	var runnerErr error
	runnerExited := false
wait:
	for {
		select {
		case <-w.allFinished:
			break wait
		case runnerErr = <-runnerDone:
			runnerExited = true
			break wait
		case <-mk.exited:
			return nil, fmt.Errorf("%s exited during the run (its log: %s)", o.MinimalKueue, mk.logPath)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if o.Progress != nil {
				a, f, n := w.counts()
				fmt.Fprintf(o.Progress, "  %5.0fs  seen %d/%d  admitted %d  finished %d\n", time.Since(begun).Seconds(), n, len(o.Plan.Jobs), a, f)
			}
		}
	}
	if cpu, err := mk.cpu(); err == nil {
		res.CPU = cpu - cpuBefore
	}
	res.PeakRSS, _ = mk.peakRSS()
	if m, err := apiServerMetrics(ctx, cs, filepath.Join(o.Dir, "apiserver.metrics")); err == nil {
		d := m.minus(apiBefore)
		res.APIServerCPU = time.Duration(d.sum("process_cpu_seconds_total", nil) * float64(time.Second))
		res.APIServerRequests = requestCounts(d)
	}
	// Kueue's runner ends once its recorder sees every ClusterQueue idle,
	// and writes its summary: then minimalkueue is stopped, as Kueue's
	// runner stops it.
	for !runnerExited {
		if _, err := os.Stat(filepath.Join(o.Dir, "wlStates.csv")); err == nil {
			break
		}
		select {
		case runnerErr = <-runnerDone:
			runnerExited = true
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ru, stopErr := mk.stopWith(os.Interrupt, 30*time.Second)
	mkStopped = true
	if !runnerExited {
		// What is left is its clean-up, which deletes what it made: the
		// control plane goes anyway.
		_ = runner.Process.Kill()
		<-runnerDone
	} else if runnerErr != nil {
		return nil, fmt.Errorf("%s (its log: %s): %w", runner.Path, logf.Name(), runnerErr)
	}
	if ru == nil {
		return nil, fmt.Errorf("no resource usage of %s", o.MinimalKueue)
	}
	res.CPUTotal = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	res.PeakRSS = max(res.PeakRSS, mk.peak)
	res.Wall = mk.stopped.Sub(mk.started)
	stats, err := yaml.Marshal(map[string]int64{
		"wallMs": res.Wall.Milliseconds(), "userMs": ru.Utime.Nano() / 1e6, "sysMs": ru.Stime.Nano() / 1e6, "maxrss": res.PeakRSS / 1024,
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "minimalkueue.stats.yaml"), stats, 0o644); err != nil {
		return nil, err
	}
	cancel()
	w.fill(res)
	var errs []error
	if res.Own, err = ReadKueue(o.Dir); err != nil {
		errs = append(errs, fmt.Errorf("%w (Kueue's runner's log: %s)", err, logf.Name()))
	}
	res.Requests, err = countRequests(filepath.Join(o.Dir, "audit.log"), kueueUser, res.Start, res.End)
	errs = append(errs, err, stopErr)
	if res.Finished < len(o.Plan.Jobs) {
		errs = append(errs, fmt.Errorf("the watch saw %d of %d Workloads finished", res.Finished, len(o.Plan.Jobs)))
	}
	return res, errors.Join(errs...)
}

// KueueTASFlag is the minimalkueue flag that sets up Kueue's
// topology-aware scheduling.
const KueueTASFlag = "--enableTAS"

// userKubeconfig writes a kubeconfig for a cluster admin named user.
func userKubeconfig(env *envtest.Environment, user, path string) (string, error) {
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, b, 0o600)
}

// Names from Kueue's API and its performance runner.
var workloadsResource = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

const (
	kueueClassLabel   = "kueue.x-k8s.io/performance-scheduler-class"
	kueueAdmitted     = "Admitted"
	kueueEvicted      = "Evicted"
	kueueFinished     = "Finished"
	kueueConditionsOn = "True"
)

// workloadWatch follows Kueue's Workloads as the tracker follows Jobs.
type workloadWatch struct {
	classes map[string]int
	want    int

	mu                    sync.Mutex
	byUID                 map[types.UID]*workloadSeen
	admitted, finished    int
	admissions, evictions int
	end                   time.Time
	allFinished           chan struct{}
}

type workloadSeen struct {
	sighting
	admitted, evicted, finished bool
}

func newWorkloadWatch(p *scenario.Plan) *workloadWatch {
	w := &workloadWatch{classes: map[string]int{}, want: len(p.Jobs), byUID: map[types.UID]*workloadSeen{}, allFinished: make(chan struct{})}
	for i, c := range p.Classes {
		w.classes[c.Name] = i
	}
	return w
}

func (w *workloadWatch) start(ctx context.Context, dyn dynamic.Interface) error {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(workloadsResource).Informer()
	handle := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.observe(u)
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

// observe folds one Workload update into its record, as Kueue's recorder
// reads a Workload: admitted, evicted and finished are its conditions.
func (w *workloadWatch) observe(u *unstructured.Unstructured) {
	now := time.Now()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	is := func(typ string) bool {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == typ {
				return m["status"] == kueueConditionsOn
			}
		}
		return false
	}
	admitted, evicted, finished := is(kueueAdmitted), is(kueueEvicted), is(kueueFinished)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.byUID[u.GetUID()]
	if s == nil {
		class, ok := w.classes[u.GetLabels()[kueueClassLabel]]
		if !ok {
			class = -1
		}
		s = &workloadSeen{sighting: sighting{class: class, seen: now}}
		w.byUID[u.GetUID()] = s
	}
	if admitted && !s.admitted {
		if s.first.IsZero() {
			s.first = now
			w.admitted++
		}
		s.last = now
		w.admissions++
	}
	if evicted && !s.evicted {
		w.evictions++
	}
	if finished && !s.finished {
		w.finished++
		w.end = now
		if w.finished == w.want {
			close(w.allFinished)
		}
	}
	s.admitted, s.evicted, s.finished = admitted, evicted, finished
}

func (w *workloadWatch) counts() (admitted, finished, seen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.admitted, w.finished, len(w.byUID)
}

func (w *workloadWatch) fill(r *KueueResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Workloads, r.Admitted, r.Finished, r.Admissions, r.Evictions, r.End = len(w.byUID), w.admitted, w.finished, w.admissions, w.evictions, w.end
	for _, s := range w.byUID {
		r.Sightings = append(r.Sightings, s.sighting)
		if r.Start.IsZero() || s.seen.Before(r.Start) {
			r.Start = s.seen
		}
	}
}
