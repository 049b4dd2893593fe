package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Tally runs `tally serve` as a process on the host, with its webhooks
// registered at https://127.0.0.1:<port>. The ports are chosen once, so a
// restarted tally serves where the webhook configurations point.
type Tally struct {
	Bin        string
	Kubeconfig string
	// Dir holds the certificates and the log.
	Dir                                 string
	WebhookPort, MetricsPort, ProbePort int
	// ExtraArgs are added to every start.
	ExtraArgs []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// NewTally picks free ports for a tally that will run against kubeconfig.
func NewTally(bin, kubeconfig, dir string) (*Tally, error) {
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	return &Tally{Bin: bin, Kubeconfig: kubeconfig, Dir: dir, WebhookPort: ports[0], MetricsPort: ports[1], ProbePort: ports[2]}, nil
}

// LogPath is where every run of this tally appends its output.
func (t *Tally) LogPath() string { return filepath.Join(t.Dir, "tally.log") }

// Args are the command-line arguments of a start.
func (t *Tally) Args() []string {
	return append([]string{
		"serve",
		"--kubeconfig", t.Kubeconfig,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", fmt.Sprint(t.WebhookPort),
		"--webhook-url", fmt.Sprintf("https://127.0.0.1:%d", t.WebhookPort),
		"--cert-dir", filepath.Join(t.Dir, "certs"),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", t.MetricsPort),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", t.ProbePort),
	}, t.ExtraArgs...)
}

// Start launches tally; it does not wait for readiness (see WaitReady).
func (t *Tally) Start() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cmd != nil {
		return errors.New("tally is already running")
	}
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(t.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	t.starts++
	fmt.Fprintf(log, "\n===== e2e: start #%d at %s: %s %v\n", t.starts, time.Now().Format(time.RFC3339Nano), t.Bin, t.Args())
	cmd := exec.Command(t.Bin, t.Args()...)
	cmd.Stdout, cmd.Stderr = log, log
	// Take tally down with the test process, even when it dies by a signal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", t.Bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	t.cmd, t.exited = cmd, exited
	return nil
}

// Running says whether the process started last is still alive.
func (t *Tally) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cmd == nil {
		return false
	}
	select {
	case <-t.exited:
		return false
	default:
		return true
	}
}

// WaitReady polls /readyz until it answers 200. It fails at once if the
// process exits.
func (t *Tally) WaitReady(ctx context.Context, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", t.ProbePort)
	hc := &http.Client{Timeout: time.Second}
	return Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		if !t.Running() {
			return false, "", fmt.Errorf("tally exited; see %s", t.LogPath())
		}
		resp, err := hc.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "GET /readyz: " + resp.Status, nil
	})
}

// Stop sends SIGTERM and waits for tally to exit (SIGKILL after timeout).
func (t *Tally) Stop(timeout time.Duration) error {
	return t.signal(syscall.SIGTERM, timeout)
}

// Kill ends tally with SIGKILL, as a crash would, and waits for it to go.
func (t *Tally) Kill() error {
	return t.signal(syscall.SIGKILL, 10*time.Second)
}

func (t *Tally) signal(sig syscall.Signal, timeout time.Duration) error {
	t.mu.Lock()
	cmd, exited := t.cmd, t.exited
	t.cmd = nil
	t.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("tally did not exit within %s of %s; killed", timeout, sig)
	}
}

// FreePorts returns n distinct ports free on 127.0.0.1 right now.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
