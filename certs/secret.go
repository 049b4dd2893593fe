package certs

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretAttempts bounds how often EnsureSecret re-reads the Secret after
// losing a race to another writer.
const secretAttempts = 5

// EnsureSecret is EnsureDir with a kubernetes.io/tls Secret as the store
// (keys tls.crt, tls.key, ca.crt and ca.key), so that several replicas
// share one CA. It reads the Secret and:
//   - creates it when missing; if another replica created it first
//     (AlreadyExists), it reads theirs;
//   - replaces an expiring or otherwise unusable bundle with an Update
//     guarded by the resourceVersion it read; on a Conflict it reads again;
//   - otherwise returns the bundle as it is, writing nothing.
//
// It returns the bundle in force. c should read from the API server, not
// from a cache, or a re-read may miss the winner's write.
func EnsureSecret(ctx context.Context, c client.Client, key client.ObjectKey, hosts []string, now time.Time) (*Bundle, error) {
	for range secretAttempts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			b, err := Generate(hosts, now)
			if err != nil {
				return nil, err
			}
			s = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Type:       corev1.SecretTypeTLS,
			}
			setSecretData(s, b)
			err = c.Create(ctx, s)
			switch {
			case apierrors.IsAlreadyExists(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("creating Secret %s: %w", key, err)
			}
			return b, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		b := secretBundle(s)
		if !b.NeedsRenewal(hosts, now, RenewBefore) {
			return b, nil
		}
		nb, err := b.renewed(hosts, now, RenewBefore)
		if err != nil {
			return nil, err
		}
		setSecretData(s, nb)
		err = c.Update(ctx, s)
		switch {
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("renewing Secret %s: %w", key, err)
		}
		return nb, nil
	}
	return nil, fmt.Errorf("ensuring Secret %s: still conflicting after %d attempts", key, secretAttempts)
}

func secretBundle(s *corev1.Secret) *Bundle {
	return &Bundle{
		CACert: s.Data[CAFile],
		CAKey:  s.Data[CAKeyFile],
		Cert:   s.Data[corev1.TLSCertKey],
		Key:    s.Data[corev1.TLSPrivateKeyKey],
	}
}

// setSecretData writes b's four keys into s, keeping any other keys.
func setSecretData(s *corev1.Secret, b *Bundle) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[corev1.TLSCertKey] = b.Cert
	s.Data[corev1.TLSPrivateKeyKey] = b.Key
	s.Data[CAFile] = b.CACert
	s.Data[CAKeyFile] = b.CAKey
}
