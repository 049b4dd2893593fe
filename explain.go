package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/queues"
)

// explain prints where one workload stands (see inspect.ExplainWorkload).
func explain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := addKubeFlags(fs, "The workload's namespace. Defaults to the kubeconfig context's.")
	tallyNS := fs.String("tally-namespace", "tally-system", "tally's namespace, which holds the config ConfigMap "+queues.ConfigName+".")
	configFile := fs.String("config", "", "Read the config from this file instead of the ConfigMap.")
	file := fs.String("f", "", "Explain the workload in this YAML or JSON file, as if it were submitted now.")
	output := fs.String("o", "text", "Output format: text or json.")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: tally explain [flags] [KIND/]NAME
       tally explain [flags] -f FILE

Says where a workload stands, rebuilt from the API server with the ledger's own rules:
its state, ClusterQueue and cohort, its position in the queue and in its namespace, what
it needs against what is free, the workloads ahead of it and the running ones that must
finish first, whom it would preempt or who preempted it, and when it may start (replayed
from the run times of finished workloads). KIND is Job (the default), or any kind tally
queues (pytorchjob, jobset, rayjob, mpijob, a declared kind). With -f, for a workload not
submitted yet: the queue it would go to, whether it can ever fit, its flavor and its wait.

It reads the config ConfigMap, the workload, its Events, and the queued workloads of every
namespace; a user who may list workloads only in their own namespace gets counts, not
names, for the others (docs/commands.md, "RBAC for tally explain").

Flags:
`)
		fs.PrintDefaults()
	}
	pos, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if (*file == "") == (len(pos) != 1) || len(pos) > 1 || (*output != "text" && *output != "json") {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "tally explain: %v\n", err)
		return 1
	}
	restCfg, err := kube.restConfig()
	if err != nil {
		return fail(fmt.Errorf("kubeconfig: %w", err))
	}
	c, err := client.New(restCfg, client.Options{})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	x, err := inspect.ExplainWorkload(ctx, c, inspect.ExplainRequest{Namespace: kube.ns(), TallyNamespace: *tallyNS, ConfigFile: *configFile, File: *file, Name: firstOf(pos)}, time.Now())
	if err != nil {
		return fail(err)
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(x)
	} else {
		err = inspect.WriteExplanation(stdout, x)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// firstOf is args' first, or "".
func firstOf(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
