package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// checkConfig validates config files offline and prints every error with
// its field path.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tally check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := addKubeFlags(fs, "Taken as kubectl's, and not used: the documents name their own namespaces.")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: tally check-config [flags] FILE...

Validates ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass and WorkloadKind
documents (and a Kueue Configuration's resources section) and prints every error with its field
path. Exits 1 if there is any. The paths of a WorkloadKind are checked against its CRD's schema
too when the API server can be reached.

Flags:
`)
		fs.PrintDefaults()
	}
	files, code, ok := parseCommand(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fs.Usage()
		return 2
	}
	crds := func(ctx context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
		return listCRDs(ctx, kube)
	}
	acc := kinds.Accept(context.Background(), kinds.Files(files...), kinds.API{CRDs: crds})
	for _, w := range acc.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if len(acc.Errs) > 0 {
		for _, e := range queues.FormatErrors(acc.Errs) {
			fmt.Fprintln(stderr, e)
		}
		fmt.Fprintf(stderr, "%d error(s)\n", len(acc.Errs))
		return 1
	}
	cfg := acc.Config
	fmt.Fprintf(stdout, "ok: %d ResourceFlavor(s), %d ClusterQueue(s), %d LocalQueue(s), %d WorkloadPriorityClass(es), %d WorkloadKind(s)\n",
		len(cfg.Flavors), len(cfg.ClusterQueues), len(cfg.LocalQueues), len(cfg.PriorityClasses), len(cfg.WorkloadKinds))
	return 0
}

// listCRDs lists the CRDs of the API server kube names, for kinds.Accept
// to check the declared kinds' paths against.
func listCRDs(ctx context.Context, kube *kubeFlags) ([]apiextensionsv1.CustomResourceDefinition, error) {
	restCfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	restCfg.Timeout = 10 * time.Second
	scheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return nil, err
	}
	return crds.Items, nil
}
