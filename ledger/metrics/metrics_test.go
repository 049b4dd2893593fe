package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// series reads every gauge and counter series of reg as
// `name{k="v",...}` (labels sorted).
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			name := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Gauge != nil:
				out[name] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[name] = m.Counter.GetValue()
			}
		}
	}
	return out
}

func parse(t *testing.T, c *queuestest.Config) *queues.Config {
	t.Helper()
	cfg, _, errs := queues.Parse(c.Bytes())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return cfg
}

// TestWorkloadCountsFollowItsEntry: a workload counts as pending in its
// ClusterQueue and LocalQueue while it waits, as reserving once charged,
// and nowhere once gone; the series of a queue the config does not have
// are removed once nothing counts in it.
func TestWorkloadCountsFollowItsEntry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	cfg := parse(t, queuestest.New().Flavor("default").
		ClusterQueue("cq", "namespaceSelector: {}").Group("cpu").Quotas("default", "cpu=10").
		LocalQueue("ns", "lq", "cq"))
	m.ObserveConfig(cfg, nil)

	w := (&queues.Workload{Namespace: "ns", Name: "j", UID: "uid-j", Queue: "cq",
		PodSets: []queues.PodSet{{Name: "main", Count: 1, Requests: flavors.Resources{corev1.ResourceCPU: 2000}}}}).Seal()
	var wm Workload
	wm.SetLocalQueue(map[string]string{queues.LabelKueueQueueName: "lq"})
	if wm.LocalQueue() != "lq" {
		t.Fatalf("LocalQueue() = %q, want lq", wm.LocalQueue())
	}
	e := machine.New(machine.Pending)
	e.W = w
	m.Note(cfg, &wm, &e, false, "")
	got := series(t, reg)
	for name, want := range map[string]float64{
		`tally_pending_workloads{cluster_queue="cq",status="active"}`:                                     1,
		`tally_local_queue_pending_workloads{name="lq",namespace="ns",status="active"}`:                   1,
		`tally_local_queue_reserving_active_workloads{name="lq",namespace="ns"}`:                          0,
		`tally_cluster_queue_status{cluster_queue="cq",status="active"}`:                                  1,
		`tally_local_queue_status{active="True",name="lq",namespace="ns"}`:                                1,
		`tally_cluster_queue_nominal_quota{cluster_queue="cq",cohort="",flavor="default",resource="cpu"}`: 10,
	} {
		if got[name] != want {
			t.Errorf("waiting: %s = %v, want %v", name, got[name], want)
		}
	}

	// Deleted, its pods still running: it waits no more and counts in
	// the resource series only, as the ghost charged what they use.
	u := queues.Usage{{Flavor: "default", Resource: corev1.ResourceCPU}: 2000}
	e, _ = machine.Adopt("cq", u)(machine.Ghost(w), nil)
	m.SetUsage(cfg, "cq", u, u)
	m.Note(cfg, &wm, &e, true, "")
	got = series(t, reg)
	for name, want := range map[string]float64{
		`tally_pending_workloads{cluster_queue="cq",status="active"}`:                                      0,
		`tally_local_queue_pending_workloads{name="lq",namespace="ns",status="active"}`:                    0,
		`tally_cluster_queue_resource_usage{cluster_queue="cq",cohort="",flavor="default",resource="cpu"}`: 2,
		`tally_local_queue_resource_usage{flavor="default",name="lq",namespace="ns",resource="cpu"}`:       2,
		`tally_local_queue_resource_reservation{flavor="default",name="lq",namespace="ns",resource="cpu"}`: 2,
	} {
		if got[name] != want {
			t.Errorf("charged: %s = %v, want %v", name, got[name], want)
		}
	}

	// A config without the queues: their status says terminating while
	// the workload still counts, and every series goes once it is gone.
	empty := parse(t, queuestest.New().Flavor("default"))
	m.ObserveConfig(empty, map[string]queues.Usage{"cq": u})
	if got := series(t, reg)[`tally_cluster_queue_status{cluster_queue="cq",status="terminating"}`]; got != 1 {
		t.Errorf("removed queue still used: terminating = %v, want 1", got)
	}
	e, _ = machine.Forget(false)(e, nil)
	m.SetUsage(empty, "cq", nil, u)
	m.Note(empty, &wm, &e, true, "")
	for name := range series(t, reg) {
		if strings.Contains(name, `"cq"`) && !strings.HasPrefix(name, "tally_cluster_queue_status") || strings.Contains(name, `"lq"`) {
			t.Errorf("series left for a queue nothing counts in: %s", name)
		}
	}
}

// TestCountersMove: the counters the ledger bumps directly move.
func TestCountersMove(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Repaired("missed-admission")
	m.Drifted(2)
	m.Preempting(3)
	m.ObservePass(time.Millisecond)
	m.ObserveAttempt(true)
	m.ObservePreemption("cq", queues.CauseInClusterQueue)
	got := series(t, reg)
	for name, want := range map[string]float64{
		`tally_recount_repairs_total{kind="missed-admission"}`:                                   1,
		`tally_usage_drift_repairs_total{}`:                                                      2,
		`tally_preemptions_total{}`:                                                              3,
		`tally_admission_attempts_total{result="success"}`:                                       1,
		`tally_preempted_workloads_total{preempting_cluster_queue="cq",reason="InClusterQueue"}`: 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	names := Names()
	if !sort.StringsAreSorted(names) || len(names) == 0 {
		t.Errorf("Names() = %v, want the metric names sorted", names)
	}
}
