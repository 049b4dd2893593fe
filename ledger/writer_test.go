package ledger

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestWriterFree: a pass may decide the free slots, or the client's free
// tokens when fewer; short of tokens it is told how long until it has
// one, or a chunk's worth after a pass that stopped at its budget.
func TestWriterFree(t *testing.T) {
	for _, tc := range []struct {
		name        string
		workers     int
		inFlight    int
		budget      func() (float64, float64)
		bounded     bool
		n           int
		short       bool
		wait, chunk time.Duration
	}{
		{name: "no budget", workers: 8, inFlight: 3, n: 5},
		{name: "tokens enough", workers: 8, budget: func() (float64, float64) { return 20, 100 }, n: 8},
		{name: "short of tokens", workers: 8, budget: func() (float64, float64) { return 2.5, 10 }, n: 2, short: true},
		{name: "no token", workers: 8, budget: func() (float64, float64) { return -0.5, 10 }, n: 0, short: true, wait: 150 * time.Millisecond},
		// chunk: min(8/2, 100/10) = 4; 4-1 tokens at 100 a second.
		{name: "bounded waits for a chunk", workers: 8, budget: func() (float64, float64) { return 1, 100 }, bounded: true, n: 1, short: true, wait: 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter[write](tc.workers, tc.budget, clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
			for range tc.inFlight {
				w.slots <- struct{}{}
			}
			w.bounded.Store(tc.bounded)
			n, short, wait := w.free()
			if n != tc.n || short != tc.short || wait != tc.wait {
				t.Errorf("free() = %d, %v, %v; want %d, %v, %v", n, short, wait, tc.n, tc.short, tc.wait)
			}
		})
	}
	if got := newWriter[write](8, func() (float64, float64) { return 0, 5 }, nil, nil).chunk(); got != 1 {
		t.Errorf("chunk with 5 QPS = %d, want at least 1", got)
	}
	if got := newWriter[write](128, nil, nil, nil).chunk(); got != 64 {
		t.Errorf("chunk without a budget = %d, want half the slots, 64", got)
	}
}

// TestWriterWakes: pokes coalesce; the budget's timer asks for one pass
// once, on the writer's clock; a quiet writer has nothing asked for or in
// flight.
func TestWriterWakes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := newWriter[write](4, nil, clk, nil)
	if !w.quiet() {
		t.Fatalf("a new writer is not quiet")
	}
	w.wakePass()
	w.wakePass()
	w.wakeOnArrival()
	if len(w.wake) != 1 || len(w.arrive) != 1 || w.quiet() {
		t.Fatalf("pokes: wake %d, arrive %d, quiet %v; want 1, 1, false", len(w.wake), len(w.arrive), w.quiet())
	}
	<-w.wake
	<-w.arrive
	w.wakeAfter(time.Second)
	w.wakeAfter(time.Second)
	if !w.budgetWake.Load() {
		t.Fatalf("no timer set")
	}
	clk.Step(999 * time.Millisecond)
	if len(w.wake) != 0 {
		t.Fatalf("the timer fired early")
	}
	clk.Step(time.Millisecond)
	if len(w.wake) != 1 || w.budgetWake.Load() {
		t.Errorf("after the timer: wake %d, timer set %v; want 1, false", len(w.wake), w.budgetWake.Load())
	}
	if clk.HasWaiters() {
		t.Errorf("two wakeAfter calls set two timers")
	}
}

// TestWriterWriteAll: every write is made, no more at once than the
// slots, and a writer that stopped at its budget asks for a pass once a
// chunk of slots is free; Start's wait covers tracked work.
func TestWriterWriteAll(t *testing.T) {
	var made, now, most atomic.Int32
	release := make(chan struct{})
	w := newWriter[write](4, nil, nil, func(context.Context, write) {
		n := now.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		now.Add(-1)
		made.Add(1)
	})
	w.bounded.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		w.writeAll(ctx, make([]write, 10))
		close(done)
	}()
	for range 10 {
		release <- struct{}{}
	}
	<-done
	w.inflight.Wait()
	if made.Load() != 10 || most.Load() > 4 {
		t.Errorf("made %d writes, at most %d at once; want 10, at most 4", made.Load(), most.Load())
	}
	if len(w.wake) != 1 {
		t.Errorf("a bounded writer whose slots freed asked for %d passes, want 1", len(w.wake))
	}

	var mu sync.Mutex
	ran := false
	w.goTracked(func(context.Context) {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		ran = true
		mu.Unlock()
	})
	w.inflight.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !ran {
		t.Errorf("the wait for tracked work returned before it ended")
	}

	// Stopped, the work's context ends, and stays ended for new work.
	ended := make(chan error, 2)
	w.goTracked(func(ctx context.Context) {
		w.stop()
		<-ctx.Done()
		ended <- ctx.Err()
	})
	w.goTracked(func(ctx context.Context) {
		<-ctx.Done()
		ended <- ctx.Err()
	})
	w.inflight.Wait()
	if !w.stopped() || <-ended == nil || <-ended == nil {
		t.Errorf("work whose ledger stopped did not see its context end")
	}
	w.stop()
}

// TestWriterAwaitBudget: label writes wait while passes are short of
// tokens, and give up when their context ends.
func TestWriterAwaitBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := newWriter[write](4, nil, clk, nil)
	if !w.awaitBudget(context.Background()) {
		t.Fatalf("a writer that is not short held a label write")
	}
	w.noteBudget(true, true)
	got := make(chan bool)
	go func() { got <- w.awaitBudget(context.Background()) }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	w.noteBudget(false, true)
	if w.short.Load() {
		t.Fatalf("a pass that did not stop at its budget left the writer short")
	}
	clk.Step(labelBudgetRecheck)
	if !<-got {
		t.Errorf("a label write held while short gave up")
	}
	w.noteBudget(true, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.awaitBudget(ctx) {
		t.Errorf("a label write whose context ended did not give up")
	}
}

// TestWriterStartsNothingOnceStopped: work started before the stop runs
// with a context that the stop ends; none starts after it.
func TestWriterStartsNothingOnceStopped(t *testing.T) {
	w := newWriter[write](1, nil, clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
	ended := make(chan struct{})
	w.goTracked(func(ctx context.Context) {
		<-ctx.Done()
		close(ended)
	})
	w.stop()
	<-ended
	var ran atomic.Bool
	w.goTracked(func(context.Context) { ran.Store(true) })
	w.inflight.Wait()
	if ran.Load() {
		t.Errorf("work started after the stop")
	}
}

// TestWriterFinishWaitsForAllItStarted: work that handlers start while
// the ledger stops either does not start or is waited for; none runs
// once finish has returned.
func TestWriterFinishWaitsForAllItStarted(t *testing.T) {
	for range 200 {
		w := newWriter[write](1, nil, clocktesting.NewFakeClock(time.Unix(0, 0)), nil)
		var finished atomic.Bool
		var late atomic.Int32
		var callers sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				<-start
				for range 50 {
					w.goTracked(func(context.Context) {
						if finished.Load() {
							late.Add(1)
						}
					})
				}
			}()
		}
		close(start)
		w.finish()
		finished.Store(true)
		callers.Wait()
		w.inflight.Wait()
		if n := late.Load(); n > 0 {
			t.Fatalf("%d pieces of work ran after finish returned", n)
		}
	}
}
