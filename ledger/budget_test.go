package ledger

import (
	"testing"
	"time"
)

// TestWriteBudgetFree: the free tokens while there are any, and with none
// how long until one is, which a refill at QPS bounds.
func TestWriteBudgetFree(t *testing.T) {
	b := newWriteBudget(10, 2)
	if n, wait := b.Free(); n != 2 || wait != 0 {
		t.Fatalf("a full bucket: Free() = %d, %s; want 2, 0", n, wait)
	}
	if !b.TryAccept() || !b.TryAccept() {
		t.Fatal("a bucket of 2 refused one of its first two requests")
	}
	n, wait := b.Free()
	if n != 0 || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("an empty bucket at 10 QPS: Free() = %d, %s; want 0 and at most 100ms", n, wait)
	}
	if b.QPS() != 10 {
		t.Errorf("QPS() = %v, want 10", b.QPS())
	}
}
