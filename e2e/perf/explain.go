package perf

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"slices"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
)

// An estimateSample is what `tally explain` predicted, during a run, for
// a Job that was waiting.
type estimateSample struct {
	job    int // in the plan's Jobs
	asked  time.Time
	start  time.Time // the predicted start
	method string
}

// sampleEstimates asks `tally explain -o json`, every interval until ctx
// ends, about up to perTick Jobs picked at random among those waiting for
// their first admission, and keeps each answer that holds an estimate.
func sampleEstimates(ctx context.Context, bin, kubeconfig string, t *tracker, every time.Duration, perTick int) []estimateSample {
	var out []estimateSample
	r := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		var queued []*trackedJob
		for _, tj := range t.list {
			tj.mu.Lock()
			if tj.phase == waiting && tj.admissions == 0 {
				queued = append(queued, tj)
			}
			tj.mu.Unlock()
		}
		for range min(perTick, len(queued)) {
			i := r.IntN(len(queued))
			tj := queued[i]
			queued = slices.Delete(queued, i, i+1)
			asked := time.Now()
			b, err := exec.CommandContext(ctx, bin, "explain", "--kubeconfig", kubeconfig, "-n", tj.spec.Namespace, "-o", "json", tj.spec.Name).Output()
			if err != nil {
				continue // admitted meanwhile, or the run is ending
			}
			var x struct {
				State    string `json:"state"`
				Estimate *struct {
					Start  time.Time `json:"start"`
					Method string    `json:"method"`
				} `json:"estimate"`
			}
			if json.Unmarshal(b, &x) != nil || x.State != statePending || x.Estimate == nil {
				continue
			}
			out = append(out, estimateSample{job: tj.index, asked: asked, start: x.Estimate.Start, method: x.Estimate.Method})
		}
	}
}

// EstimateError is how far `tally explain`'s estimates of when a waiting
// Job starts were from when it did start: predicted minus actual, over
// the Jobs sampled during the run.
type EstimateError struct {
	Samples int `json:"samples"`
	// MedianSeconds and P90Seconds are of the absolute error;
	// MedianSignedSeconds tells early (negative) from late.
	MedianSeconds       float64 `json:"medianSeconds"`
	P90Seconds          float64 `json:"p90Seconds"`
	MedianSignedSeconds float64 `json:"medianSignedSeconds"`
	// MedianWaitSeconds is the median of the sampled Jobs' actual wait
	// from the question to their start, to set the error against.
	MedianWaitSeconds float64 `json:"medianWaitSeconds"`
}

func estimateErrors(samples []estimateSample, start time.Time, outcomes []scenario.Outcome) *EstimateError {
	var abs, signed, wait []time.Duration
	for _, s := range samples {
		o := outcomes[s.job]
		if o.Admitted == scenario.Never {
			continue
		}
		actual := start.Add(o.Admitted)
		d := s.start.Sub(actual)
		signed = append(signed, d)
		abs = append(abs, max(d, -d))
		wait = append(wait, actual.Sub(s.asked))
	}
	if len(abs) == 0 {
		return nil
	}
	return &EstimateError{
		Samples:             len(abs),
		MedianSeconds:       scenario.Percentile(abs, 50).Seconds(),
		P90Seconds:          scenario.Percentile(abs, 90).Seconds(),
		MedianSignedSeconds: scenario.Percentile(signed, 50).Seconds(),
		MedianWaitSeconds:   scenario.Percentile(wait, 50).Seconds(),
	}
}
