package main

import (
	"strings"
	"testing"
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
		{args: []string{"--help"}, code: 0, stdout: "tally check-config FILE..."},
		{args: []string{"-h"}, code: 0, stdout: "Usage:"},
		{args: []string{"version"}, code: 0, stdout: "tally "},
		{args: []string{"nope"}, code: 2, errs: `tally: unknown command "nope"`},
		{args: []string{"serve", "--help"}, code: 0, errs: "-kubeconfig"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errs strings.Builder
			if code := run(tc.args, &out, &errs); code != tc.code {
				t.Errorf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errs.String())
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
