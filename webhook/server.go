package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// MaxConcurrentStreams is how many admission calls one HTTP/2 connection
// to the webhook server carries at once. The API server speaks HTTP/2 to
// a webhook it calls by a loopback URL (over a Service it speaks
// HTTP/1.1, a connection per call in flight). Its client opens a new TLS
// connection for each call that finds every connection at the server's
// limit: Go's default limit of 250 made a burst of Job creates open a
// thousand connections in a few seconds, a TLS handshake each, and close
// most of them after.
const MaxConcurrentStreams = 4096

// DefaultCertDir is where the serving certificate is when no directory is
// given: controller-runtime's default.
var DefaultCertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")

// Server is controller-runtime's webhook server (ctrlwebhook.DefaultServer)
// with its own Start, which serves HTTP/2 with MaxConcurrentStreams; the
// TLS settings, the certificate's reloading, the timeouts and the
// shutdown are the default server's.
type Server struct {
	*ctrlwebhook.DefaultServer
	log     logr.Logger
	started atomic.Bool
}

// NewServer returns a Server with o, defaulted as the default server
// defaults it, that logs to log. ClientCAName is not supported.
func NewServer(o ctrlwebhook.Options, log logr.Logger) *Server {
	if o.WebhookMux == nil {
		o.WebhookMux = http.NewServeMux()
	}
	if o.Port == 0 {
		o.Port = ctrlwebhook.DefaultPort
	}
	if o.CertDir == "" {
		o.CertDir = DefaultCertDir
	}
	if o.CertName == "" {
		o.CertName = "tls.crt"
	}
	if o.KeyName == "" {
		o.KeyName = "tls.key"
	}
	return &Server{DefaultServer: &ctrlwebhook.DefaultServer{Options: o}, log: log}
}

// Start serves the registered webhooks until ctx ends, then shuts down,
// waiting at most a minute for the calls in flight. A negative port
// disables the server, as it does controller-runtime's.
func (s *Server) Start(ctx context.Context) error {
	o := s.Options
	if o.Port < 0 {
		s.log.Info("webhook server disabled")
		return nil
	}
	if o.ClientCAName != "" {
		return errors.New("webhook server: ClientCAName is not supported")
	}
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, op := range o.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(o.CertDir, o.CertName), filepath.Join(o.CertDir, o.KeyName))
		if err != nil {
			return err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				s.log.Error(err, "certificate watcher")
			}
		}()
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), cfg)
	if err != nil {
		return err
	}
	s.log.Info("serving webhooks", "host", o.Host, "port", o.Port, "maxConcurrentStreams", MaxConcurrentStreams)
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           o.WebhookMux,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxConcurrentStreams},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			s.log.Error(err, "shutting down the webhook server")
		}
	}()
	s.started.Store(true)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// StartedChecker is healthy once the server is started and takes TLS
// connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if s.Options.Port < 0 {
			return nil
		}
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(s.Options.Host, strconv.Itoa(s.Options.Port)),
			&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it answers
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
