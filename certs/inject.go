package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// InjectCABundle sets caBundle to caPEM on every webhook of the named
// MutatingWebhookConfiguration and ValidatingWebhookConfiguration; either
// name may be "" to skip it. Each is read and updated, retried on
// conflict; a configuration that already carries caPEM is not written. A
// missing configuration is an error naming it. caPEM must hold at least
// one PEM certificate: an empty bundle would make the API server trust
// its system roots instead.
func InjectCABundle(ctx context.Context, c client.Client, mutating, validating string, caPEM []byte) error {
	if _, err := parseCerts(caPEM); err != nil {
		return fmt.Errorf("injecting the CA bundle: %w", err)
	}
	if mutating != "" {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		err := inject(ctx, c, mutating, m, caPEM, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(m.Webhooks))
			for i := range m.Webhooks {
				out[i] = &m.Webhooks[i].ClientConfig
			}
			return out
		})
		if err != nil {
			return fmt.Errorf("injecting the CA bundle into MutatingWebhookConfiguration %q: %w", mutating, err)
		}
	}
	if validating != "" {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		err := inject(ctx, c, validating, v, caPEM, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(v.Webhooks))
			for i := range v.Webhooks {
				out[i] = &v.Webhooks[i].ClientConfig
			}
			return out
		})
		if err != nil {
			return fmt.Errorf("injecting the CA bundle into ValidatingWebhookConfiguration %q: %w", validating, err)
		}
	}
	return nil
}

// inject reads obj by name, sets caPEM on the client configs that configs
// returns for it, and updates it if anything changed, retrying on
// conflict.
func inject(ctx context.Context, c client.Client, name string, obj client.Object, caPEM []byte, configs func() []*admissionregistrationv1.WebhookClientConfig) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		changed := false
		for _, cc := range configs() {
			if !bytes.Equal(cc.CABundle, caPEM) {
				cc.CABundle = caPEM
				changed = true
			}
		}
		if !changed {
			return nil
		}
		return c.Update(ctx, obj)
	})
}

// Rotator keeps the webhook serving certificate fresh. Each round (Ensure)
// it makes sure the bundle is good for at least RenewBefore more, in Dir
// alone (EnsureDir) or in Secret and then Dir (EnsureSecret, WriteDir when
// Dir differs), and injects the CA into the webhook configurations named
// Mutating and Validating. As a manager.Runnable it runs a round every
// Interval on every replica, since every replica serves the webhooks.
type Rotator struct {
	// Client reads and writes Secret and the webhook configurations. It
	// should not be a cached client. It may be nil when Secret is nil and
	// Mutating and Validating are "" (pure local mode).
	Client client.Client
	// Dir is where the webhook server reads tls.crt and tls.key.
	Dir   string
	Hosts []string
	// Secret, when set, is the store shared by all replicas; nil keeps
	// the bundle only in Dir.
	Secret *client.ObjectKey
	// Mutating and Validating name the webhook configurations to inject
	// the CA into; "" skips one.
	Mutating, Validating string
	// Interval between rounds; 0 means one hour.
	Interval time.Duration
	// Clock is the time source; nil means the real clock. When it also
	// implements clock.Clock, Start waits on its timers.
	Clock clock.PassiveClock

	mu      sync.Mutex
	current *Bundle
}

var _ manager.LeaderElectionRunnable = (*Rotator)(nil)

// NeedLeaderElection is false: every replica serves webhooks and needs a
// certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Ensure runs one round and returns the bundle in force. Start calls it
// every Interval; call it once before the webhook server starts, so the
// server finds its certificate.
func (r *Rotator) Ensure(ctx context.Context) (*Bundle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Dir == "" {
		return nil, errors.New("certificate rotator: no directory")
	}
	if r.Client == nil && (r.Secret != nil || r.Mutating != "" || r.Validating != "") {
		return nil, errors.New("certificate rotator: a client is needed for a Secret or webhook configurations")
	}
	now := r.clock().Now()
	var b *Bundle
	var err error
	if r.Secret == nil {
		b, err = EnsureDir(r.Dir, r.Hosts, now)
	} else if b, err = EnsureSecret(ctx, r.Client, *r.Secret, r.Hosts, now); err == nil {
		if onDisk, lerr := LoadDir(r.Dir); lerr != nil || !onDisk.equal(b) {
			err = b.WriteDir(r.Dir)
		}
	}
	if err != nil {
		return nil, err
	}
	if r.Mutating != "" || r.Validating != "" {
		if err := InjectCABundle(ctx, r.Client, r.Mutating, r.Validating, b.CACert); err != nil {
			return nil, err
		}
	}
	if r.current != nil && !r.current.equal(b) {
		log.FromContext(ctx).Info("webhook certificate rotated", "dir", r.Dir, "notAfter", b.notAfter())
	}
	r.current = b
	return b, nil
}

// retryInterval is the wait after a failed round, when shorter than
// Interval.
const retryInterval = time.Minute

// Start runs a round every Interval until ctx is done, then returns nil.
// A failed round is logged and retried after a minute (or Interval, if
// shorter); it does not stop the manager.
func (r *Rotator) Start(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = time.Hour
	}
	clk, ok := r.clock().(clock.Clock)
	if !ok {
		clk = clock.RealClock{}
	}
	wait := interval
	for {
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		wait = interval
		if _, err := r.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.FromContext(ctx).Error(err, "rotating the webhook certificate")
			wait = min(interval, retryInterval)
		}
	}
}

func (r *Rotator) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}
