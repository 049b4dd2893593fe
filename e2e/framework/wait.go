package framework

import (
	"context"
	"fmt"
	"time"
)

// Condition reports whether something holds, and if not, what it saw
// instead (for the timeout message). An error stops the polling.
type Condition func(ctx context.Context) (done bool, observed string, err error)

// Poll checks cond every interval until it holds, it errors, ctx ends or
// timeout passes. The timeout error quotes the last observation.
func Poll(ctx context.Context, interval, timeout time.Duration, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := ""
	for {
		done, observed, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if ctx.Err() == nil || last == "" {
			last = observed
		}
		select {
		case <-ctx.Done():
			if parent := context.Cause(ctx); parent != context.DeadlineExceeded {
				return fmt.Errorf("%w; last seen: %s", parent, last)
			}
			return fmt.Errorf("not true after %s; last seen: %s", timeout, last)
		case <-tick.C:
		}
	}
}
