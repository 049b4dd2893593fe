package perf

import (
	"testing"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

func TestEstimateErrors(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	outcomes := []scenario.Outcome{
		{Admitted: 10 * time.Second},
		{Admitted: 20 * time.Second},
		{Admitted: scenario.Never},
		{Admitted: 30 * time.Second},
	}
	samples := []estimateSample{
		{job: 0, asked: at(2), start: at(12)},  // 2s late
		{job: 1, asked: at(5), start: at(14)},  // 6s early
		{job: 2, asked: at(5), start: at(9)},   // never started: not counted
		{job: 3, asked: at(10), start: at(31)}, // 1s late
	}
	got := estimateErrors(samples, start, outcomes)
	want := EstimateError{Samples: 3, MedianSeconds: 2, P90Seconds: 6, MedianSignedSeconds: 1, MedianWaitSeconds: 15}
	if got == nil || *got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := estimateErrors(samples[2:3], start, outcomes); got != nil {
		t.Fatalf("no Job that started: got %+v, want nil", got)
	}
}
