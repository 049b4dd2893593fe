package helminstall

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

const (
	// release and namespace are the release's name and namespace, those
	// of deploy/.
	release   = "tally"
	namespace = "tally-system"
	// queue is the ClusterQueue of the smoke, and the namespace bound to
	// it: one GPU, so that a second 1-GPU Job waits for the first.
	queue = "helm-smoke"
	// webhookConfiguration names the chart's two webhook configurations.
	webhookConfiguration = "tally"
	// rulesUpdated is what tally logs when it rewrites its webhooks'
	// rules to the kinds it queues.
	rulesUpdated = "webhook rules updated to the workload kinds"
)

// queueDoc is the smoke's ClusterQueue, on the GPU flavor of
// examples/gpu-training.
const queueDoc = `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: ` + queue + `
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu-flavor
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 16Gi}
      - {name: nvidia.com/gpu, nominalQuota: 1}
`

// TestHelmInstall installs the chart as a user would, with the
// Deployment's replicas at 0, and runs tally on the host as the chart's
// service account, with --register-webhooks=false so that the chart's
// webhook configurations are the ones in force. The chart's webhooks call
// the Service tally-webhook, which a tally on the host cannot serve, so
// the test points their clientConfig at tally's host URL and gives them
// tally's CA (what a Service and the built-in CA injection of
// --register-webhooks would do); their rules, selectors, match conditions
// and failure policies stay the chart's. Then a Job is suspended by the
// webhook and admitted within quota while a second one waits, both run
// to completion on the kwok nodes, tally's log shows no request its role
// forbids, and helm uninstall removes the webhooks.
func TestHelmInstall(t *testing.T) {
	env, err := framework.FromEnv()
	if err != nil {
		t.Skip("helminstall: " + err.Error())
	}
	if testing.Short() {
		t.Skip("helminstall: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := env.BuildTool(ctx, "helm"); err != nil {
		t.Fatal(err)
	}
	framework.SweepStale(env)
	dir := t.TempDir()
	cluster := framework.NewCluster(env, dir)
	if err := cluster.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Down(); err != nil {
			t.Errorf("deleting cluster %s: %v", cluster.Name, err)
		}
	})
	t.Logf("cluster %s up in %s", cluster.Name, time.Since(start).Round(time.Millisecond))
	c, err := framework.NewClient(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	helm := helmCommand(env, cluster.Kubeconfig, dir)

	exampleFlavor, err := os.ReadFile(filepath.Join(env.Root, "examples", "gpu-training", "resource-flavor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "queues.yaml")
	if err := os.WriteFile(config, []byte(string(exampleFlavor)+"---\n"+queueDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	installed := time.Now()
	if _, err := helm(ctx, "install", release, filepath.Join(env.Root, "deploy", "helm", "tally"),
		"-n", namespace, "--create-namespace", "--set", "replicaCount=0", "--set-file", "config="+config); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install in %s", time.Since(installed).Round(time.Millisecond))

	saKubeconfig, err := framework.ServiceAccountKubeconfig(ctx, c, cluster.Kubeconfig, namespace, framework.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	tally, err := framework.NewTally(env.Bin, saKubeconfig, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment's arguments, and the chart's webhook configurations.
	tally.ExtraArgs = []string{"--leader-elect", "--namespace=" + namespace, "--register-webhooks=false"}
	if err := tally.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tally.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping tally: %v", err)
		}
		if t.Failed() {
			logTail(t, tally.LogPath(), 60)
		}
	})
	if err := tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("tally not ready: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "certs", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pointWebhooks(ctx, c, fmt.Sprintf("https://127.0.0.1:%d", tally.WebhookPort), ca); err != nil {
		t.Fatal(err)
	}
	t.Logf("tally ready as the chart's service account in %s", time.Since(start).Round(time.Millisecond))

	smoke(ctx, t, c)

	if b, err := tally.LogSinceStart(); err != nil {
		t.Error(err)
	} else if bytes.Contains(b, []byte(rulesUpdated)) {
		t.Errorf("tally rewrote the rules of the chart's webhooks (%q in its log): they are not those of the kinds it queues", rulesUpdated)
	}
	if lines, err := framework.Forbidden(tally.LogPath()); err != nil {
		t.Error(err)
	} else if len(lines) > 0 {
		t.Errorf("tally made %d request(s) the chart's RBAC forbids:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if err := tally.Stop(10 * time.Second); err != nil {
		t.Errorf("stopping tally: %v", err)
	}
	if _, err := helm(ctx, "uninstall", release, "-n", namespace, "--wait"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: webhookConfiguration}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %T %s: %v, want NotFound", obj, webhookConfiguration, err)
		}
	}
	t.Logf("install, smoke and uninstall in %s", time.Since(start).Round(time.Millisecond))
}

// smoke binds a namespace to the 1-GPU ClusterQueue and runs two 1-GPU
// Jobs there: both are suspended at creation, a user cannot un-suspend
// one, the first runs while the second waits, and both finish, released.
func smoke(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	if err := framework.WaitClusterQueues(ctx, c, 30*time.Second, queue); err != nil {
		t.Fatalf("tally did not load ClusterQueue %s from the chart's ConfigMap: %v", queue, err)
	}
	// BindNamespace waits until a dry-run Job comes back suspended: the
	// chart's mutating webhook calls tally.
	if err := framework.BindNamespace(ctx, c, queue, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", queue, err)
	}
	first := framework.NewJob(queue, "first").GPUs(1).Runtime(5 * time.Second).Obj()
	second := framework.NewJob(queue, "second").GPUs(1).Runtime(time.Second).Obj()
	if err := framework.CreateJobs(ctx, c, first, second); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*batchv1.Job{first, second} {
		if !framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StatePending {
			t.Errorf("Job %s as created: suspended %v, state %q; want it suspended and %q", j.Name, framework.Suspended(j), j.Labels[framework.LabelState], framework.StatePending)
		}
	}
	// The second waits behind the first, which runs 5 s: the chart's Job
	// guard refuses to let anyone but tally un-suspend it.
	unsuspend := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`))
	if err := c.Patch(ctx, second.DeepCopy(), unsuspend); err == nil || !strings.Contains(err.Error(), "only tally may un-suspend") {
		t.Errorf("un-suspending pending Job %s as the cluster admin: %v, want the guard's denial", second.Name, err)
	}

	rep := framework.WatchQuota(ctx, c, queue, 1, 2, 100*time.Millisecond, 2*time.Minute)
	t.Logf("%d polls; at most %d GPUs running at once", rep.Polls, rep.MaxRunningGPUs)
	for _, v := range rep.Violations {
		t.Errorf("quota exceeded: %s", v)
	}
	if rep.Err != nil {
		t.Fatalf("not all Jobs finished: %v", rep.Err)
	}
	if !rep.SawWaiting {
		t.Errorf("no poll saw Job %s waiting while %s ran", second.Name, first.Name)
	}
	err := framework.Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		released, err := framework.JobEvents(ctx, c, queue, "QuotaReleased")
		if err != nil {
			return false, err.Error(), nil
		}
		jobs, err := framework.ListJobs(ctx, c, queue)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		done := len(jobs) == 2
		for _, j := range jobs {
			done = done && framework.Completed(&j) && j.Labels[framework.LabelState] == framework.StateFinished && len(released[j.Name]) > 0
			seen = append(seen, fmt.Sprintf("%s: completed %v, state %q, %d QuotaReleased", j.Name, framework.Completed(&j), j.Labels[framework.LabelState], len(released[j.Name])))
		}
		return done, strings.Join(seen, "; "), nil
	})
	if err != nil {
		t.Errorf("Jobs not completed, labelled %q and released: %v", framework.StateFinished, err)
	}
}

// pointWebhooks points every webhook of the chart's two configurations at
// url plus the path of the Service reference the chart gives it, with ca
// as its caBundle.
func pointWebhooks(ctx context.Context, c client.Client, url string, ca []byte) error {
	toHost := func(name string, cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("webhook %s: the chart gives no Service path", name)
		}
		*cc = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + *cc.Service.Path), CABundle: ca}
		return nil
	}
	key := client.ObjectKey{Name: webhookConfiguration}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, key, m); err != nil {
			return err
		}
		for i := range m.Webhooks {
			if err := toHost(m.Webhooks[i].Name, &m.Webhooks[i].ClientConfig); err != nil {
				return err
			}
		}
		return c.Update(ctx, m)
	})
	if err != nil {
		return fmt.Errorf("MutatingWebhookConfiguration %s: %w", webhookConfiguration, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, key, v); err != nil {
			return err
		}
		for i := range v.Webhooks {
			if err := toHost(v.Webhooks[i].Name, &v.Webhooks[i].ClientConfig); err != nil {
				return err
			}
		}
		return c.Update(ctx, v)
	})
	if err != nil {
		return fmt.Errorf("ValidatingWebhookConfiguration %s: %w", webhookConfiguration, err)
	}
	return nil
}

// helmCommand returns a runner of the toolchain's helm against kubeconfig,
// with its cache, config and data under dir. The error holds its output.
func helmCommand(env framework.Env, kubeconfig, dir string) func(ctx context.Context, args ...string) ([]byte, error) {
	return func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(env.Tools, "helm"), append(args, "--kubeconfig", kubeconfig)...)
		cmd.Env = append(os.Environ(),
			"HELM_CACHE_HOME="+filepath.Join(dir, "helm", "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, "helm", "config"),
			"HELM_DATA_HOME="+filepath.Join(dir, "helm", "data"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return out, nil
	}
}

// logTail logs the last n lines of the file at path.
func logTail(t *testing.T, path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s: %v", path, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
}
