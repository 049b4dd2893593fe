package inspect

import (
	"context"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ShowStatus writes every ClusterQueue's books (Status), rebuilt
// from the workloads on the API server, under the config in namespace's
// ConfigMap, or in configFile when it is set.
func ShowStatus(ctx context.Context, c client.Reader, namespace, configFile string, out io.Writer) error {
	cfg, ks, err := LoadConfig(ctx, c, namespace, configFile)
	if err != nil {
		return err
	}
	jobs, err := ListWorkloads(ctx, ks, c)
	if err != nil {
		return err
	}
	return WriteStatus(out, cfg, Status(cfg, jobs))
}
