package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// tally, tally help and tally --help list the commands and exit 0;
// tally version says which tally this is; an unknown command is a usage
// error; tally serve --help is serve's flags.
func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{args: nil, code: 0, stdout: "tally serve [flags]"},
		{args: []string{"help"}, code: 0, stdout: "tally version"},
		{args: []string{"--help"}, code: 0, stdout: "tally check-config [flags] FILE..."},
		{args: []string{"-h"}, code: 0, stdout: "Usage:"},
		{args: []string{"version"}, code: 0, stdout: "tally "},
		{args: []string{"nope"}, code: 2, errs: `tally: unknown command "nope"`},
		{args: []string{"serve", "--help"}, code: 0, errs: "-kubeconfig"},
		{args: []string{"serve", "--bogus"}, code: 2, errs: "tally serve: flag provided but not defined: -bogus (tally serve --help lists the flags)\n"},
		{args: []string{"status", "--bogus"}, code: 2, errs: "tally status: flag provided but not defined: -bogus (tally status --help lists the flags)\n"},
		{args: []string{"explain", "a", "b"}, code: 2, errs: "Usage: tally explain"},
		{args: []string{"check-config"}, code: 2, errs: "Usage: tally check-config"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errs strings.Builder
			if code := run(tc.args, &out, &errs); code != tc.code {
				t.Errorf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errs.String())
			}
			if tc.code == 2 && strings.HasSuffix(tc.errs, "\n") && errs.String() != tc.errs {
				t.Errorf("stderr %q, want exactly the one line %q", errs.String(), tc.errs)
			}
			if !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errs.String(), tc.errs) {
				t.Errorf("stdout %q, stderr %q; want them to contain %q and %q", out.String(), errs.String(), tc.stdout, tc.errs)
			}
		})
	}
}

// tally serve with no cluster to reach says so in one plain line, with no
// stack trace, and exits 1.
func TestServeNoCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	var out, errs strings.Builder
	if code := run([]string{"serve", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0"}, &out, &errs); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errs.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "tally serve: kubeconfig: ") || strings.Contains(errs.String(), "stacktrace") {
		t.Errorf("stderr %q; want it to end in one line \"tally serve: kubeconfig: ...\" and hold no stack trace", errs.String())
	}
}

// TestIntegrationKubectlPlugin runs tally as kubectl runs a plugin:
// kubectl-tally on PATH, with kubectl's --kubeconfig, --context and -n
// after the command and its arguments. The kubeconfig's current context
// names no cluster, so only --context reaches the control plane.
func TestIntegrationKubectlPlugin(t *testing.T) {
	needCluster(t)
	bin, tools := os.Getenv("TALLY_BIN"), os.Getenv("TALLY_TOOLS")
	if bin == "" || tools == "" {
		t.Skip("TALLY_BIN and TALLY_TOOLS not set (make test sets them)")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(abs, filepath.Join(dir, "kubectl-tally")); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	real := cfg.Contexts[cfg.CurrentContext]
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["envtest"] = real
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: real.AuthInfo}
	cfg.CurrentContext = "nowhere"
	file := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	queuesFile := filepath.Join(dir, "queues.yaml")
	if err := os.WriteFile(queuesFile, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	bindManaged(t, "plugin", "plugin")
	if err := k8s.Create(context.Background(), newJob("plugin", "waits", "1")); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(tools, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tally", "status", "--kubeconfig", file, "--context", "envtest"}, 0, "plugin"},
		{[]string{"tally", "explain", "job/waits", "-n", "plugin", "--kubeconfig", file, "--context", "envtest"}, 0, "waits"},
		{[]string{"tally", "explain", "--kubeconfig=" + file, "--context=envtest", "--namespace=plugin", "waits"}, 0, "waits"},
		{[]string{"tally", "check-config", queuesFile, "--kubeconfig", file, "--context", "envtest"}, 0, "ok: 5 ResourceFlavor(s)"},
		{[]string{"tally", "status", "--kubeconfig", file}, 1, "tally status: "},
		{[]string{"tally", "status", "--kubeconfig", file, "--context", "none"}, 1, `tally status: kubeconfig: context "none" does not exist`},
		{[]string{"tally", "version"}, 0, "tally "},
		{[]string{"tally", "explain", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	} {
		out, code := kubectl(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("kubectl %s: exit %d, output:\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
		if tc.code == 1 && (strings.Count(strings.TrimSpace(out), "\n") > 0 || strings.Contains(out, "goroutine")) {
			t.Errorf("kubectl %s: %q, want one plain line", strings.Join(tc.args, " "), out)
		}
	}
}
