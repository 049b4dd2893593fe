package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var (
	t0    = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	hosts = []string{"tally-webhook.tally-system.svc", "tally-webhook.tally-system.svc.cluster.local", "localhost", "127.0.0.1"}
	day   = 24 * time.Hour
)

func mustGenerate(t *testing.T, hosts []string, now time.Time) *Bundle {
	t.Helper()
	b, err := Generate(hosts, now)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return b
}

func mustParse(t *testing.T, pemData []byte) []*x509.Certificate {
	t.Helper()
	cs, err := parseCerts(pemData)
	if err != nil {
		t.Fatalf("parsing certificates: %v", err)
	}
	return cs
}

func pool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		t.Fatal("no CA certificate in bundle")
	}
	return p
}

func TestGenerate(t *testing.T) {
	b := mustGenerate(t, hosts, t0)
	ca := mustParse(t, b.CACert)[0]
	cert := mustParse(t, b.Cert)[0]

	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v keyUsage=%v, want a signing CA", ca.IsCA, ca.KeyUsage)
	}
	if got, want := ca.NotAfter, t0.Add(10*365*day); !got.Equal(want) {
		t.Errorf("CA NotAfter = %v, want %v", got, want)
	}
	if got, want := cert.NotAfter, t0.Add(365*day); !got.Equal(want) {
		t.Errorf("serving NotAfter = %v, want %v", got, want)
	}
	if cert.IsCA {
		t.Error("serving certificate is a CA")
	}
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ExtKeyUsage = %v, want [ServerAuth]", cert.ExtKeyUsage)
	}
	if want := hosts[:3]; !slices.Equal(cert.DNSNames, want) {
		t.Errorf("DNSNames = %v, want %v", cert.DNSNames, want)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("IPAddresses = %v, want [127.0.0.1]", cert.IPAddresses)
	}
	for _, h := range hosts {
		_, err := cert.Verify(x509.VerifyOptions{
			DNSName:     h,
			Roots:       pool(t, b.CACert),
			CurrentTime: t0.Add(time.Minute),
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("verifying for %s: %v", h, err)
		}
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		t.Errorf("serving pair: %v", err)
	}
	if _, err := tls.X509KeyPair(b.CACert, b.CAKey); err != nil {
		t.Errorf("CA pair: %v", err)
	}

	other := mustGenerate(t, hosts, t0)
	if bytes.Equal(other.CACert, b.CACert) || bytes.Equal(other.Key, b.Key) {
		t.Error("two Generate calls returned the same CA or key")
	}
	if _, err := Generate(nil, t0); err == nil {
		t.Error("Generate with no hosts: want an error")
	}
}

