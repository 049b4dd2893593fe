package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"tally.dev/tally/ledger/inspect"
)

// TestDashboard: the page's view of a queue (4 CPUs nominal, 2 more it may
// borrow) with one admitted Job and two waiting, the higher priority first, each with the reason the next pass
// gives; the usage bar against nominal quota; the admission among the
// recent decisions. The page renders it, and /api/dashboard serves it.
func TestDashboard(t *testing.T) {
	s := &scenario{t: t, clock: clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		rec: &scenarioRecorder{}, objects: map[string]client.Object{}, writes: map[string]write{}, pods: map[string]int{}}
	s.newLedger(s.config(4))
	s.l.started = true
	for _, line := range []string{"create a cpu=4 prio=10", "create b cpu=3", "create c cpu=3 prio=5", "pass", "landed a"} {
		s.step(strings.Fields(line))
	}
	v := inspect.Dashboard(s.l.Books())
	if !v.Leading || len(v.Cohorts) == 0 || v.Cohorts[0].Name != "c" {
		t.Fatalf("view %+v", v)
	}
	q := v.Cohorts[0].Queues[0]
	if q.Name != "q" || q.Admitted != 1 || q.PendingTotal != 2 || len(q.Pending) != 2 {
		t.Fatalf("queue %+v", q)
	}
	if q.Pending[0].Workload != "Job ns/c" || q.Pending[1].Workload != "Job ns/b" || !strings.Contains(q.Pending[0].Reason, "needs cpu=3") {
		t.Errorf("pending %+v, want c (priority 5) then b, with reasons", q.Pending)
	}
	cell := q.Cells[0]
	if cell.Resource != "cpu" || cell.Used != "4" || cell.Nominal != "4" || cell.Ceiling != "6" || cell.Borrowing || int(cell.UsedPct) != 66 {
		t.Errorf("cell %+v", cell)
	}
	if len(v.Recent) == 0 || v.Recent[0].Reason != ReasonAdmitted || v.Recent[0].Workload != "Job ns/a" {
		t.Errorf("recent %+v, want the admission of a first", v.Recent)
	}

	srv := httptest.NewServer(inspect.DashboardHandler(s.l.Books))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	for _, want := range []string{`data-queue="q"`, "Job ns/c", "Job ns/b", `class="used"`, "refresh", "Admitted"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the page loads scripts or something from elsewhere")
	}
	var back inspect.DashboardView
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/api/dashboard")), &back); err != nil || back.Totals["pending"] != 2 {
		t.Errorf("/api/dashboard: %v, totals %v", err, back.Totals)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestDashboardCohortTree: with Cohort documents, the page shows the
// cohorts as a tree, each after its parent, with its own quota, its
// subtree quota and what its subtree uses.
func TestDashboardCohortTree(t *testing.T) {
	s := &scenario{t: t, clock: clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		rec: &scenarioRecorder{}, objects: map[string]client.Object{}, writes: map[string]write{}, pods: map[string]int{}}
	s.newLedger(s.treeConfig(false))
	s.l.started = true
	for _, line := range []string{"create big cpu=7 queue=t", "pass", "landed big", "create r1 cpu=2 queue=r"} {
		s.step(strings.Fields(line))
	}
	v := inspect.Dashboard(s.l.Books())
	var got []string
	for _, c := range v.Cohorts {
		line := fmt.Sprintf("%s parent=%s depth=%d", c.Name, c.Parent, c.Depth)
		for _, cell := range c.Cells {
			line += fmt.Sprintf(" %s/%s own=%s subtree=%s used=%s", cell.Flavor, cell.Resource, cell.Own, cell.Subtree, cell.Used)
		}
		for _, q := range c.Queues {
			line += " " + q.Name
		}
		got = append(got, line)
	}
	want := []string{
		"org parent= depth=0 default/cpu own=2 subtree=8 used=7",
		"infra parent=org depth=1 default/cpu own= subtree=4 used=0 r",
		"ml parent=org depth=1 default/cpu own= subtree=2 used=7 q t",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("cohorts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := v.Cohorts[1].Queues[0].Pending; len(p) != 1 || !strings.Contains(p[0].Reason, "ClusterQueue r uses 0 of 4, cohort infra (parent org) can lend 0") {
		t.Errorf("r's pending %+v, want the wait naming the cohort path", p)
	}
	srv := httptest.NewServer(inspect.DashboardHandler(s.l.Books))
	defer srv.Close()
	page := get(t, srv.URL+"/")
	for _, want := range []string{`data-cohort="ml" style="margin-left: 1em"`, "Cohort ml <span class=\"muted\">in cohort org</span>", `class="cohort-cell"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
