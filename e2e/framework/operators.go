package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operators of the toolchain besides the training operator. None is
// built by make toolchain: each is built into the toolchain (Env.Tools) the
// first time a test asks for it (BuildTool), which takes a few minutes, or
// before, in the background (Prebuild).
// Each runs on the host against the cluster, as the scheduler and the
// controller manager do, from its script in e2e/cluster.
const (
	// JobSetController is JobSet's controller (sigs.k8s.io/jobset), with
	// its webhooks registered (jobset.sh).
	JobSetController = "jobset-controller"
	// MPIOperator is the Kubeflow MPI operator, for MPIJobs of
	// kubeflow.org/v2beta1 (mpi-operator.sh).
	MPIOperator = "mpi-operator"
	// RayOperator is KubeRay's operator, for RayJobs, RayClusters and
	// RayServices (ray-operator.sh).
	RayOperator = "ray-operator"
	// TrainerController is Kubeflow Trainer v2's controller manager, for
	// TrainJobs, with its webhooks registered (trainer.sh); it runs them
	// as JobSets, so JobSet's controller runs beside it.
	TrainerController = "trainer-controller"

	jobSetScript      = "jobset.sh"
	mpiOperatorScript = "mpi-operator.sh"
	rayOperatorScript = "ray-operator.sh"
	trainerScript     = "trainer.sh"
)

// TrainerWebhookConfigurations names the mutating and the validating
// webhook configuration trainer.sh registers.
var TrainerWebhookConfigurations = []string{"defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org"}

// JobSetWebhookConfigurations names the mutating and the validating
// webhook configuration jobset.sh registers, as a JobSet release does.
var JobSetWebhookConfigurations = []string{"jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"}

// Operator is a workload kind's operator of the toolchain, run on the host
// against a cluster by its script in e2e/cluster.
type Operator struct {
	Process
	// ProbePort, when not 0, is the port on 127.0.0.1 where the operator's
	// /readyz answers 200 once it is ready.
	ProbePort int
	// ReadyLog, when ProbePort is 0, is what the operator's log says once
	// it is ready (since its last start).
	ReadyLog string
	// Admits, when set, is an object of the operator's kind that the API
	// server must accept in a server-side dry run before the operator
	// counts as ready. An operator whose /readyz answers once its webhook
	// server listens may still register its webhook paths a moment later;
	// until then the API server's calls get 404 and, as the webhooks fail
	// closed, the kind cannot be created.
	Admits     func() client.Object
	kubeconfig string
}

// newOperator is the operator that `script run KUBECONFIG args...` runs
// for cluster c, logging to dir/name.log.
func newOperator(c *Cluster, dir, what, name, script string, args ...string) *Operator {
	all := append([]string{filepath.Join(c.Env.Root, "e2e", "cluster", script), "run", c.Kubeconfig}, args...)
	return &Operator{Process: Process{Name: what, Path: "bash", Args: func() []string { return all },
		Env: []string{"TOOLS=" + c.Env.Tools}, Log: filepath.Join(dir, name+".log")}, kubeconfig: c.Kubeconfig}
}

// WaitReady waits until the operator is ready: its /readyz answers 200,
// or its log says ReadyLog, and then the API server admits a dry run of
// Admits. It fails at once if the operator exits.
func (o *Operator) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if err := o.waitStarted(ctx, timeout); err != nil {
		return err
	}
	if o.Admits == nil {
		return nil
	}
	c, err := NewClient(o.kubeconfig)
	if err != nil {
		return err
	}
	return Poll(ctx, 100*time.Millisecond, time.Until(deadline), func(ctx context.Context) (bool, string, error) {
		if !o.Running() {
			return false, "", fmt.Errorf("%s exited; see %s", o.Name, o.Log)
		}
		if err := c.Create(ctx, o.Admits(), client.DryRunAll); err != nil {
			return false, "dry run: " + err.Error(), nil
		}
		return true, "", nil
	})
}

