package ledger

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"tally.dev/tally/queues"
)

// steps runs script's lines as a scenario's, without its report.
func (s *scenario) steps(script ...string) {
	s.t.Helper()
	for _, line := range script {
		s.step(strings.Fields(line))
		s.clock.Step(time.Second)
		s.runTimers()
	}
}

// admits runs a pass and returns the names of the workloads it admits.
func (s *scenario) admits() string {
	s.t.Helper()
	var names []string
	for _, w := range s.l.decide() {
		s.writes[w.w.Name] = w
		names = append(names, w.w.Name)
	}
	return strings.Join(names, " ")
}

// requeuedBehindB: a is admitted, b created, and a evicted because its
// pods were not ready in time; both wait, a's backoff over.
var requeuedBehindB = []string{
	"create a cpu=4", "pass", "landed a", "ready a 1 0", "running a",
	"tick 20s", "create b cpu=4", "tick 40s",
	"timeout a", "stopped a", "pods a 0", "tick 10s",
}

// TestPodsReadyOrderReconfigured: a config that changes
// requeuingStrategy.timestamp reorders the workloads that wait.
func TestPodsReadyOrderReconfigured(t *testing.T) {
	for _, tc := range []struct{ from, to, first string }{
		{from: queues.EvictionTimestamp, to: queues.CreationTimestamp, first: "a"},
		{from: queues.CreationTimestamp, to: queues.EvictionTimestamp, first: "b"},
	} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			s := newScenario(t)
			s.steps(append([]string{"podsready 1m 10s 3 timestamp=" + tc.from}, requeuedBehindB...)...)
			cfg := s.config(s.quota)
			cfg.PodsReady = &queues.PodsReady{Timeout: time.Minute, BackoffBase: 10 * time.Second, BackoffMax: time.Hour,
				BackoffLimitCount: ptr.To(int32(3)), Timestamp: tc.to}
			s.l.reconfigure(cfg)
			if got := s.admits(); got != tc.first {
				t.Errorf("after the change to %s, the pass admits %q, want %q", tc.to, got, tc.first)
			}
		})
	}
}

// TestPodsReadyOrderAfterReadmission: once admitted again, a workload
// that its owner then suspends queues by its creation again: its
// eviction for pods not ready is no longer its latest.
func TestPodsReadyOrderAfterReadmission(t *testing.T) {
	s := newScenario(t)
	s.steps(append([]string{"podsready 1m 10s 3"}, requeuedBehindB...)...)
	if got := s.admits(); got != "b" {
		t.Fatalf("the pass admits %q, want b (a was evicted after b's creation)", got)
	}
	quota := func(n int) {
		cfg := s.config(n)
		cfg.PodsReady = s.l.cfg.PodsReady
		s.l.reconfigure(cfg)
	}
	s.steps("conflict b")
	quota(8)
	if got := s.admits(); got != "b a" {
		t.Fatalf("with room for both, the pass admits %q, want b a", got)
	}
	s.steps("landed a", "conflict b")
	quota(4)
	s.steps("ready a 1 1", "suspend a", "stopped a", "pods a 0")
	if got := s.admits(); got != "a" {
		t.Errorf("a suspended after its readmission: the pass admits %q, want a (by its creation)", got)
	}
}