func TestNeedsRenewal(t *testing.T) {
	b := mustGenerate(t, hosts, t0)
	other := mustGenerate(t, hosts, t0)
	with := func(f func(*Bundle)) *Bundle { c := *b; f(&c); return &c }
	garbage := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")

	cases := []struct {
		name   string
		bundle *Bundle
		hosts  []string
		now    time.Time
		want   bool
	}{
		{"fresh bundle", b, hosts, t0, false},
		{"fresh bundle, a subset of hosts", b, hosts[:1], t0, false},
		{"well before the renewal window", b, hosts, t0.Add(300 * day), false},
		{"inside the renewal window", b, hosts, t0.Add(340 * day), true},
		{"expired", b, hosts, t0.Add(400 * day), true},
		{"not yet valid", b, hosts, t0.Add(-2 * time.Hour), true},
		{"a host the certificate does not cover", b, append(slices.Clone(hosts), "tally-webhook.other.svc"), t0, true},
		{"an IP the certificate does not cover", b, []string{"10.0.0.1"}, t0, true},
		{"garbage certificate", with(func(c *Bundle) { c.Cert = garbage }), hosts, t0, true},
		{"not PEM at all", with(func(c *Bundle) { c.Cert = []byte("hello") }), hosts, t0, true},
		{"garbage CA", with(func(c *Bundle) { c.CACert = []byte("junk") }), hosts, t0, true},
		{"empty key", with(func(c *Bundle) { c.Key = nil }), hosts, t0, true},
		{"key of another certificate", with(func(c *Bundle) { c.Key = other.Key }), hosts, t0, true},
		{"signed by another CA", with(func(c *Bundle) { c.CACert = other.CACert }), hosts, t0, true},
		{"missing CA key does not matter", with(func(c *Bundle) { c.CAKey = nil }), hosts, t0, false},
		{"nil bundle", nil, hosts, t0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.bundle.NeedsRenewal(tc.hosts, tc.now, RenewBefore); got != tc.want {
				t.Errorf("NeedsRenewal = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenewedKeepsTheCA(t *testing.T) {
	b := mustGenerate(t, hosts, t0)
	now := t0.Add(340 * day)
	nb, err := b.renewed(hosts, now, RenewBefore)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nb.CACert, b.CACert) || !bytes.Equal(nb.CAKey, b.CAKey) {
		t.Error("renewing the serving certificate changed the CA")
	}
	if bytes.Equal(nb.Cert, b.Cert) || bytes.Equal(nb.Key, b.Key) {
		t.Error("renewing kept the serving certificate")
	}
	if nb.NeedsRenewal(hosts, now, RenewBefore) {
		t.Error("the renewed bundle needs renewal")
	}
}

func TestRenewedReplacesAnExpiringCA(t *testing.T) {
	b := mustGenerate(t, hosts, t0)
	oldCA := mustParse(t, b.CACert)[0]
	now := oldCA.NotAfter.Add(-10 * day)
	nb, err := b.renewed(hosts, now, RenewBefore)
	if err != nil {
		t.Fatal(err)
	}
	cas := mustParse(t, nb.CACert)
	if len(cas) != 2 || cas[0].Equal(oldCA) || !cas[1].Equal(oldCA) {
		t.Fatalf("CA bundle after rotation has %d certificates, want the new CA then the old one", len(cas))
	}
	if nb.NeedsRenewal(hosts, now, RenewBefore) {
		t.Error("the renewed bundle needs renewal")
	}
	// A replica still serving a certificate from the old CA stays trusted.
	oldKey, err := parseKey(b.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	oldServingPEM, _, err := issue(oldCA, oldKey, hosts, now.Add(-day))
	if err != nil {
		t.Fatal(err)
	}
	oldServing := mustParse(t, oldServingPEM)[0]
	if _, err := oldServing.Verify(x509.VerifyOptions{DNSName: hosts[0], Roots: pool(t, nb.CACert), CurrentTime: now}); err != nil {
		t.Errorf("a certificate from the previous CA no longer verifies: %v", err)
	}

	// Without the CA key the CA cannot sign, so it is replaced as well.
	noKey := *b
	noKey.CAKey = nil
	nb, err = noKey.renewed(hosts, t0.Add(340*day), RenewBefore)
	if err != nil {
		t.Fatal(err)
	}
	if cas := mustParse(t, nb.CACert); cas[0].Equal(oldCA) {
		t.Error("renewing without a CA key kept the CA")
	}
}

func TestWriteDirLoadDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "serving-certs")
	b := mustGenerate(t, hosts, t0)
	if err := b.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir: %v", err)
	}
	got, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if !got.equal(b) {
		t.Error("LoadDir did not return what WriteDir wrote")
	}

	modes := map[string]fs.FileMode{CertFile: 0o644, KeyFile: 0o600, CAFile: 0o644, CAKeyFile: 0o600}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(modes) {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files in dir = %v, want exactly the four of the bundle (no temp files)", names)
	}
	for name, want := range modes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", name, got, want)
		}
	}

	// A bundle without CA key removes a stale ca.key, and loads back without one.
	b2 := mustGenerate(t, hosts, t0)
	b2.CAKey = nil
	if err := b2.WriteDir(dir); err != nil {
		t.Fatalf("WriteDir without CA key: %v", err)
	}
	if got, err := LoadDir(dir); err != nil || !got.equal(b2) || got.CAKey != nil {
		t.Errorf("LoadDir without ca.key = %v, %v; want the bundle with no CA key", got, err)
	}

	if err := os.Remove(filepath.Join(dir, CertFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadDir with tls.crt missing: err = %v, want fs.ErrNotExist", err)
	}
	if err := b.WriteDir(""); err == nil {
		t.Error("WriteDir(\"\"): want an error")
	}
}

