package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// QuotaReport is what a QuotaPoller saw.
type QuotaReport struct {
	Polls int
	// MaxRunningGPUs is the largest sum, at one poll, of the GPUs of Jobs
	// that run: not suspended and not finished.
	MaxRunningGPUs int64
	// SawWaiting: at some poll a Job was pending (suspended, unfinished)
	// while others ran, so the queue really made Jobs wait for quota.
	SawWaiting bool
	// Violations describes each poll where running GPUs exceeded the limit.
	Violations []string
	// Finished is how many Jobs had finished at the last poll.
	Finished int
	Total    int
	// Err is set when polling stopped on an error or a timeout.
	Err error
}

// WatchQuota lists the Jobs of ns every interval, each list being one
// consistent snapshot of the API server, and checks that the GPUs of
// running Jobs never exceed limit. It returns when want Jobs have finished,
// or with Err set at timeout.
func WatchQuota(ctx context.Context, c client.Reader, ns string, limit int64, want int, interval, timeout time.Duration) QuotaReport {
	var rep QuotaReport
	rep.Err = Poll(ctx, interval, timeout, func(ctx context.Context) (bool, string, error) {
		jobs, err := ListJobs(ctx, c, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		rep.Polls++
		var running int64
		var runningNames []string
		pending, finished := 0, 0
		for i := range jobs {
			j := &jobs[i]
			switch {
			case Finished(j):
				finished++
			case Suspended(j):
				pending++
			default:
				g := GPUsOf(j)
				running += g
				runningNames = append(runningNames, fmt.Sprintf("%s(%d)", j.Name, g))
			}
		}
		rep.MaxRunningGPUs = max(rep.MaxRunningGPUs, running)
		if pending > 0 && running > 0 {
			rep.SawWaiting = true
		}
		if running > limit {
			sort.Strings(runningNames)
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s: %d GPUs running > %d: %s",
				time.Now().Format("15:04:05.000"), running, limit, strings.Join(runningNames, " ")))
		}
		rep.Finished, rep.Total = finished, len(jobs)
		return finished >= want, fmt.Sprintf("%d of %d Jobs finished, %d pending, %d GPUs running", finished, len(jobs), pending, running), nil
	})
	return rep
}
