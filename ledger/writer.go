package ledger

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// writer runs the ledger's writes (each a W) and wakes its passes. It owns the write
// slots that bound the writes in flight (Options.Workers), the goroutines
// that make them, what a pass may decide of the client's budget
// (Options.Budget), and the pokes that ask for a pass. Everything in it is
// a channel or an atomic: it is used with and without the ledger's lock.
type writer[W any] struct {
	// slots bounds the writes in flight; inflight counts them and the
	// other work the ledger waits for before Start returns.
	slots    chan struct{}
	inflight sync.WaitGroup
	// handoff hands a write to a goroutine that waits for one.
	handoff chan queuedWrite[W]
	// bounded: the last pass stopped at its budget (see decide), and
	// the next is asked for once a pass's worth is free (chunk): by the
	// write that frees the slots, or, short of the client's tokens
	// (Options.Budget), by a timer; while short, the label writes wait.
	// budgetWake: that timer is set.
	bounded, short, budgetWake atomic.Bool
	// wake asks for a pass; arrive is poked by a Job that starts
	// waiting: after a pass that decided nothing, arrivals alone are
	// coalesced (see arrivalDelay).
	wake, arrive chan struct{}
	budget       func() (tokens, qps float64)
	clock        clock.WithTickerAndDelayedExecution
	// do makes one write.
	do func(context.Context, W)
	// spawn runs work that must not hold up an informer handler: in a
	// goroutine of its own.
	spawn func(func())
	// done is closed when the ledger stops (stop): the work it started
	// ends, and no more starts. mu orders the close before or after each
	// start of tracked work (goTracked), so that finish waits for every
	// piece that started.
	done chan struct{}
	mu   sync.Mutex
}

func newWriter[W any](workers int, budget func() (tokens, qps float64), clk clock.WithTickerAndDelayedExecution, do func(context.Context, W)) *writer[W] {
	return &writer[W]{
		slots: make(chan struct{}, workers), handoff: make(chan queuedWrite[W]),
		wake: make(chan struct{}, 1), arrive: make(chan struct{}, 1),
		budget: budget, clock: clk, do: do,
		spawn: func(f func()) { go f() },
		done:  make(chan struct{}),
	}
}

// stop ends the work the ledger started (context) and has no more
// start (stopped).
func (w *writer[W]) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped() {
		close(w.done)
	}
}

// finish stops the writer and waits for the work in flight: the writes
// that writeAll started and the work that goTracked started, none of
// which starts after the stop.
func (w *writer[W]) finish() {
	w.stop()
	w.inflight.Wait()
}

