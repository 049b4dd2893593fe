package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is a program the tests run on the host, such as tally or an
// operator. Every start appends its output to one log, and the process
// dies with the test process, even when that dies by a signal.
type Process struct {
	// Name says what it is, in messages.
	Name string
	// Path is the program; Args, called at every start, its arguments;
	// Env is added to the test process's environment.
	Path string
	Args func() []string
	Env  []string
	// Log is the file every start appends to.
	Log string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	// since is the log's size when the last start began.
	since int64
}

// Start launches the process; it does not wait for readiness.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("%s is already running", p.Name)
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.Log), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := log.Stat(); err == nil {
		p.since = fi.Size()
	}
	args := p.Args()
	p.starts++
	fmt.Fprintf(log, "\n===== e2e: start #%d at %s: %s %v\n", p.starts, time.Now().Format(time.RFC3339Nano), p.Path, args)
	cmd := exec.Command(p.Path, args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", p.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// Running says whether the process started last is still alive.
// Pid is the process's id, 0 when it has not been started.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// WaitHTTP polls url until it answers 200. It fails at once if the
// process exits.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	return Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		if !p.Running() {
			return false, "", fmt.Errorf("%s exited; see %s", p.Name, p.Log)
		}
		resp, err := hc.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "GET " + url + ": " + resp.Status, nil
	})
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after
// timeout).
func (p *Process) Stop(timeout time.Duration) error {
	return p.signal(syscall.SIGTERM, timeout)
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it
// to go.
func (p *Process) Kill() error {
	return p.signal(syscall.SIGKILL, 10*time.Second)
}

func (p *Process) signal(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
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
		return errors.New(p.Name + " did not exit within " + timeout.String() + " of " + sig.String() + "; killed")
	}
}

// Pause stops the process with SIGSTOP, as a partition or a long stall
// would; Resume lets it go on (SIGCONT).
func (p *Process) Pause() error { return p.send(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *Process) Resume() error { return p.send(syscall.SIGCONT) }

func (p *Process) send(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// LogSinceStart returns what the process logged since it last started.
func (p *Process) LogSinceStart() ([]byte, error) {
	p.mu.Lock()
	since := p.since
	p.mu.Unlock()
	f, err := os.Open(p.Log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(since, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
