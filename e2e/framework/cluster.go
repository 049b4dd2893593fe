package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClusterPrefix starts the name of every e2e cluster; it ends with the pid
// of the test process that owns it.
const ClusterPrefix = "tally-e2e-"

// Cluster is a local kwok cluster made by e2e/cluster/up.sh.
type Cluster struct {
	Env        Env
	Name       string
	Kubeconfig string
	// NodesFile, when set, holds the fake nodes Up applies instead of
	// e2e/cluster/nodes.yaml.
	NodesFile string
}

// NewCluster names a cluster after this process; its kubeconfig goes to dir.
func NewCluster(env Env, dir string) *Cluster {
	return &Cluster{Env: env, Name: fmt.Sprintf("%s%d", ClusterPrefix, os.Getpid()), Kubeconfig: filepath.Join(dir, "kubeconfig")}
}

// Up creates the cluster and its nodes.
func (c *Cluster) Up(ctx context.Context) error {
	if c.NodesFile != "" {
		return c.script(ctx, "up.sh", c.Name, c.Kubeconfig, c.NodesFile)
	}
	return c.script(ctx, "up.sh", c.Name, c.Kubeconfig)
}

// Down deletes the cluster. It uses a fresh context so that it also runs
// after the tests' context has ended.
func (c *Cluster) Down() error {
	return c.script(context.Background(), "down.sh", c.Name)
}

func (c *Cluster) script(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(c.Env.Root, "e2e", "cluster", name)}, args...)...)
	cmd.Env = append(os.Environ(), "TOOLS="+c.Env.Tools)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

// SweepStale deletes e2e clusters left behind by test processes that no
// longer exist (a run killed by a timeout cannot clean up after itself).
func SweepStale(env Env) {
	out, err := exec.Command(filepath.Join(env.Tools, "kwokctl"), "get", "clusters").Output()
	if err != nil {
		return
	}
	for _, name := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
		if !strings.HasPrefix(name, ClusterPrefix) || err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		c := &Cluster{Env: env, Name: name}
		if err := c.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: removing stale cluster %s: %v\n", name, err)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: removed stale cluster %s\n", name)
		}
	}
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// RestartAPIServer stops the cluster's kube-apiserver with SIGTERM and
// starts it again with the same command line, directory and log, as a
// crash and restart of the API server would. The controller manager and
// the scheduler exit when they cannot renew their leases meanwhile; as a
// kubelet would, it starts them again if they do, until a minute after
// the API server is back.
func (c *Cluster) RestartAPIServer() error {
	dir := os.Getenv("KWOK_WORKDIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		dir = filepath.Join(home, ".kwok")
	}
	dir = filepath.Join(dir, "clusters", c.Name)
	var parts []*component
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		p, err := readComponent(dir, name)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	if err := parts[0].stop(); err != nil {
		return err
	}
	if err := parts[0].start(); err != nil {
		return err
	}
	go func() {
		for range 600 {
			time.Sleep(100 * time.Millisecond)
			for _, p := range parts[1:] {
				if !alive(p.pid) {
					_ = p.start()
				}
			}
		}
	}()
	return nil
}

// component is one control plane process of a kwok cluster.
type component struct {
	dir, name, cwd string
	argv           []string
	pid            int
}

func readComponent(dir, name string) (*component, error) {
	pidFile := filepath.Join(dir, "pids", name+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pidFile, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return nil, err
	}
	return &component{dir: dir, name: name, cwd: cwd, argv: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), pid: pid}, nil
}

// stop ends the component with SIGTERM (SIGKILL after 15 s) and waits.
func (p *component) stop() error {
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; alive(p.pid); i++ {
		if i == 300 {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// start runs the component again, appending to its log, and records its
// new pid where kwokctl looks for it.
func (p *component) start() error {
	log, err := os.OpenFile(filepath.Join(p.dir, "logs", p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.cwd, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	p.pid = cmd.Process.Pid
	return os.WriteFile(filepath.Join(p.dir, "pids", p.name+".pid"), []byte(strconv.Itoa(p.pid)), 0o644)
}
