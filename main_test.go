package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// The integration tests run tally's real server wiring (serveWith) against
// a real kube-apiserver and etcd from envtest, with tally's own webhook
// configurations registered. There is no job controller, so Job completion
// is simulated through the status subresource.

var (
	k8s client.Client
	// envCfg is the control plane's admin config, which k8s and tally use;
	// tests impersonate other users from it.
	envCfg *rest.Config
	// kubeconfig is a kubeconfig file for the control plane.
	kubeconfig string
	tallyNS    = "tally-system"
	tallyLog   = &strings.Builder{}
)

var testConfig = queuestest.New().
	Flavor("on-demand", "nodeLabels: {tier: on-demand}").
	Flavor("spot", "nodeLabels: {tier: spot}").
	Flavor("gpu", "nodeLabels: {accel: gpu}", `nodeTaints: [{key: gpu, value: "true", effect: NoSchedule}]`,
		"tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]").
	ClusterQueue("small", "namespaceSelector: {}").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("accel", "namespaceSelector: {}").Group("cpu", "nvidia.com/gpu").Quotas("gpu", "cpu=100", "nvidia.com/gpu=4").
	ClusterQueue("prio", "preemption: {withinClusterQueue: LowerPriority}").Group("cpu").
	Quotas("on-demand", "cpu=2").Quotas("spot", "cpu=0").
	ClusterQueue("stat").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("plugin").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("late").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("pods").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("podplace").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("podreplace").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("poduncovered").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("podmisplaced").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("tiny").Group("cpu").Quotas("on-demand", "cpu=1").
	ClusterQueue("finished").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("dra").Group("cpu", "example.com/gpu").Quotas("gpu", "cpu=100", "example.com/gpu=4").
	ClusterQueue("drapods").Group("cpu", "example.com/gpu").Quotas("gpu", "cpu=100", "example.com/gpu=2").
	ClusterQueue("drabench").Group("cpu", "example.com/gpu").Quotas("gpu", "cpu=100", "example.com/gpu=100").
	Doc("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates: {DisableWaitForPodsReady: true}\n"+
		"resources:\n  deviceClassMappings:\n  - {name: example.com/gpu, deviceClassNames: [gpu.example.com]}\n").
	ClusterQueue("selective", "namespaceSelector: {matchLabels: {team: ml}}").Group("cpu").Quotas("on-demand", "cpu=2").
	ClusterQueue("pytorch", "preemption: {withinClusterQueue: LowerPriority}").Group("cpu", "nvidia.com/gpu").
	Quotas("gpu", "cpu=100", "nvidia.com/gpu=4").
	Doc("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: dc}\n"+
		"spec:\n  levels:\n  - {nodeLabel: example.com/block}\n  - {nodeLabel: example.com/rack}\n  - {nodeLabel: kubernetes.io/hostname}\n").
	Flavor("tas-gpu", "nodeLabels: {pool: tas}", "topologyName: dc").
	ClusterQueue("tas").Group("cpu", "nvidia.com/gpu").Quotas("tas-gpu", "cpu=100", "nvidia.com/gpu=32").
	Flavor("tas-dra", "nodeLabels: {pool: tasdra}", "topologyName: dc").
	ClusterQueue("tasdra").Group("cpu", "example.com/gpu").Quotas("tas-dra", "cpu=100", "example.com/gpu=32").
	PriorityClass("high", 1000).
	PriorityClass("low", 100).String()

func TestMain(m *testing.M) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Println("KUBEBUILDER_ASSETS not set: skipping the integration tests (make test sets it)")
		os.Exit(m.Run())
	}
	os.Exit(runIntegration(m, assets))
}

