package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LeaseName is the Lease in tally's namespace that the replicas elect
// their leader with.
const LeaseName = "tally-ledger"

// Lease is the leader election lock, noting when this replica last
// renewed it. Leader election notices a lost lease only when its next
// renewal fails; a replica that was paused (stopped, or starved of CPU)
// past the lease duration wakes up still believing it leads, with a pass
// perhaps in flight. Held lets the ledger refuse to write from then on.
type Lease struct {
	resourcelock.Interface
	renewDeadline time.Duration
	clock         clock.PassiveClock

	mu sync.Mutex
	// renewed is when the last successful renewal (or acquisition) was
	// sent; zero before the first.
	renewed time.Time
}

// NewLease returns the Lease lock of namespace for an elector that gives
// up after renewDeadline without a renewal.
func NewLease(cfg *rest.Config, namespace string, renewDeadline time.Duration) (*Lease, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, namespace, LeaseName,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}, cfg, renewDeadline)
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return &Lease{Interface: lock, renewDeadline: renewDeadline, clock: clock.RealClock{}}, nil
}

// Create acquires the lease for the first time.
func (l *Lease) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.note(rec, func() error { return l.Interface.Create(ctx, rec) })
}

// Update acquires or renews the lease, or releases it.
func (l *Lease) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.note(rec, func() error { return l.Interface.Update(ctx, rec) })
}

func (l *Lease) note(rec resourcelock.LeaderElectionRecord, write func() error) error {
	sent := l.clock.Now()
	err := write()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil && rec.HolderIdentity == l.Identity():
		l.renewed = sent
	case err == nil:
		// Released.
		l.renewed = time.Time{}
	}
	return err
}

// ErrNotLeader is returned for a write the ledger refuses because this
// replica may no longer hold the lease.
var ErrNotLeader = errors.New("not writing: this replica may no longer hold the leader lease")

// Held returns nil while this replica surely holds the lease: its last
// renewal was sent less than the renew deadline ago. Another replica can
// take the lease only a lease duration (longer) after it last saw it
// renewed, so every write that passes Held is made before that.
func (l *Lease) Held() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.renewed.IsZero() {
		return fmt.Errorf("%w: it has not acquired it", ErrNotLeader)
	}
	if since := l.clock.Since(l.renewed); since >= l.renewDeadline {
		return fmt.Errorf("%w: last renewed %s ago", ErrNotLeader, since.Round(time.Millisecond))
	}
	return nil
}

// fenced is the ledger's client: every write first asks held. It logs
// each write it lets through (at V(1)), so that a replica's writes can be
// told apart.
type fenced struct {
	client.Client
	held func() error
	log  logr.Logger
}

func (f fenced) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := f.held(); err != nil {
		return err
	}
	if l := f.log.V(1); l.Enabled() {
		l.Info("leader write", "namespace", obj.GetNamespace(), "name", obj.GetName())
	}
	return f.Client.Patch(ctx, obj, patch, opts...)
}

func (f fenced) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Update(ctx, obj, opts...)
}

func (f fenced) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Create(ctx, obj, opts...)
}

func (f fenced) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := f.held(); err != nil {
		return err
	}
	return f.Client.Delete(ctx, obj, opts...)
}
