package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"tally.dev/tally/e2e/framework"
)

// dashboardConfig is loaded with the suite's config by TestDashboardPage.
var dashboardConfig = cpuQueue("e2e-dashboard", 1, "")

// The dashboard page (tally serve --dashboard-bind-address), rendered by
// headless Chromium as a person would see it: the queue's usage bar, its
// waiting Jobs in order with their reasons, and the admission among the
// recent decisions. It loads nothing from elsewhere. The screenshot is
// kept beside the suite's logs.
func TestDashboardPage(t *testing.T) {
	s := setup(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (make test installs Debian's chromium)")
	}
	ctx := testContext(t, 3*time.Minute)
	const ns, queue = "e2e-dashboard", "e2e-dashboard"
	useQueues(ctx, t, s, []string{queue}, dashboardConfig)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	var waiting []*batchv1.Job
	for _, name := range []string{"dash-running", "dash-waiting-1", "dash-waiting-2"} {
		j := framework.NewJob(ns, name).Request("cpu", "1").Runtime(time.Minute).Obj()
		if err := s.client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		if name == "dash-running" {
			waitJobState(ctx, t, s, ns, name, "admitted")
		} else {
			waiting = append(waiting, j)
		}
	}
	order := admissionOrder(waiting)
	base := fmt.Sprintf("http://127.0.0.1:%d/", s.tally.DashboardPort)
	// The ledger has seen both waiting Jobs once the JSON view lists them.
	if err := framework.Poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		resp, err := http.Get(base + "api/dashboard")
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		var v struct {
			Cohorts []struct {
				Queues []struct {
					Name    string `json:"name"`
					Pending int    `json:"pending"`
				} `json:"clusterQueues"`
			} `json:"cohorts"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return false, "", err
		}
		for _, c := range v.Cohorts {
			for _, q := range c.Queues {
				if q.Name == queue {
					return q.Pending == 2, fmt.Sprintf("%d pending", q.Pending), nil
				}
			}
		}
		return false, "no queue " + queue, nil
	}); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Dir(s.tally.LogPath())
	shot := filepath.Join(dir, "dashboard.png")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu",
			"--user-data-dir=" + filepath.Join(dir, "chromium"), "--window-size=1280,1000"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("chromium %v: %v: %s", args, err, msg)
		}
		return string(out)
	}
	dom := run("--dump-dom", base)
	for _, want := range []string{
		`data-queue="e2e-dashboard"`,
		"e2e-dashboard/dash-waiting-1", "e2e-dashboard/dash-waiting-2",
		"Waiting for quota: needs cpu=1 in flavor cpu-flavor",
		`class="used`, "Admitted", "e2e-dashboard/dash-running",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if i, j := strings.Index(dom, ns+"/"+order[0]), strings.Index(dom, ns+"/"+order[1]); i < 0 || j < i {
		t.Errorf("the waiting Jobs are not listed in admission order %v", order)
	}
	run("--screenshot="+shot, base)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	f, _ := os.Open(shot)
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil || string(head[1:4]) != "PNG" {
		t.Errorf("screenshot %s is not a PNG", shot)
	}
	t.Logf("screenshot: %s", shot)
}