func runIntegration(m *testing.M, assets string) int {
	// The training operator's PyTorchJob CRD, which the toolchain keeps
	// beside the control plane: the API server validates and serves
	// PyTorchJobs as in a real cluster (no operator runs here).
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join(assets, "crds", "training-operator", "kubeflow.org_pytorchjobs.yaml")}}
	restCfg, err := env.Start()
	envCfg = restCfg
	if err != nil {
		// Start may fail after starting etcd and the API server (a
		// CRD it cannot install): they would run on.
		_ = env.Stop()
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	k8s, err = client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A namespace bound before tally starts: only the ledger's repair loop
	// can label it.
	must(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tallyNS}}))
	must(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "early", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "small"}}}))
	must(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tallyNS, Name: "tally-config"}, Data: map[string]string{queues.ConfigKey: testConfig}}))

	dir, _ := os.MkdirTemp("", "tally-it")
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	must(os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	port, probe := freePort(), freePort()
	f := &serveFlags{
		kubeconfig: kubeconfig, namespace: tallyNS, webhookHost: "127.0.0.1", webhookPort: port,
		certDir: filepath.Join(dir, "certs"), webhookURL: fmt.Sprintf("https://127.0.0.1:%d", port), register: true,
		metricsAddr: "0", probeAddr: fmt.Sprintf("127.0.0.1:%d", probe), recount: time.Minute,
	}
	log := zap.New(zap.WriteTo(&syncWriter{b: tallyLog}), zap.UseDevMode(true))
	// As tally serve does: controller-runtime's own logs (the tests'
	// caches and webhook servers too) go to the same log.
	ctrllog.SetLogger(log)
	done := make(chan error, 1)
	go func() { done <- serveWith(ctx, f, log, &atomic.Bool{}) }()
	if err := waitReady(probe, done); err != nil {
		fmt.Fprintln(os.Stderr, err, "\n", tallyLog.String())
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "tally:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "tally log:\n", tallyLog.String())
	}
	return code
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitReady(probe int, done <-chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("tally exited before ready: %v", err)
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("tally not ready after 60s")
}

// needCluster skips a test when no control plane was started.
func needCluster(t *testing.T) {
	t.Helper()
	if k8s == nil {
		t.Skip("KUBEBUILDER_ASSETS not set: no control plane")
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("condition not met after %s: %s", timeout, last)
}

func bindNamespace(t *testing.T, name, queue string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{queues.AnnotationNamespaceQueue: queue}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// bindManaged binds namespace name to queue and waits until tally has
// labelled it managed, so that its Jobs go through the webhook.
func bindManaged(t *testing.T, name, queue string) {
	t.Helper()
	bindNamespace(t, name, queue)
	eventually(t, 10*time.Second, func() (bool, string) {
		ns := &corev1.Namespace{}
		_ = k8s.Get(context.Background(), client.ObjectKey{Name: name}, ns)
		return ns.Labels[queues.LabelManaged] == "true", "namespace " + name + " not labelled managed"
	})
}

func newJob(ns, name string, cpu string) *batchv1.Job {
	return kindstest.Job(ns, name).RestartPolicy(corev1.RestartPolicyNever).Image("busybox").Request(corev1.ResourceCPU, cpu).Obj()
}

func getJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		t.Fatalf("get job %s/%s: %v", ns, name, err)
	}
	return job
}

// complete marks a Job finished through the status subresource, as the job
// controller would.
func complete(t *testing.T, ns, name string) {
	t.Helper()
	job := getJob(t, ns, name)
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	job.Status.StartTime = &start
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if err := k8s.Status().Update(context.Background(), job); err != nil {
		t.Fatalf("completing %s/%s: %v", ns, name, err)
	}
}

func jobEvents(t *testing.T, ns, name string) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(t *testing.T, ns, name, reason, substr string) (bool, string) {
	evs := jobEvents(t, ns, name)
	var seen []string
	for _, e := range evs {
		if e.Reason == reason && strings.Contains(e.Message, substr) {
			return true, ""
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return false, fmt.Sprintf("no %s event containing %q on %s/%s; events: %v", reason, substr, ns, name, seen)
}
