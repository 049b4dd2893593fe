package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Bundle is a CA and a serving certificate signed by it, PEM encoded.
//
// CACert holds the signing CA first; it may be followed by the previous CA
// while that one is still valid, so that certificates it signed stay
// trusted during a CA rotation. CAKey is the signing CA's key; it may be
// empty in a bundle read from a store that does not keep it.
type Bundle struct{ CACert, CAKey, Cert, Key []byte }

// File names in a certificate directory and keys in a Secret. tls.crt and
// tls.key are what controller-runtime's webhook server reads.
const (
	CertFile  = "tls.crt"
	KeyFile   = "tls.key"
	CAFile    = "ca.crt"
	CAKeyFile = "ca.key"
)

const (
	// caValidity is how long a generated CA is valid.
	caValidity = 10 * 365 * 24 * time.Hour
	// validity is how long a generated serving certificate is valid.
	validity = 365 * 24 * time.Hour
	// RenewBefore is how long before expiry EnsureDir and EnsureSecret
	// replace a certificate.
	RenewBefore = 30 * 24 * time.Hour
	// backdate makes certificates valid a little before now, so a peer
	// whose clock runs behind accepts them.
	backdate = time.Hour
)

// Generate makes a new self-signed CA (valid 10 years) and a serving
// certificate (valid 1 year) for hosts, using now as the current time.
// Hosts that parse as IP addresses become IP SANs, the others DNS SANs.
func Generate(hosts []string, now time.Time) (*Bundle, error) {
	if len(hosts) == 0 {
		return nil, errors.New("generating certificates: no hosts")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("tally-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the new CA certificate: %w", err)
	}
	b := &Bundle{CACert: pemBlock("CERTIFICATE", der)}
	if b.CAKey, err = keyPEM(caKey); err != nil {
		return nil, err
	}
	if b.Cert, b.Key, err = issue(ca, caKey, hosts, now); err != nil {
		return nil, err
	}
	return b, nil
}

// issue makes a serving certificate for hosts signed by ca.
func issue(ca *x509.Certificate, caKey crypto.Signer, hosts []string, now time.Time) (certPEM, keyPEMBytes []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the serving key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the serving certificate: %w", err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), kp, nil
}

// NeedsRenewal reports whether the serving certificate expires (or its CA
// does) within `within` of now, is not yet valid, does not cover every one
// of hosts, does not match its key, or does not parse or chain to the CA.
func (b *Bundle) NeedsRenewal(hosts []string, now time.Time, within time.Duration) bool {
	if b == nil {
		return true
	}
	cas, err := parseCerts(b.CACert)
	if err != nil {
		return true
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return true
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return true
	}
	roots := x509.NewCertPool()
	for _, ca := range cas {
		roots.AddCert(ca)
	}
	chains, err := cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return true
	}
	deadline := now.Add(within)
	for _, c := range chains[0] {
		if deadline.After(c.NotAfter) {
			return true
		}
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return true
		}
	}
	return false
}

// renewed returns a bundle for hosts that does not need renewal within
// `within`: a new serving certificate from b's CA when that CA is usable
// and stays valid long enough, else a new CA that still trusts b's
// current CA until it expires.
func (b *Bundle) renewed(hosts []string, now time.Time, within time.Duration) (*Bundle, error) {
	if len(hosts) == 0 {
		return nil, errors.New("renewing certificates: no hosts")
	}
	cas, caErr := parseCerts(b.CACert)
	caKey, keyErr := parseKey(b.CAKey)
	if caErr == nil && keyErr == nil && usableCA(cas[0], caKey, now.Add(within)) {
		out := &Bundle{CACert: b.CACert, CAKey: b.CAKey}
		var err error
		if out.Cert, out.Key, err = issue(cas[0], caKey, hosts, now); err != nil {
			return nil, err
		}
		return out, nil
	}
	out, err := Generate(hosts, now)
	if err != nil {
		return nil, err
	}
	if caErr == nil {
		for _, ca := range cas {
			if now.Before(ca.NotAfter) {
				out.CACert = append(out.CACert, pemBlock("CERTIFICATE", ca.Raw)...)
			}
		}
	}
	return out, nil
}

