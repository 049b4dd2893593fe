package ledger

import (
	"tally.dev/tally/queues"
)

// recount rebuilds usage from the Jobs' own charges and repairs any drift
// from the incrementally kept totals, logging what it found.
func (l *Ledger) recount() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fresh := map[string]queues.Usage{}
	add := func(q string, c queues.Usage) {
		u := fresh[q]
		if u == nil {
			u = queues.Usage{}
			fresh[q] = u
		}
		u.Add(c)
	}
	for _, e := range l.jobs {
		if e.charged != nil {
			add(e.chargedQueue, e.charged)
		}
		if e.claim != nil {
			add(e.w.Queue, e.claim)
		}
	}
	drift := 0
	for _, q := range queues.SortedKeys(unionKeys(fresh, l.usage)) {
		if !sameUsage(fresh[q], l.usage[q]) {
			drift++
			l.log.Info("usage drift repaired", "clusterQueue", q, "kept", describeUsage(l.usage[q]), "recounted", describeUsage(fresh[q]))
		}
	}
	l.usage = fresh
	l.metrics.observeUsage(fresh)
	if l.cfg != nil {
		if shares := l.metrics.observeShares(queues.NewSnapshot(l.cfg, queues.CloneUsages(fresh), nil)); len(shares) > 0 {
			l.log.Info("fair shares", "shares", shares)
		}
	}
	if drift > 0 {
		l.metrics.drift.Add(float64(drift))
	}
}

func unionKeys(a, b map[string]queues.Usage) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