func TestEnsureDir(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureDir(dir, hosts, t0)
	if err != nil {
		t.Fatalf("EnsureDir on an empty dir: %v", err)
	}
	if onDisk, err := LoadDir(dir); err != nil || !onDisk.equal(first) {
		t.Fatalf("EnsureDir did not write the bundle it returned (%v)", err)
	}

	t.Run("keeps a valid bundle", func(t *testing.T) {
		got, err := EnsureDir(dir, hosts, t0.Add(100*day))
		if err != nil {
			t.Fatal(err)
		}
		if !got.equal(first) {
			t.Error("EnsureDir replaced a valid bundle")
		}
	})
	t.Run("replaces an expiring certificate, keeping the CA", func(t *testing.T) {
		now := t0.Add(340 * day)
		got, err := EnsureDir(dir, hosts, now)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(got.Cert, first.Cert) || !bytes.Equal(got.CACert, first.CACert) {
			t.Error("want a new serving certificate from the same CA")
		}
		if got.NeedsRenewal(hosts, now, RenewBefore) {
			t.Error("the new bundle needs renewal")
		}
		if onDisk, err := LoadDir(dir); err != nil || !onDisk.equal(got) {
			t.Errorf("dir does not hold the new bundle (%v)", err)
		}
	})
	t.Run("replaces a bundle missing a host", func(t *testing.T) {
		more := append(slices.Clone(hosts), "tally-webhook.elsewhere.svc")
		got, err := EnsureDir(dir, more, t0.Add(341*day))
		if err != nil {
			t.Fatal(err)
		}
		if got.NeedsRenewal(more, t0.Add(341*day), RenewBefore) {
			t.Error("the new bundle does not cover the new host")
		}
	})
	t.Run("replaces garbage", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := EnsureDir(dir, hosts, t0.Add(342*day))
		if err != nil {
			t.Fatal(err)
		}
		if got.NeedsRenewal(hosts, t0.Add(342*day), RenewBefore) {
			t.Error("the new bundle needs renewal")
		}
	})
	t.Run("an unreadable dir is an error, not a new CA", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "not-a-dir")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := EnsureDir(file, hosts, t0); err == nil {
			t.Error("want an error")
		}
	})
}

// TestHandshake proves the bundle serves TLS: a server on 127.0.0.1 with
// the generated pair, and clients that trust only the generated CA.
func TestHandshake(t *testing.T) {
	b := mustGenerate(t, hosts, time.Now())
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				if err := conn.(*tls.Conn).Handshake(); err != nil {
					return
				}
				_, _ = io.WriteString(conn, "ok")
			}()
		}
	}()

	for _, serverName := range []string{"", "tally-webhook.tally-system.svc", "localhost"} {
		t.Run("serverName="+serverName, func(t *testing.T) {
			conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(t, b.CACert), ServerName: serverName, MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer conn.Close()
			got, err := io.ReadAll(conn)
			if err != nil || string(got) != "ok" {
				t.Errorf("read %q, %v; want ok", got, err)
			}
		})
	}

	t.Run("a client trusting another CA refuses", func(t *testing.T) {
		other := mustGenerate(t, hosts, time.Now())
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(t, other.CACert), MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
			t.Fatal("handshake succeeded with the wrong CA")
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) && !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("err = %v, want an unknown authority error", err)
		}
	})
	t.Run("a name the certificate does not cover is refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool(t, b.CACert), ServerName: "evil.example.com", MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
			t.Fatal("handshake succeeded for an uncovered name")
		}
	})
}

func TestRotatorLocal(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(t0)
	r := &Rotator{Dir: dir, Hosts: hosts, Interval: time.Hour, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first, err := r.Ensure(ctx)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if again, err := r.Ensure(ctx); err != nil || !again.equal(first) {
		t.Fatalf("a second Ensure changed the bundle (%v)", err)
	}
	if r.NeedLeaderElection() {
		t.Error("NeedLeaderElection = true, want false: every replica serves webhooks")
	}

	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	waitFor(t, "Start to wait on the clock", clk.HasWaiters)

	// Jump to inside the renewal window: the next round renews.
	clk.SetTime(t0.Add(340 * day))
	waitFor(t, "the certificate in dir to be renewed", func() bool {
		b, err := LoadDir(dir)
		return err == nil && !bytes.Equal(b.Cert, first.Cert) && !b.NeedsRenewal(hosts, clk.Now(), RenewBefore)
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after the context ended")
	}
}

func TestRotatorMisconfigured(t *testing.T) {
	ctx := context.Background()
	if _, err := (&Rotator{Hosts: hosts}).Ensure(ctx); err == nil {
		t.Error("no Dir: want an error")
	}
	if _, err := (&Rotator{Dir: t.TempDir(), Hosts: hosts, Mutating: "tally"}).Ensure(ctx); err == nil {
		t.Error("webhook configurations without a client: want an error")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
