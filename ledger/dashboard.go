package ledger

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/ledger/inspect"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Books copies what the dashboard shows of the books. It holds the lock
// for O(queues × inspect.DashHead) work: the pending workloads beyond the
// heads are counted, not read; the view is built from the copy
// (inspect.Dashboard) after the lock is released.
func (l *Ledger) Books() inspect.Books {
	b := inspect.Books{At: l.opts.Clock.Now(), Recent: l.recent.list()}
	for _, k := range l.opts.Kinds.All() {
		b.Kinds = append(b.Kinds, k.GVK().Kind)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b.Leading, b.Synced, b.Config = l.started, l.synced, l.cfg
	if l.cfg == nil {
		return b
	}
	b.Admitted = map[string]int{}
	for q, set := range l.books.holding {
		for e := range set {
			if e.Phase() == machine.Admitted {
				b.Admitted[q]++
			}
		}
	}
	b.Heads, b.Pending = map[string][]*queues.Workload{}, map[string]int{}
	for q, t := range l.books.pending {
		b.Pending[q] = t.Len()
		t.Ascend(func(e *entry) bool {
			w := *e.W
			b.Heads[q] = append(b.Heads[q], &w)
			return len(b.Heads[q]) < inspect.DashHead
		})
	}
	b.Namespaces = map[string]labels.Set{}
	for ns, info := range l.namespaces {
		b.Namespaces[ns] = info.labels
	}
	b.Usage = queues.CloneUsages(l.books.usage)
	return b
}

// Dashboard is a manager Runnable that serves inspect.DashboardHandler on Addr
// until the manager stops. Every replica serves it; only the leader's
// ledger has books to show.
type Dashboard struct {
	Addr   string
	Ledger *Ledger
	Log    logr.Logger
}

// NeedLeaderElection: every replica serves its page.
func (d *Dashboard) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (d *Dashboard) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: inspect.DashboardHandler(d.Ledger.Books), ReadHeaderTimeout: 5 * time.Second}
	d.Log.Info("serving the dashboard", "url", "http://"+ln.Addr().String()+"/")
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
