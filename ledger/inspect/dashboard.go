package inspect

import (
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/kinds"
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

// Books is a copy of the ledger's books, taken under its lock, that the
// dashboard is built from once the lock is released.
type Books struct {
	At time.Time
	// Leading says whether this replica's ledger runs (the leader's);
	// Synced whether it has read the cluster.
	Leading, Synced bool
	Kinds           []string
	Recent          []Decision
	// Config is the config in force; nil when none is loaded, and then
	// nothing below is set.
	Config *queues.Config
	// Usage is what each ClusterQueue holds, and Namespaces the labels of
	// each namespace.
	Usage      map[string]queues.Usage
	Namespaces map[string]labels.Set
	// Heads are, per ClusterQueue, its first DashHead pending workloads
	// in admission order, and Pending how many it has in all.
	Heads    map[string][]*queues.Workload
	Pending  map[string]int
	Admitted map[string]int
}

// DashHead is how many pending workloads of each queue the page lists.
const DashHead = 20

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
// queues in no cohort. When the config has Cohort documents, the cohorts
// come as a tree, each after its parent, with its depth and its quota.
type DashCohort struct {
	Name   string      `json:"name"`
	Parent string      `json:"parent,omitempty"`
	Depth  int         `json:"depth,omitempty"`
	Cells  []DashQuota `json:"cells,omitempty"`
	Queues []DashQueue `json:"clusterQueues"`
}

// DashQuota is one flavor and resource of a cohort in a tree: the quota
// it holds itself ("" when its document gives none), its subtree quota,
// and what the ClusterQueues of its subtree use.
type DashQuota struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	Own      string `json:"own,omitempty"`
	Subtree  string `json:"subtreeQuota"`
	Used     string `json:"subtreeUsage"`
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

// Dashboard builds the page's view from a copy of the books: the reason
// the next pass would give each head comes from an admission pass
// (queues.Decide) on the copy.
func Dashboard(b Books) DashboardView {
	now := b.At
	v := DashboardView{At: now, Recent: b.Recent, Totals: map[string]int{}, Kinds: b.Kinds,
		Leading: b.Leading, Synced: b.Synced, Config: b.Config != nil}
	if b.Config == nil {
		return v
	}
	cfg, usage, lists := b.Config, b.Usage, b.Heads
	snap := queues.NewSnapshot(cfg, queues.CloneUsages(usage), b.Namespaces)
	reasons := map[*queues.Workload]string{}
	queues.Decide(snap, cloneLists(lists), func(w *queues.Workload, verdict queues.Verdict, _ int) {
		reasons[w] = verdict.Message()
		if verdict.Kind == queues.Fits {
			reasons[w] = "fits: the next pass admits it"
		}
	})
	// Ceiling only reads: one snapshot serves every queue.
	base := queues.NewSnapshot(cfg, usage, nil)
	byCohort := map[string]*DashCohort{}
	var order []string
	if cfg.HasCohortTree() {
		used := subtreeUsage(cfg, usage)
		names, depth := cfg.CohortOrder()
		for i, name := range names {
			c := &DashCohort{Name: name, Parent: cfg.CohortParent(name), Depth: depth[i]}
			for _, fr := range cfg.CohortCells(name) {
				r := fr.Resource
				cell := DashQuota{Flavor: fr.Flavor, Resource: string(r), Subtree: base.CohortLendable(name, fr).Format(r), Used: used[name][fr].Format(r)}
				if q, ok := cfg.CohortQuota(name, fr); ok {
					cell.Own = q.Nominal.Format(r)
				}
				c.Cells = append(c.Cells, cell)
			}
			byCohort[name] = c
			order = append(order, name)
		}
	}
	for _, name := range cfg.QueueNames {
		cq := cfg.ClusterQueues[name]
		c := byCohort[cq.Cohort]
		if c == nil {
			c = &DashCohort{Name: cq.Cohort}
			byCohort[cq.Cohort] = c
			order = append(order, cq.Cohort)
		}
		q := DashQueue{Name: name, Admitted: b.Admitted[name], PendingTotal: b.Pending[name]}
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

// DashboardHandler serves the dashboard of the books that books copies:
// the page at /, its data as JSON at /api/dashboard. Read-only;
// everything it needs is embedded.
func DashboardHandler(books func() Books) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/dashboard", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Dashboard(books()))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		if err := dashboardPage.Execute(w, Dashboard(books())); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	return mux
}
