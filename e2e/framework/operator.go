package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// trainingOperatorScript installs and runs the training operator.
const trainingOperatorScript = "training-operator.sh"

// InstallPyTorchJobCRD installs the training operator's PyTorchJob CRD and
// waits until it is served. tally watches the kinds served when it starts.
func (c *Cluster) InstallPyTorchJobCRD(ctx context.Context) error {
	return c.script(ctx, trainingOperatorScript, "crds", c.Kubeconfig)
}

// TrainingOperator is the Kubeflow training operator of the toolchain,
// run on the host against the cluster for PyTorchJobs, as the scheduler
// and the controller manager are.
type TrainingOperator struct {
	Process
	ProbePort int
}

// NewTrainingOperator picks free ports for an operator of cluster c that
// logs to dir/training-operator.log.
func NewTrainingOperator(c *Cluster, dir string) (*TrainingOperator, error) {
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	args := []string{filepath.Join(c.Env.Root, "e2e", "cluster", trainingOperatorScript), "run", c.Kubeconfig,
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprint(ports[2])}
	return &TrainingOperator{
		Process: Process{Name: "the training operator", Path: "bash", Args: func() []string { return args },
			Env: []string{"TOOLS=" + c.Env.Tools}, Log: filepath.Join(dir, "training-operator.log")},
		ProbePort: ports[0],
	}, nil
}

// WaitReady polls the operator's /readyz (its certificates are written and
// its controllers started) until it answers 200.
func (o *TrainingOperator) WaitReady(ctx context.Context, timeout time.Duration) error {
	return o.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", o.ProbePort), timeout)
}
