package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
)

// lockStub is a resourcelock.Interface whose writes succeed or fail as
// told and take as long as told (on the test's clock).
type lockStub struct {
	resourcelock.Interface
	clock *clocktesting.FakeClock
	fail  error
	takes time.Duration
}

func (s *lockStub) Create(context.Context, resourcelock.LeaderElectionRecord) error { return s.write() }
func (s *lockStub) Update(context.Context, resourcelock.LeaderElectionRecord) error { return s.write() }
func (s *lockStub) Identity() string                                                { return "me" }

func (s *lockStub) write() error {
	s.clock.Step(s.takes)
	return s.fail
}

func TestLeaseHeld(t *testing.T) {
	const deadline = 10 * time.Second
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	stub := &lockStub{clock: clk}
	l := &Lease{Interface: stub, renewDeadline: deadline, clock: clk}
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	ctx := context.Background()
	held := func(want bool, when string) {
		t.Helper()
		err := l.Held()
		if (err == nil) != want {
			t.Fatalf("%s: Held() = %v, want held=%v", when, err, want)
		}
		if err != nil && !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s: Held() = %v, not an ErrNotLeader", when, err)
		}
	}

	held(false, "before any acquisition")
	stub.fail = errors.New("lease held by another replica")
	if err := l.Create(ctx, mine); err == nil {
		t.Fatal("Create: the stub's error was lost")
	}
	held(false, "after a failed acquisition")
	stub.fail = nil
	if err := l.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	held(true, "just after acquiring")
	clk.Step(deadline - time.Millisecond)
	held(true, "just before the renew deadline")
	clk.Step(time.Millisecond)
	held(false, "at the renew deadline without a renewal (a paused replica waking up)")

	// A renewal counts from when it was sent, not from when it returned.
	stub.takes = 3 * time.Second
	if err := l.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	stub.takes = 0
	clk.Step(deadline - 3*time.Second - time.Millisecond)
	held(true, "a slow renewal, just before the deadline counted from its sending")
	clk.Step(time.Millisecond)
	held(false, "a slow renewal, at the deadline counted from its sending")

	if err := l.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	held(true, "after a renewal")
	stub.fail = errors.New("timeout")
	_ = l.Update(ctx, mine)
	clk.Step(deadline)
	held(false, "after a failed renewal, once the deadline passed")

	stub.fail = nil
	if err := l.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	held(false, "after releasing the lease")
}

// patchCounter counts the patches that reach it.
type patchCounter struct {
	client.Client
	patches int
}

func (c *patchCounter) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	c.patches++
	return nil
}

func TestFencedClient(t *testing.T) {
	inner := &patchCounter{}
	var heldErr error
	f := fenced{Client: inner, held: func() error { return heldErr }, log: logr.Discard()}
	obj := kinds.Job{}.New()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{}`))
	ctx := context.Background()
	if err := f.Patch(ctx, obj, patch); err != nil || inner.patches != 1 {
		t.Fatalf("held: Patch = %v, %d patches sent; want nil, 1", err, inner.patches)
	}
	heldErr = ErrNotLeader
	for name, write := range map[string]func() error{
		"Patch":  func() error { return f.Patch(ctx, obj, patch) },
		"Update": func() error { return f.Update(ctx, obj) },
		"Create": func() error { return f.Create(ctx, obj) },
		"Delete": func() error { return f.Delete(ctx, obj) },
	} {
		if err := write(); !errors.Is(err, ErrNotLeader) {
			t.Errorf("not held: %s = %v, want ErrNotLeader", name, err)
		}
	}
	if inner.patches != 1 {
		t.Errorf("not held: %d patches reached the API server, want none after the first", inner.patches-1)
	}
}
