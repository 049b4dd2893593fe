package queues

import (
	"fmt"
	"reflect"
	"testing"

	"tally.dev/tally/flavors"
)

// TestShareBound: a Share keeps at most ShareMax values, then starts
// again; what it handed out stays as it was.
func TestShareBound(t *testing.T) {
	var s Share[string, *int]
	first := new(int)
	if got := s.Of("k0", first); got != first {
		t.Fatal("the first value for a key is not the one given")
	}
	for i := 1; i < ShareMax; i++ {
		s.Of(fmt.Sprint("k", i), new(int))
	}
	if got := s.Of("k0", new(int)); got != first {
		t.Fatal("a key seen before, with the share not full, got another value")
	}
	s.Of("one more", new(int))
	if len(s.values) != 1 {
		t.Fatalf("a full share took one more and holds %d values, want 1", len(s.values))
	}
	if again := new(int); s.Of("k0", again) != again {
		t.Fatal("a share started again still handed out a value from before")
	}
}

// TestUsageOfShares: Jobs that hold the same in the same flavors share
// one usage; a Job of other requests, or charged to another flavor, has
// its own, as before.
func TestUsageOfShares(t *testing.T) {
	cfg := makeConfig([]*flavors.Flavor{flavor("a"), flavor("b")}, makeCQ("q").Group("cpu").Flavor("a", "cpu=8").Flavor("b", "cpu=8").Obj())
	one, two := makeWL("one", "q", 0).Req("cpu", "2").Obj(), makeWL("two", "q", 1).Req("cpu", "2").Obj()
	more := makeWL("more", "q", 2).Req("cpu", "3").Obj()
	same := func(x, y Usage) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	u1, u2 := UsageOf(cfg, one, "main=a"), UsageOf(cfg, two, "main=a")
	if !same(u1, u2) {
		t.Errorf("two Jobs of 2 cpu in flavor a do not share their usage")
	}
	u3, u4 := UsageOf(cfg, more, "main=a"), UsageOf(cfg, two, "main=b")
	if same(u1, u3) || same(u1, u4) {
		t.Errorf("Jobs of other requests or flavors share a usage")
	}
	want := map[string]Usage{
		"u1": {{Flavor: "a", Resource: "cpu"}: amt("cpu", "2")},
		"u3": {{Flavor: "a", Resource: "cpu"}: amt("cpu", "3")},
		"u4": {{Flavor: "b", Resource: "cpu"}: amt("cpu", "2")},
	}
	for name, got := range map[string]Usage{"u1": u1, "u3": u3, "u4": u4} {
		if !got.Equal(want[name]) {
			t.Errorf("%s = %v, want %v", name, got, want[name])
		}
	}
}
