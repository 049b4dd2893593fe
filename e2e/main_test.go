// Package e2e runs tally as a real process against a local kwok cluster (a
// real API server, controller manager and scheduler, with simulated nodes)
// and checks the user-facing contract: Jobs in bound namespaces are queued,
// admitted within quota onto their flavor's nodes and finished.
//
// It needs TALLY_TOOLS (the control plane and kwok binaries) and TALLY_BIN
// (tally); `make test-e2e` sets both. Without them every test skips.
package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"tally.dev/tally/e2e/framework"
)

// tallyNamespace is tally's own namespace, holding its ConfigMap.
const tallyNamespace = "tally-system"

// exampleFiles are the Kueue manifests of examples/gpu-training, loaded
// into the config unchanged: the ResourceFlavor nvidia-gpu-flavor, the
// ClusterQueue cluster-queue-a (10 GPUs) and the LocalQueue
// team-a/team-a-queue.
var exampleFiles = []string{"resource-flavor.yaml", "cluster-queue.yaml", "local-queue.yaml"}

// testConfig holds, besides the GPU training example's manifests, one
// ClusterQueue per test, none in a cohort, so the tests cannot lend each
// other quota. The nodes are those of e2e/cluster/nodes.yaml: two GPU
// nodes (8 GPUs each) and two CPU nodes.
const testConfig = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: cpu-flavor
spec:
  nodeLabels:
    node-type: cpu
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-flavors
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: cpu-flavor
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: memory, nominalQuota: 64Gi}
      - {name: nvidia.com/gpu, nominalQuota: 0}
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: memory, nominalQuota: 64Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-quota
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 10}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-restart
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 10}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-handoff
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: 1}
`

// suite is shared by the tests; nil when they skip.
type suite struct {
	env     framework.Env
	cluster *framework.Cluster
	client  client.WithWatch
	tally   *framework.Tally
	// operator is the training operator, for PyTorchJobs.
	operator *framework.TrainingOperator
	// config is the suite's config documents (suiteConfig).
	config string
}

var (
	shared     *suite
	skipReason string
)

// setup returns the shared suite, or skips the test.
func setup(t *testing.T) *suite {
	t.Helper()
	if shared == nil {
		t.Skip(skipReason)
	}
	return shared
}

// testContext is a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The clients log nothing of their own here.
	ctrllog.SetLogger(logr.Discard())
	env, err := framework.FromEnv()
	if err != nil {
		skipReason = "e2e: " + err.Error()
		fmt.Println(skipReason + "; skipping")
		return m.Run()
	}
	if testing.Short() {
		skipReason = "e2e: skipped in -short mode"
		return m.Run()
	}
	framework.SweepStale(env)

	dir, err := os.MkdirTemp("", "tally-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	s := &suite{env: env, cluster: framework.NewCluster(env, dir)}
	// When the whole suite runs, the operators its tests need are built in
	// the background meanwhile, in the order the tests come to them, and
	// helm last, for e2e/helminstall, which make test runs next.
	stopPrebuild := func() {}
	if flag.Lookup("test.run").Value.String() == "" {
		stopPrebuild = env.Prebuild(framework.CertManager, framework.RayOperator, framework.Karpenter,
			framework.JobSetController, framework.MPIOperator, framework.TrainerController, "helm")
	}
	failed := true
	var once sync.Once
	teardown := func() {
		once.Do(func() {
			stopPrebuild()
			if s.tally != nil {
				if err := s.tally.Stop(10 * time.Second); err != nil {
					fmt.Fprintln(os.Stderr, "e2e: stopping tally:", err)
				}
			}
			if s.operator != nil {
				if err := s.operator.Stop(10 * time.Second); err != nil {
					fmt.Fprintln(os.Stderr, "e2e: stopping the training operator:", err)
				}
			}
			if err := s.cluster.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: deleting cluster:", err)
			}
			if failed {
				if s.tally != nil {
					printTail(s.tally.LogPath(), 60)
				}
				if s.operator != nil {
					printTail(s.operator.Log, 20)
				}
				fmt.Fprintf(os.Stderr, "e2e: kept %s (kubeconfig, tally.log)\n", dir)
			} else {
				os.RemoveAll(dir)
			}
		})
	}
	defer teardown()
	stopOnSignal(teardown)
	stopBeforeTimeout(teardown)

	start := time.Now()
	ctx := context.Background()
	if err := s.cluster.Up(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster:", err)
		return 1
	}
	fmt.Printf("e2e: cluster %s up in %s\n", s.cluster.Name, time.Since(start).Round(time.Millisecond))
	if s.client, err = framework.NewClient(s.cluster.Kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: client:", err)
		return 1
	}
	// The training operator runs PyTorchJobs. Its CRD is served before
	// tally starts, as tally watches the kinds served at its start.
	if err := s.cluster.InstallPyTorchJobCRD(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if s.operator, err = framework.NewTrainingOperator(s.cluster, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: training operator:", err)
		return 1
	}
	if err := s.operator.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := s.operator.WaitReady(ctx, 2*time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the training operator is not ready:", err)
		return 1
	}
	fmt.Printf("e2e: training operator ready in %s (log %s)\n", time.Since(start).Round(time.Millisecond), s.operator.Log)
	if s.config, err = suiteConfig(env.Root); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: config:", err)
		return 1
	}
	if err := framework.ApplyConfig(ctx, s.client, tallyNamespace, s.config); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: config:", err)
		return 1
	}
	// tally runs as its service account with exactly the RBAC of
	// deploy/base/rbac.yaml, and its webhook configurations exist already,
	// as after kubectl apply -k deploy/. A request the role does not allow
	// fails the suite (see forbidden below).
	if err := framework.InstallRBAC(ctx, s.client, filepath.Join(env.Root, "deploy", "base", "rbac.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: rbac:", err)
		return 1
	}
	if err := framework.PrepareWebhookConfigurations(ctx, s.client, "tally"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: webhook configurations:", err)
		return 1
	}
	saKubeconfig, err := framework.ServiceAccountKubeconfig(ctx, s.client, s.cluster.Kubeconfig, tallyNamespace, framework.ServiceAccountName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if s.tally, err = framework.NewTally(env.Bin, saKubeconfig, dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tally:", err)
		return 1
	}
	if err := s.tally.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := s.tally.WaitReady(ctx, 60*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tally not ready:", err)
		return 1
	}
	fmt.Printf("e2e: tally ready in %s (log %s)\n", time.Since(start).Round(time.Millisecond), s.tally.LogPath())

	shared = s
	code := m.Run()
	if code == 0 && forbidden(s.tally.LogPath()) {
		code = 1
	}
	failed = code != 0
	return code
}

// suiteConfig is the GPU training example's manifests, read from
// examples/gpu-training/ as they are, followed by testConfig.
func suiteConfig(root string) (string, error) {
	var docs []string
	for _, f := range exampleFiles {
		b, err := os.ReadFile(filepath.Join(root, "examples", "gpu-training", f))
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	return strings.Join(append(docs, testConfig), "\n---\n"), nil
}

// forbidden reports, and says, whether tally's log shows a request that
// its role did not allow.
func forbidden(logPath string) bool {
	lines, err := framework.Forbidden(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: reading tally's log:", err)
		return true
	}
	if len(lines) == 0 {
		fmt.Println("e2e: tally made no request its role (deploy/base/rbac.yaml) forbids")
		return false
	}
	fmt.Fprintf(os.Stderr, "e2e: FAIL: tally made %d request(s) its role forbids:\n%s\n", len(lines), strings.Join(lines, "\n"))
	return true
}

// stopOnSignal tears down on Ctrl-C or SIGTERM, so no cluster is left
// running.
func stopOnSignal(teardown func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "e2e: %s: tearing down\n", sig)
		teardown()
		os.Exit(1)
	}()
}

// stopBeforeTimeout tears down shortly before `go test -timeout` would
// panic, because a panicking test binary runs no deferred cleanup.
func stopBeforeTimeout(teardown func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil || d <= 0 {
		return
	}
	margin := min(30*time.Second, d/10)
	time.AfterFunc(d-margin, func() {
		fmt.Fprintf(os.Stderr, "e2e: the test timeout (%s) is near: tearing down\n", d)
		teardown()
		os.Exit(1)
	})
}

func printTail(path string, n int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: last %d lines of %s:\n%s\n", len(lines), path, strings.Join(lines, "\n"))
}
