package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// status prints every ClusterQueue's books, rebuilt from the API server
// as the ledger builds them.
func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := addKubeFlags(fs, "Taken as kubectl's, and not used: the status covers every namespace.")
	namespace := fs.String("tally-namespace", "tally-system", "tally's namespace, which holds the config ConfigMap "+queues.ConfigName+".")
	configFile := fs.String("config", "", "Read the config from this file instead of the ConfigMap.")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: tally status [flags]\n\nShows each ClusterQueue's pending, admitted and inadmissible Jobs and, per flavor and\nresource, its usage, nominal quota and borrowing (and its fair-sharing share), rebuilt from\nthe Jobs on the API server as tally's ledger counts them.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "tally status: unexpected argument %q\n", pos[0])
		return 2
	}
	restCfg, err := kube.restConfig()
	if err != nil {
		fmt.Fprintf(stderr, "tally status: kubeconfig: %v\n", err)
		return 1
	}
	c, err := client.New(restCfg, client.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "tally status: %v\n", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := inspect.ShowStatus(ctx, c, *namespace, *configFile, stdout); err != nil {
		fmt.Fprintf(stderr, "tally status: %v\n", err)
		return 1
	}
	return 0
}
