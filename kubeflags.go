package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are how a command finds the API server and the namespace,
// named as kubectl's are, so that `kubectl tally COMMAND` takes the flags
// a kubectl user gives (kubectl passes them on to its plugins).
type kubeFlags struct {
	kubeconfig, context, namespace string
}

// addKubeFlags defines --kubeconfig, --context and -n/--namespace on fs;
// nsUsage says what the namespace is to the command.
func addKubeFlags(fs *flag.FlagSet, nsUsage string) *kubeFlags {
	k := &kubeFlags{}
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster config.")
	fs.StringVar(&k.context, "context", "", "The kubeconfig context to use. Defaults to the current context.")
	fs.StringVar(&k.namespace, "namespace", "", nsUsage)
	fs.StringVar(&k.namespace, "n", "", "Short for --namespace.")
	return k
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = k.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: k.context})
}

// restConfig is the config of the API server the flags name.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.clientConfig().ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no cluster: no kubeconfig in --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod")
	}
	return cfg, err
}

// ns is the namespace -n names, else the context's, else "default".
func (k *kubeFlags) ns() string {
	if k.namespace != "" {
		return k.namespace
	}
	if n, _, err := k.clientConfig().Namespace(); err == nil && n != "" {
		return n
	}
	return "default"
}

// parseInterspersed parses args with fs, flags before, between and after
// the positional arguments (as kubectl takes them: `explain job/a -n x`),
// and returns the positional ones. Every argument after "--" is
// positional. It prints nothing: see usageError.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = usage; fs.SetOutput(out) }()
	var pos, rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// usageError is what a command says of err, an error of
// parseInterspersed: for -h it prints the usage and returns
// flag.ErrHelp; a bad flag is one line that says where the flags are.
func usageError(fs *flag.FlagSet, err error) error {
	switch {
	case errors.Is(err, flag.ErrHelp):
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	case err != nil:
		return fmt.Errorf("%w (%s --help lists the flags)", err, fs.Name())
	}
	return nil
}

// parseCommand parses a command's args with parseInterspersed. When the
// command cannot go on, it returns ok false and the exit code: 0 for -h,
// 2 for a bad flag, said in one line.
func parseCommand(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	pos, err := parseInterspersed(fs, args)
	switch err = usageError(fs, err); {
	case errors.Is(err, flag.ErrHelp):
		return nil, 0, false
	case err != nil:
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		return nil, 2, false
	}
	return pos, 0, true
}
