package perf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tally.dev/tally/e2e/framework"
)

// process is a scheduler (`tally serve`, or minimalkueue) running as a
// child process of the runner.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *os.File
	logPath string
	// started is when it was started, stopped when it exited; peak is
	// its peak resident set size, read just before it was told to stop.
	started, stopped time.Time
	peak             int64
	// tally's ports.
	webhookPort, metricsPort, probePort int
}

// startProcess starts bin with args, its output in logPath and env added
// to the runner's environment.
func startProcess(bin string, args, env []string, logPath string) (*process, error) {
	p := &process{logPath: logPath, exited: make(chan struct{})}
	var err error
	p.log, err = os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	// Take it down with the runner, even when it dies by a signal.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p.started = time.Now()
	go func() {
		_ = p.cmd.Wait()
		p.stopped = time.Now()
		close(p.exited)
	}()
	return p, nil
}

// startTally launches bin serve against kubeconfig, with its webhooks at
// https://127.0.0.1:<port>, certificates and log in dir, and env added to
// the runner's environment.
func startTally(bin, kubeconfig, namespace, dir string, extra, env []string) (*process, error) {
	ports, err := framework.FreePorts(3)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"serve",
		"--kubeconfig", kubeconfig,
		"--namespace", namespace,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(ports[0]),
		"--webhook-url", fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--register-webhooks",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}, extra...)
	t, err := startProcess(bin, args, env, filepath.Join(dir, "tally.log"))
	if err != nil {
		return nil, err
	}
	t.webhookPort, t.metricsPort, t.probePort = ports[0], ports[1], ports[2]
	return t, nil
}

func (t *process) running() bool {
	select {
	case <-t.exited:
		return false
	default:
		return true
	}
}

// waitReady polls /readyz until it answers 200, failing at once if tally
// exits.
func (t *process) waitReady(ctx context.Context, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", t.probePort)
	hc := &http.Client{Timeout: time.Second}
	last := "no answer"
	err := poll(ctx, 100*time.Millisecond, timeout, func() (bool, error) {
		if !t.running() {
			return false, fmt.Errorf("tally exited before it was ready; see %s", t.logPath)
		}
		resp, err := hc.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = resp.Status + ": " + strings.TrimSpace(string(body))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("tally /readyz (last: %s): %w", last, err)
	}
	return nil
}

// cpu returns the CPU time tally has used so far (user + system), from
// /proc/PID/stat.
func (t *process) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", t.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	// Fields 14 and 15 of stat (utime, stime) are 11 and 12 here.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc.
const clockTicks = 100

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
// Its rusage's ru_maxrss will not do: Linux counts in it the runner's own
// size when it forked the process, which grows over a long session.
func (t *process) peakRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", t.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// stop sends SIGTERM, waits for the process to exit (SIGKILL after
// timeout) and returns its resource usage over its whole life.
func (t *process) stop(timeout time.Duration) (*syscall.Rusage, error) {
	return t.stopWith(syscall.SIGTERM, timeout)
}

// stopWith is stop with another signal (minimalkueue is stopped with
// SIGINT, as Kueue's runner does).
func (t *process) stopWith(sig os.Signal, timeout time.Duration) (*syscall.Rusage, error) {
	defer t.log.Close()
	if peak, err := t.peakRSS(); err == nil {
		t.peak = peak
	}
	_ = t.cmd.Process.Signal(sig)
	var err error
	select {
	case <-t.exited:
	case <-time.After(timeout):
		_ = t.cmd.Process.Kill()
		<-t.exited
		err = fmt.Errorf("%s did not exit within %s of %s; killed", filepath.Base(t.cmd.Path), timeout, sig)
	}
	ru, _ := t.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return ru, err
}

// scrape reads tally's metrics endpoint.
func (t *process) scrape(ctx context.Context) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", t.metricsPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// poll checks cond every interval until it holds, errors, ctx ends or
// timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done after %s: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}
