package ledger

import (
	"slices"
	"sync"

	"tally.dev/tally/ledger/inspect"
)

// recentDecisions keeps the last decisions, newest last.
type recentDecisions struct {
	mu  sync.Mutex
	buf []inspect.Decision
}

// recentKept is how many decisions the dashboard shows.
const recentKept = 40

func (r *recentDecisions) add(d inspect.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == recentKept {
		copy(r.buf, r.buf[1:])
		r.buf = r.buf[:recentKept-1]
	}
	r.buf = append(r.buf, d)
}

func (r *recentDecisions) list() []inspect.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.buf)
	slices.Reverse(out)
	return out
}
