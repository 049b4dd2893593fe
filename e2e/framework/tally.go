package framework

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tally runs `tally serve` as a process on the host, with its webhooks
// registered at https://127.0.0.1:<port>. The ports are chosen once, so a
// restarted tally serves where the webhook configurations point.
type Tally struct {
	Process
	Kubeconfig string
	// Dir holds the certificates and the log.
	Dir                                                string
	WebhookPort, MetricsPort, ProbePort, DashboardPort int
	// ExtraArgs are added to every start.
	ExtraArgs []string
	// WebhookURL, when set, is where the webhook configurations point
	// instead of this tally's own port (a Proxy in front of replicas);
	// CertDir, when set, holds the certificates instead of Dir/certs, so
	// that replicas can share one CA.
	WebhookURL, CertDir string
}

// NewTally picks free ports for a tally that will run against kubeconfig.
func NewTally(bin, kubeconfig, dir string) (*Tally, error) {
	ports, err := FreePorts(4)
	if err != nil {
		return nil, err
	}
	t := &Tally{Kubeconfig: kubeconfig, Dir: dir, WebhookPort: ports[0], MetricsPort: ports[1], ProbePort: ports[2], DashboardPort: ports[3]}
	t.Process = Process{Name: "tally", Path: bin, Args: t.Args, Log: filepath.Join(dir, "tally.log")}
	return t, nil
}

// LogPath is where every run of this tally appends its output.
func (t *Tally) LogPath() string { return t.Log }

// Args are the command-line arguments of a start.
func (t *Tally) Args() []string {
	url, certs := t.WebhookURL, t.CertDir
	if url == "" {
		url = fmt.Sprintf("https://127.0.0.1:%d", t.WebhookPort)
	}
	if certs == "" {
		certs = filepath.Join(t.Dir, "certs")
	}
	return append([]string{
		"serve",
		"--kubeconfig", t.Kubeconfig,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", fmt.Sprint(t.WebhookPort),
		"--webhook-url", url,
		"--cert-dir", certs,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", t.MetricsPort),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", t.ProbePort),
		"--dashboard-bind-address", fmt.Sprintf("127.0.0.1:%d", t.DashboardPort),
	}, t.ExtraArgs...)
}

// WaitReady polls /readyz until it answers 200. It fails at once if the
// process exits.
func (t *Tally) WaitReady(ctx context.Context, timeout time.Duration) error {
	return t.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", t.ProbePort), timeout)
}

// FreePorts returns n distinct ports free on 127.0.0.1 right now. They
// are taken from below the kernel's ephemeral range: a port from that
// range, once released, can become the source port of any outgoing
// connection (a client of the API server, say) before the process meant
// to listen on it binds it. No port is handed out twice by one test
// process, so ports kept for a stopped process stay its own.
func FreePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	low := ephemeralLow()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no %d free ports found between %d and %d", n, portsFloor, low)
		}
		p := portsFloor + rand.IntN(low-portsFloor)
		if handedOut[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
		handedOut[p] = true
	}
	return ports, nil
}

// portsFloor is the lowest port FreePorts hands out.
const portsFloor = 20000

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range, or
// 32768, the usual one, when it cannot be read.
func ephemeralLow() int {
	low := 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > portsFloor+1000 {
				low = v
			}
		}
	}
	return low
}

// Leads says whether this tally's log shows that it has led since it last
// started: its ledger, which runs only on the holder of the leader lease,
// has synced.
func (t *Tally) Leads() (bool, error) {
	since, err := t.LogSinceStart()
	if err != nil {
		return false, err
	}
	return bytes.Contains(since, []byte(`"ledger synced"`)), nil
}
