package inspect

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"tally.dev/tally/queues"
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
	if err := WriteStatus(out, cfg, Status(cfg, jobs, ListClaimTemplates(ctx, c, jobs))); err != nil {
		return err
	}
	return writeUnhostable(ctx, c, cfg, out)
}

// writeUnhostable adds a line for each flavor nothing can host (and a
// note for each that tally cannot tell of); a user who may not list nodes
// gets a line that says so.
func writeUnhostable(ctx context.Context, c client.Reader, cfg *queues.Config, out io.Writer) error {
	bad, err := ReadUnhostable(ctx, c, cfg)
	if err != nil {
		_, err = fmt.Fprintf(out, "\n(whether each flavor can be hosted is not known: %v)\n", err)
		return err
	}
	for _, u := range bad {
		if _, err := fmt.Fprintf(out, "\n%s: %s\n", u.Severity(), u.Message()); err != nil {
			return err
		}
	}
	return nil
}
