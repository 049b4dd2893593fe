package ledger

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Decision is one admission decision the ledger made, as its Event said.
type Decision struct {
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
	Workload string    `json:"workload"`
	Queue    string    `json:"clusterQueue"`
	Message  string    `json:"message"`
}

// recentDecisions keeps the last decisions, newest last.
type recentDecisions struct {
	mu  sync.Mutex
	buf []Decision
}

// recentKept is how many decisions the dashboard shows.
const recentKept = 40

func (r *recentDecisions) add(d Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == recentKept {
		copy(r.buf, r.buf[1:])
		r.buf = r.buf[:recentKept-1]
	}
	r.buf = append(r.buf, d)
}

func (r *recentDecisions) list() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.buf)
	slices.Reverse(out)
	return out
}

// DashboardView is what the dashboard page shows.
type DashboardView struct {
	At time.Time `json:"at"`
	// Leading says whether this replica's ledger runs (the leader's);
	// Synced whether it has read the cluster.
	Leading bool           `json:"leading"`
	Synced  bool           `json:"synced"`
	Cohorts []DashCohort   `json:"cohorts"`
	Recent  []Decision     `json:"recent"`
	Config  bool           `json:"configLoaded"`
	Kinds   []string       `json:"kinds"`
	Totals  map[string]int `json:"totals"`
}

// DashCohort is a cohort and its ClusterQueues; Name is empty for the
// queues in no cohort.
type DashCohort struct {
	Name   string      `json:"name"`
	Queues []DashQueue `json:"clusterQueues"`
}

// DashQueue is one ClusterQueue.
type DashQueue struct {
	Name         string        `json:"name"`
	Admitted     int           `json:"admitted"`
	PendingTotal int           `json:"pending"`
	Cells        []DashCell    `json:"cells"`
	Pending      []DashPending `json:"head"`
}

// DashCell is one flavor and resource of a ClusterQueue: its usage
// against its nominal quota and what it may reach by borrowing.
type DashCell struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	Used     string `json:"used"`
	Nominal  string `json:"nominal"`
	// Ceiling is nominal quota plus what it may borrow now.
	Ceiling string `json:"ceiling"`
	// UsedPct and NominalPct place usage and nominal quota on a bar
	// that spans the ceiling (or usage, when it is higher).
	UsedPct    float64 `json:"usedPercent"`
	NominalPct float64 `json:"nominalPercent"`
	Borrowing  bool    `json:"borrowing"`
}

// DashPending is a pending workload, in admission order, with the reason
// the next pass would give.
type DashPending struct {
	Position int    `json:"position"`
	Workload string `json:"workload"`
	Priority int32  `json:"priority"`
	Waiting  string `json:"waiting"`
	Reason   string `json:"reason"`
}

// dashHead is how many pending workloads of each queue the page lists.
const dashHead = 20

// Dashboard builds the page's view from the ledger's books. It holds the
// lock for O(queues × dashHead) work: the pending workloads beyond the
// heads are counted, not read.
func (l *Ledger) Dashboard() DashboardView {
	now := l.opts.Clock.Now()
	v := DashboardView{At: now, Recent: l.recent.list(), Totals: map[string]int{}}
	for _, k := range l.opts.Kinds.All() {
		v.Kinds = append(v.Kinds, k.GVK().Kind)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v.Leading, v.Synced, v.Config = l.started, l.synced, l.cfg != nil
	if l.cfg == nil {
		return v
	}
	admittedBy := map[string]int{}
	for e := range l.holding {
		if e.Phase() == machine.Admitted {
			admittedBy[e.ChargedQueue]++
		}
	}
	lists := map[string][]*queues.Workload{}
	for q, t := range l.pending {
		t.Ascend(func(e *entry) bool {
			lists[q] = append(lists[q], e.W)
			return len(lists[q]) < dashHead
		})
	}
	nsLabels := map[string]labels.Set{}
	for ns, info := range l.namespaces {
		nsLabels[ns] = info.labels
	}
	usage := queues.CloneUsages(l.usage)
	snap := queues.NewSnapshot(l.cfg, queues.CloneUsages(l.usage), nsLabels)
	reasons := map[*queues.Workload]string{}
	queues.Decide(snap, cloneLists(lists), func(w *queues.Workload, verdict queues.Verdict, _ int) {
		reasons[w] = verdict.Message()
		if verdict.Kind == queues.Fits {
			reasons[w] = "fits: the next pass admits it"
		}
	})
	// Ceiling only reads: one snapshot serves every queue.
	base := queues.NewSnapshot(l.cfg, usage, nil)
	byCohort := map[string]*DashCohort{}
	var order []string
	for _, name := range l.cfg.QueueNames {
		cq := l.cfg.ClusterQueues[name]
		c := byCohort[cq.Cohort]
		if c == nil {
			c = &DashCohort{Name: cq.Cohort}
			byCohort[cq.Cohort] = c
			order = append(order, cq.Cohort)
		}
		q := DashQueue{Name: name, Admitted: admittedBy[name]}
		if t := l.pending[name]; t != nil {
			q.PendingTotal = t.Len()
		}
		v.Totals["admitted"] += q.Admitted
		v.Totals["pending"] += q.PendingTotal
		for _, g := range cq.ResourceGroups {
			for _, f := range g.Flavors {
				for _, r := range g.Covered {
					fr := queues.FlavorResource{Flavor: f.Name, Resource: r}
					used := usage[name][fr]
					ceiling, nominal, _ := base.Ceiling(cq, fr)
					span := max(ceiling, used)
					cell := DashCell{Flavor: f.Name, Resource: string(r), Used: used.Format(r), Nominal: nominal.Format(r),
						Ceiling: ceiling.Format(r), Borrowing: used > nominal}
					if span > 0 {
						cell.UsedPct = 100 * float64(used) / float64(span)
						cell.NominalPct = 100 * float64(nominal) / float64(span)
					}
					q.Cells = append(q.Cells, cell)
				}
			}
		}
		for i, w := range lists[name] {
			q.Pending = append(q.Pending, DashPending{Position: i + 1, Workload: kinds.GVKOf(w).Kind + " " + w.Key(), Priority: w.Priority,
				Waiting: now.Sub(w.Created).Round(time.Second).String(), Reason: reasons[w]})
		}
		c.Queues = append(c.Queues, q)
	}
	for _, name := range order {
		v.Cohorts = append(v.Cohorts, *byCohort[name])
	}
	return v
}

//go:embed dashboard.html
var dashboardHTML string

var dashboardPage = template.Must(template.New("dashboard").Funcs(template.FuncMap{
	"pct": func(f float64) template.CSS { return template.CSS(fmtPct(f)) },
	"ago": func(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() },
}).Parse(dashboardHTML))

func fmtPct(f float64) string {
	b, _ := json.Marshal(float64(int(f*10)) / 10)
	return string(b) + "%"
}

// DashboardHandler serves the dashboard: the page at /, its data as JSON
// at /api/dashboard. Read-only; everything it needs is embedded.
func DashboardHandler(l *Ledger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/dashboard", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l.Dashboard())
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		if err := dashboardPage.Execute(w, l.Dashboard()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	return mux
}

// Dashboard is a manager Runnable that serves DashboardHandler on Addr
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
	srv := &http.Server{Handler: DashboardHandler(d.Ledger), ReadHeaderTimeout: 5 * time.Second}
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