// usableCA reports whether ca can sign with key and is valid past deadline.
func usableCA(ca *x509.Certificate, key crypto.Signer, deadline time.Time) bool {
	pub, ok := ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(key.Public()) && ca.IsCA && deadline.Before(ca.NotAfter)
}

// WriteDir writes tls.crt, tls.key, ca.crt and ca.key into dir, creating
// it if needed. Each file is replaced atomically (temp file, then rename);
// the key files get mode 0600 and the certificates 0644. The key is
// written before the certificate, so a reader sees at worst one
// mismatched pair, which certwatcher rejects and then reloads. When the
// bundle has no CA key, a stale ca.key is removed.
func (b *Bundle) WriteDir(dir string) error {
	if dir == "" {
		return errors.New("writing certificates: no directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CAFile, b.CACert, 0o644},
		{CAKeyFile, b.CAKey, 0o600},
		{KeyFile, b.Key, 0o600},
		{CertFile, b.Cert, 0o644},
	}
	for _, f := range files {
		if len(f.data) == 0 && f.name == CAKeyFile {
			if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing %s: %w", f.name, err)
			}
			continue
		}
		if err := writeAtomic(dir, f.name, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeAtomic(dir, name string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// LoadDir reads the bundle WriteDir wrote. ca.key may be absent; a missing
// certificate or key file is an error that wraps fs.ErrNotExist. The
// contents are not checked: see NeedsRenewal.
func LoadDir(dir string) (*Bundle, error) {
	b := &Bundle{}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{CAFile, &b.CACert}, {CAKeyFile, &b.CAKey}, {KeyFile, &b.Key}, {CertFile, &b.Cert}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if errors.Is(err, fs.ErrNotExist) && f.name == CAKeyFile {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading certificates: %w", err)
		}
		*f.dst = data
	}
	return b, nil
}

// EnsureDir returns the bundle in dir when it is good for at least
// RenewBefore more, without writing anything. Otherwise (files missing,
// unparsable, expiring, or not covering hosts) it renews it, writes it and
// returns the new one. Errors reading dir other than missing files are
// returned.
func EnsureDir(dir string, hosts []string, now time.Time) (*Bundle, error) {
	b, err := LoadDir(dir)
	switch {
	case err == nil && !b.NeedsRenewal(hosts, now, RenewBefore):
		return b, nil
	case err == nil:
		b, err = b.renewed(hosts, now, RenewBefore)
	case errors.Is(err, fs.ErrNotExist):
		b, err = Generate(hosts, now)
	}
	if err != nil {
		return nil, err
	}
	if err := b.WriteDir(dir); err != nil {
		return nil, err
	}
	return b, nil
}

// equal reports whether b and o hold the same bytes.
func (b *Bundle) equal(o *Bundle) bool {
	if b == nil || o == nil {
		return b == o
	}
	return bytes.Equal(b.CACert, o.CACert) && bytes.Equal(b.CAKey, o.CAKey) &&
		bytes.Equal(b.Cert, o.Cert) && bytes.Equal(b.Key, o.Key)
}

// notAfter returns when the serving certificate expires, or the zero time
// when it does not parse.
func (b *Bundle) notAfter() time.Time {
	certs, err := parseCerts(b.Cert)
	if err != nil {
		return time.Time{}
	}
	return certs[0].NotAfter
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding a private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// parseCerts returns every CERTIFICATE block of data, in order; at least
// one, or an error.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// parseKey reads a PKCS#8, SEC 1 (EC) or PKCS#1 (RSA) private key.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("unsupported private key type %T", k)
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("unparsable private key")
}
