package framework

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stubBuild is a build.sh that records each call's binary in DIR/calls,
// with its niceness and scheduling policy, and makes the binary; "slow" first writes its pid to
// DIR/slow.pid and sleeps (until killed).
const stubBuild = `set -eu
dir=$1 name=$2
echo "$name $(nice) $(chrt -p $$ | sed -n 's/.*policy: //p')" >>"$dir/calls"
if [ "$name" = slow ]; then echo $$ >"$dir/slow.pid"; sleep 600; fi
printf '#!/bin/sh\n' >"$dir/$name"
chmod +x "$dir/$name"
`

// stubEnv is an Env whose Root holds stubBuild as e2e/toolchain/build.sh.
func stubEnv(t *testing.T) Env {
	t.Helper()
	root, tools := t.TempDir(), t.TempDir()
	script := filepath.Join(root, "e2e", "toolchain", "build.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(stubBuild), 0o644); err != nil {
		t.Fatal(err)
	}
	return Env{Root: root, Tools: tools}
}

func calls(t *testing.T, e Env) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.Tools, "calls"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestPrebuildBuildsWhatIsMissingInOrderAtLowPriority(t *testing.T) {
	e := stubEnv(t)
	if err := os.WriteFile(filepath.Join(e.Tools, "b"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := e.Prebuild("a", "b", "c")
	// Waits for the builds: c is the last one.
	if err := Poll(t.Context(), 10*time.Millisecond, 10*time.Second, func(context.Context) (bool, string, error) {
		return executable(filepath.Join(e.Tools, "c")), "c not built", nil
	}); err != nil {
		t.Fatal(err)
	}
	stop()
	got := calls(t, e)
	want := []string{"a 19 SCHED_IDLE", "c 19 SCHED_IDLE"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("build.sh calls (name, niceness, policy) = %q, want %q (b was there already)", got, want)
	}
	for _, name := range []string{"a", "c"} {
		if !executable(filepath.Join(e.Tools, name)) {
			t.Errorf("%s not built", name)
		}
	}
}

func TestPrebuildStopKillsTheBuildUnderWay(t *testing.T) {
	e := stubEnv(t)
	stop := e.Prebuild("slow", "after")
	pidFile := filepath.Join(e.Tools, "slow.pid")
	var pid int
	if err := Poll(t.Context(), 10*time.Millisecond, 10*time.Second, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false, "no " + pidFile, nil
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil, "no pid in " + pidFile, nil
	}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return within 10s")
	}
	// The script's process is gone, and the build after it never started.
	// (stop returns only once its sleep is gone too: the sleep holds the
	// output pipe that the wait for the script reads to its end.)
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("the build's process %d is still there after stop (kill 0: %v)", pid, err)
	}
	if got := calls(t, e); strings.Join(got, ",") != "slow 19 SCHED_IDLE" {
		t.Errorf("build.sh calls = %q, want only the slow one", got)
	}
}
