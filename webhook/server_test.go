package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"tally.dev/tally/certs"
)

// TestServerStreams has more calls in flight at once than Go's default
// limit of HTTP/2 streams on one connection (250), as the API server has in
// a burst of creates, and checks that they share the one connection an
// HTTP/2 client opened, and that the server shuts down when its context
// ends.
func TestServerStreams(t *testing.T) {
	dir := t.TempDir()
	bundle, err := certs.EnsureDir(dir, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()

	const calls = 400
	var arrived atomic.Int32
	all := make(chan struct{})
	srv := NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}, logr.Discard())
	srv.Register("/warm", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Register("/held", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == calls {
			close(all)
		}
		select {
		case <-all:
		case <-r.Context().Done():
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()
	started := srv.StartedChecker()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return started(nil) == nil, nil
	}); err != nil {
		t.Fatalf("the server did not start: %v", started(nil))
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle.CACert)
	var dials atomic.Int32
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	resp, err := client.Get(base + "/warm")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("served %s; want HTTP/2", resp.Proto)
	}

	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(base + "/held")
			if err != nil {
				errs <- err
				return
			}
			_ = resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d calls at once took %d connections; want the one", calls, n)
	}

	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop when its context ended")
	}
}
