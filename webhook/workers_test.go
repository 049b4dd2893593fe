package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkers: requests run at once however many arrive together, the
// goroutines that served them wait for the next ones (no more than
// maxIdle), a later request runs on one of them, and a panic reaches the
// caller with the stack it came from.
func TestWorkers(t *testing.T) {
	p := newWorkers(3)
	const n = 10
	var started, done sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			_ = p.within(context.Background(), func() {
				started.Done()
				<-release
			})
		}()
	}
	waitOrFail(t, &started, "the requests did not all run at once")
	close(release)
	waitOrFail(t, &done, "the requests did not return")
	deadline := time.Now().Add(10 * time.Second)
	for p.idle.Load() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for work, want 3", p.idle.Load())
		}
		time.Sleep(time.Millisecond)
	}
	var during int32
	_ = p.within(context.Background(), func() { during = p.idle.Load() })
	if during != 2 {
		t.Errorf("a request ran with %d goroutines waiting, want 2: it did not run on a waiting one", during)
	}

	var got any
	func() {
		defer func() { got = recover() }()
		_ = p.within(context.Background(), func() { panic("boom") })
	}()
	if s := fmt.Sprint(got); !strings.HasPrefix(s, "boom\n\n") || !strings.Contains(s, "workers_test.go") {
		t.Errorf("the panic reached the caller as %q, want boom with its stack", s)
	}
	_ = p.within(context.Background(), func() {}) // the worker that panicked still serves
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, msg string) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}
