package ledger

import "testing"

// TestWriteBudgetFree: the free tokens, which the requests sent take, and
// the rate.
func TestWriteBudgetFree(t *testing.T) {
	b := newWriteBudget(10, 2)
	if tokens, qps := b.Free(); tokens != 2 || qps != 10 {
		t.Fatalf("a full bucket: Free() = %v, %v; want 2, 10", tokens, qps)
	}
	if !b.TryAccept() || !b.TryAccept() {
		t.Fatal("a bucket of 2 refused one of its first two requests")
	}
	if tokens, _ := b.Free(); tokens >= 1 {
		t.Fatalf("an emptied bucket at 10 QPS has %v tokens at once, want less than 1", tokens)
	}
	if b.QPS() != 10 {
		t.Errorf("QPS() = %v, want 10", b.QPS())
	}
}
