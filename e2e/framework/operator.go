package framework

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// and the controller manager are. It is ready when its /readyz answers
// (its certificates are written) and the API server admits a PyTorchJob
// (its webhook paths are registered, which happens just after).
type TrainingOperator = Operator

// NewTrainingOperator picks free ports for an operator of cluster c that
// logs to dir/training-operator.log.
func NewTrainingOperator(c *Cluster, dir string) (*TrainingOperator, error) {
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	o := newOperator(c, dir, "the training operator", "training-operator", trainingOperatorScript,
		fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprint(ports[2]))
	o.ProbePort = ports[0]
	o.Admits = func() client.Object { return NewPyTorchJob(metav1.NamespaceDefault, "readiness-probe").Obj() }
	return o, nil
}