// stopped says whether the ledger stopped.
func (w *writer[W]) stopped() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// context returns a context for work the ledger starts outside a pass,
// which ends when the ledger stops, or when release is called, as it
// must be once the work is done.
func (w *writer[W]) context() (ctx context.Context, release context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-w.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// wakePass asks for an admission pass; pokes coalesce.
func (w *writer[W]) wakePass() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wakeOnArrival asks for a pass for a Job that starts waiting.
func (w *writer[W]) wakeOnArrival() {
	select {
	case w.arrive <- struct{}{}:
	default:
	}
}

// arrivalDelay is the longest a Job that starts waiting after a pass that
// decided nothing waits for the next pass.
const arrivalDelay = 100 * time.Millisecond

// quiet says that no admission, preemption or capture write is in flight
// and no admission pass is asked for.
func (w *writer[W]) quiet() bool {
	return len(w.slots) == 0 && len(w.wake) == 0 && len(w.arrive) == 0
}

// goTracked runs f as spawn does, counted in flight (finish waits for
// it), with a context that ends when the ledger stops; once the ledger
// has stopped it starts nothing.
func (w *writer[W]) goTracked(f func(context.Context)) {
	w.mu.Lock()
	if w.stopped() {
		w.mu.Unlock()
		return
	}
	w.inflight.Add(1)
	w.mu.Unlock()
	w.spawn(func() {
		defer w.inflight.Done()
		ctx, release := w.context()
		defer release()
		f(ctx)
	})
}

// free is how many writes a pass may decide now: the free write slots,
// or fewer, the client's free tokens (short). When short, wait is how
// long until a pass's worth of tokens is free (chunk).
func (w *writer[W]) free() (n int, short bool, wait time.Duration) {
	n = cap(w.slots) - len(w.slots)
	if w.budget == nil {
		return n, false, 0
	}
	tokens, qps := w.budget()
	if t := int(max(tokens, 0)); t < n {
		need := float64(w.chunk())
		if !w.bounded.Load() {
			need = 1
		}
		return t, true, time.Duration(max(need-tokens, 0) / qps * float64(time.Second))
	}
	return n, false, 0
}

// chunk is the least budget a pass waits for after one that stopped at
// its budget: half the write slots, or what the client may send in
// 100ms, whichever is less. Passes that each decide a write or two would
// cost, at scale, more than the writes.
func (w *writer[W]) chunk() int {
	n := cap(w.slots) / 2
	if w.budget != nil {
		_, qps := w.budget()
		n = min(n, int(qps/10))
	}
	return max(n, 1)
}

// noteBudget notes whether the pass just decided stopped at its budget
// (full), and whether it was short of the client's tokens.
func (w *writer[W]) noteBudget(full, short bool) {
	w.bounded.Store(full)
	w.short.Store(full && short)
}

// wakeAfter asks for a pass in d, unless one is asked for already.
func (w *writer[W]) wakeAfter(d time.Duration) {
	if d <= 0 || !w.budgetWake.CompareAndSwap(false, true) {
		return
	}
	w.clock.AfterFunc(d, func() {
		w.budgetWake.Store(false)
		w.wakePass()
	})
}

// awaitBudget holds a label write while the admission passes want more
// of the client's budget than is free (short): admissions and
// preemptions go first. False if ctx ended.
func (w *writer[W]) awaitBudget(ctx context.Context) bool {
	for w.short.Load() {
		select {
		case <-ctx.Done():
			return false
		case <-w.clock.After(labelBudgetRecheck):
		}
	}
	return true
}

// labelBudgetRecheck is how often a label write held by awaitBudget
// looks again.
const labelBudgetRecheck = 50 * time.Millisecond

// writeAll starts the writes, at most Workers at a time, and returns
// without waiting for them: the next pass need not wait, since every write
// in flight has its Job set aside (assumed, evicting) until it is done.
func (w *writer[W]) writeAll(ctx context.Context, writes []W) {
	for _, wr := range writes {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		w.inflight.Add(1)
		select {
		case w.handoff <- queuedWrite[W]{ctx, wr}:
		default:
			go w.run(ctx, queuedWrite[W]{ctx, wr})
		}
	}
}

// queuedWrite is a write and the context it is made in.
type queuedWrite[W any] struct {
	ctx context.Context
	w   W
}

// run makes q, then each write that writeAll hands it while it waits,
// until ctx ends. A write handed to a goroutine that has made others
// before runs on the stack they grew: one goroutine per write grew a new
// stack each time, to encode its patch and send it. No more of them run
// than writes ever ran at once (the slots' capacity): writeAll starts one
// only when none waits.
func (w *writer[W]) run(ctx context.Context, q queuedWrite[W]) {
	for {
		w.one(q.ctx, q.w)
		select {
		case q = <-w.handoff:
		case <-ctx.Done():
			return
		}
	}
}

// one makes one write and frees its slot; once a pass's worth of slots
// is free after a pass that stopped at its budget, it asks for a pass.
func (w *writer[W]) one(ctx context.Context, wr W) {
	defer func() {
		<-w.slots
		if w.bounded.Load() && cap(w.slots)-len(w.slots) >= w.chunk() {
			w.wakePass()
		}
		w.inflight.Done()
	}()
	w.do(ctx, wr)
}
