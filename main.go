// Command tally gives Kubernetes batch Jobs fair, quota-based queueing with
// no CustomResourceDefinitions. See README.md.
package main

// Where each command lives:
//
//	tally serve         serve.go: its flags (parseServeFlags), the manager's
//	                    wiring (serveWith), serve's --config
//	                    (loadConfigFile) and the shutdown (signalContext);
//	                    the webhooks are package webhook, the ledger
//	                    package ledger, and mapper.go the manager's
//	                    RESTMapper (newMapper)
//	tally status        status.go: flags and printing; the reads are
//	                    inspect.ShowStatus (package ledger/inspect)
//	tally explain       explain.go: flags and printing; the reads are
//	                    inspect.ExplainWorkload
//	tally check-config  checkconfig.go: kinds.Accept on the files, with the
//	                    CRDs of the API server when it can be reached
//	                    (listCRDs)
//	tally version       main.go: the build info, and the commit make build
//	                    sets (version)
//
// Every command reads a config through kinds.Accept, as the ConfigMap's
// webhook and the ledger's loader do, and finds the API server with
// restConfig (serve.go).
//
// Tests: flags_test.go checks serve's flags; main_test.go starts a control
// plane (envtest) and serveWith on it for the *_integration_test.go files,
// and mapper_test.go checks newMapper.

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

const usage = `tally gives Kubernetes batch and AI workloads fair, quota-based queueing, with no CRDs.

Usage:
  tally serve [flags]            run the webhooks and the ledger (also: tally --flag ...)
  tally status [flags]           show each ClusterQueue's usage, quota and workloads
  tally explain [flags] [KIND/]NAME | -f FILE
                                 say why a workload waits, where it stands and when it may start
  tally check-config [flags] FILE...
                                 validate config documents offline
  tally version                  print tally's version and commit
  tally help                     show this help (also tally --help)

Run "tally COMMAND --help" for a command's flags. Installed as kubectl-tally
(make install), it runs as "kubectl tally COMMAND", with kubectl's --kubeconfig,
--context and -n flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	switch {
	case len(args) == 0 || len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		// tally and tally --help list the commands; tally serve --help
		// gives serve's flags.
		cmd, args = "help", nil
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stderr)
	case "status":
		return status(args, stdout, stderr)
	case "explain":
		return explain(args, stdout, stderr)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	fmt.Fprintf(stderr, "tally: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// commit is the git commit tally was built from, when the build says
// (make build sets it with -X main.commit, from git describe).
var commit string

// version says which tally this is, from the build info Go records in
// the binary: the module's version (a tag, or "(devel)" for a build of a
// checkout) and its commit: Go's VCS stamp (with whether the tree had
// changes), else the one the build set.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "tally (no build info)"
	}
	out := "tally " + info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		rev = commit
	}
	if rev != "" {
		out += " (commit " + rev + modified + ")"
	}
	return out + " " + info.GoVersion
}