func (o *Operator) waitStarted(ctx context.Context, timeout time.Duration) error {
	if o.ProbePort != 0 {
		return o.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", o.ProbePort), timeout)
	}
	return Poll(ctx, 100*time.Millisecond, timeout, func(context.Context) (bool, string, error) {
		if !o.Running() {
			return false, "", fmt.Errorf("%s exited; see %s", o.Name, o.Log)
		}
		b, err := o.LogSinceStart()
		if err != nil {
			return false, err.Error(), nil
		}
		return bytes.Contains(b, []byte(o.ReadyLog)), fmt.Sprintf("no %q in %s", o.ReadyLog, o.Log), nil
	})
}

// BuildTool builds binary name of e2e/toolchain/build.sh (such as
// JobSetController) into the toolchain unless it is there already. The
// script builds one thing at a time per toolchain directory, so test
// processes that both find it missing build it once.
func (e Env) BuildTool(ctx context.Context, name string) error {
	if executable(filepath.Join(e.Tools, name)) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "e2e: building %s into %s (a few minutes the first time)\n", name, e.Tools)
	start := time.Now()
	args := e.buildArgs(name)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", name, err, out.String())
	}
	if !executable(filepath.Join(e.Tools, name)) {
		return fmt.Errorf("building %s left no %s in %s:\n%s", name, name, e.Tools, out.String())
	}
	fmt.Fprintf(os.Stderr, "e2e: %s ready in %s\n", name, time.Since(start).Round(time.Second))
	return nil
}

// buildArgs is the command line that builds binary name into the
// toolchain: e2e/toolchain/build.sh.
func (e Env) buildArgs(name string) []string {
	return []string{"bash", filepath.Join(e.Root, "e2e", "toolchain", "build.sh"), e.Tools, name}
}

