package webhook

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// workers runs requests on goroutines kept between them.
//
// Each request is served on a goroutine of its own (the HTTP/2 server
// starts one for each), which starts with a small stack. Decoding
// an AdmissionReview recurses deep enough that such a stack grows, and is
// copied, several times for every request, a tenth of what the webhook
// costs in a storm of creates. A goroutine that has served a request
// keeps its grown stack, so workers keeps up to maxIdle of them waiting
// for the next, and starts another when none waits: requests never queue
// behind each other.
type workers struct {
	work    chan func()
	idle    atomic.Int32
	maxIdle int32
}

func newWorkers(maxIdle int32) *workers {
	return &workers{work: make(chan func()), maxIdle: maxIdle}
}

// within runs f on a worker and returns once it has, or with ctx's error
// once ctx ends, f running on. A panic in f panics the caller, with f's
// stack in its value, as http.TimeoutHandler passes on its handler's.
func (p *workers) within(ctx context.Context, f func()) error {
	done := make(chan any, 1)
	job := func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Sprintf("%v\n\n%s", v, debug.Stack())
				return
			}
			done <- nil
		}()
		f()
	}
	select {
	case p.work <- job:
	default:
		go p.loop(job)
	}
	select {
	case v := <-done:
		if v != nil {
			panic(v)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs job, then waits for the next while fewer than maxIdle others
// wait.
func (p *workers) loop(job func()) {
	for {
		job()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		job = <-p.work
		p.idle.Add(-1)
	}
}