// Prebuild builds in the background, one after the other and at the
// lowest CPU priority (nice 19, in the idle scheduling class), each binary
// of names that the toolchain lacks, so that the builds use the CPU the
// tests leave idle. A test that needs one of them first builds it itself
// (BuildTool), at its own priority: the script's lock per binary makes it
// wait for a build of the same binary already under way, and a build
// already done is skipped.
// stop ends the builds still to come, kills the one under way (the Go
// build cache keeps what it compiled) and returns once it is gone.
func (e Env) Prebuild(names ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// nice's arguments: the lowest priority, and Linux's idle scheduling
	// class when util-linux's chrt is there (the CPU only when no other
	// process wants it).
	idle := []string{"-n", "19"}
	if _, err := exec.LookPath("chrt"); err == nil {
		idle = append(idle, "chrt", "--idle", "0")
	}
	go func() {
		defer close(done)
		for _, name := range names {
			if ctx.Err() != nil {
				return
			}
			if executable(filepath.Join(e.Tools, name)) {
				continue
			}
			start := time.Now()
			cmd := exec.CommandContext(ctx, "nice", append(idle, e.buildArgs(name)...)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			// The script and its go commands are one process group, killed
			// together.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			err := cmd.Run()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				fmt.Fprintf(os.Stderr, "e2e: building %s in the background failed (a test that needs it builds it again): %v\n%s", name, err, out.String())
			default:
				fmt.Fprintf(os.Stderr, "e2e: %s built in the background in %s\n", name, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// InstallJobSetCRD builds JobSet's controller if needed, installs its
// JobSet CRD and waits until it is served.
func (c *Cluster) InstallJobSetCRD(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, JobSetController); err != nil {
		return err
	}
	return c.script(ctx, jobSetScript, "crds", c.Kubeconfig)
}

// NewJobSetController builds JobSet's controller if needed and picks free
// ports for one of cluster c that logs to dir/jobset-controller.log. Each
// start registers its webhooks at its (fixed) webhook port, with a
// certificate kept in jobset/ beside the cluster's kubeconfig; they stay
// registered after it stops (see RemoveJobSetWebhooks).
func NewJobSetController(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, JobSetController); err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "the JobSet controller", JobSetController, jobSetScript,
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprint(ports[2]))
	o.ProbePort = ports[0]
	o.Admits = func() client.Object {
		return OperatorJob{Namespace: metav1.NamespaceDefault, Name: "readiness-probe", Workers: 1}.JobSet()
	}
	return o, nil
}

// RemoveJobSetWebhooks deletes the webhook configurations of JobSet's
// controller. They fail closed: while they stay and no controller
// answers, JobSets and their pods cannot be created.
func RemoveJobSetWebhooks(ctx context.Context, c client.Client) error {
	return removeWebhooks(ctx, c, JobSetWebhookConfigurations)
}

// RemoveTrainerWebhooks deletes the webhook configurations of the
// Trainer's controller, which fail closed too.
func RemoveTrainerWebhooks(ctx context.Context, c client.Client) error {
	return removeWebhooks(ctx, c, TrainerWebhookConfigurations)
}

// removeWebhooks deletes the mutating webhook configuration names[0] and
// the validating one names[1].
func removeWebhooks(ctx context.Context, c client.Client, names []string) error {
	for i, name := range names {
		var obj client.Object = &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if i == 1 {
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// InstallMPIJobCRD builds the MPI operator if needed, installs its MPIJob
// CRD (kubeflow.org/v2beta1) and waits until it is served. Install it
// before the MPI operator starts: the operator exits without it.
func (c *Cluster) InstallMPIJobCRD(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, MPIOperator); err != nil {
		return err
	}
	return c.script(ctx, mpiOperatorScript, "crds", c.Kubeconfig)
}

// NewMPIOperator builds the MPI operator if needed and sets up one for
// cluster c that logs to dir/mpi-operator.log. Its health check takes port
// 8080 of the host, whatever it is told, so one runs on a machine at a
// time (its script fails otherwise); it is ready once it leads (a Lease
// that a restart waits up to 15 s for) and has started its workers.
func NewMPIOperator(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, MPIOperator); err != nil {
		return nil, err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "the MPI operator", MPIOperator, mpiOperatorScript, fmt.Sprint(ports[0]))
	o.ReadyLog = "Started workers"
	return o, nil
}

// InstallRayCRDs builds KubeRay's operator if needed, installs its
// RayCluster, RayJob and RayService CRDs and waits until they are served.
// Install them before the operator starts: it does not start without them.
func (c *Cluster) InstallRayCRDs(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, RayOperator); err != nil {
		return err
	}
	return c.script(ctx, rayOperatorScript, "crds", c.Kubeconfig)
}

// NewRayOperator builds KubeRay's operator if needed and picks free ports
// for one of cluster c that logs to dir/ray-operator.log.
func NewRayOperator(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, RayOperator); err != nil {
		return nil, err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "the KubeRay operator", RayOperator, rayOperatorScript,
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
	o.ProbePort = ports[0]
	return o, nil
}

// InstallTrainerCRDs builds the Trainer's controller if needed, installs
// its TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs and waits
// until they are served.
func (c *Cluster) InstallTrainerCRDs(ctx context.Context) error {
	if err := c.Env.BuildTool(ctx, TrainerController); err != nil {
		return err
	}
	return c.script(ctx, trainerScript, "crds", c.Kubeconfig)
}

// NewTrainerController builds the Trainer's controller if needed and
// picks free ports for one of cluster c that logs to
// dir/trainer-controller.log. Each start registers its webhooks at its
// webhook port, with a certificate kept in trainer/ beside the cluster's
// kubeconfig; they stay registered after it stops (see
// RemoveTrainerWebhooks). It is ready once its webhook admits a dry run
// of a ClusterTrainingRuntime.
func NewTrainerController(ctx context.Context, c *Cluster, dir string) (*Operator, error) {
	if err := c.Env.BuildTool(ctx, TrainerController); err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "the Trainer controller", TrainerController, trainerScript,
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprint(ports[2]))
	o.ProbePort = ports[0]
	o.Admits = func() client.Object { return OperatorJob{Name: "readiness-probe", Workers: 1}.TorchRuntime() }
	return o, nil
}
