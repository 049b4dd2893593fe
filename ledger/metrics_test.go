package ledger

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// metricValue reads a gauge or counter.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Gauge != nil {
		return out.Gauge.GetValue()
	}
	return out.Counter.GetValue()
}

// gather reads every series of reg as `name{k="v",...}` (labels sorted):
// a gauge's or counter's value, a histogram's _count and _sum.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
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
			series := func(suffix string) string {
				return f.GetName() + suffix + "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[series("")] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[series("")] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[series("_count")] = float64(m.Histogram.GetSampleCount())
				out[series("_sum")] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

// only keeps the series of got whose name starts with one of prefixes.
func only(got map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p+"{") {
				out[k] = v
			}
		}
	}
	return out
}

// TestUsageGaugeIsLive: tally_cluster_queue_resource_usage follows every
// charge and release as it happens, with no recount: an admission decided
// by a pass, one the informer shows, a finish and a delete.
func TestUsageGaugeIsLive(t *testing.T) {
	const queue = "gauge-live"
	cfg, _, errs := queues.Parse(queuestest.New().Flavor("default").
		ClusterQueue("gauge-live", "namespaceSelector: {}").Group("cpu", "memory").Quotas("default", "cpu=10", "memory=10Gi").Bytes())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	reg := prometheus.NewRegistry()
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{Registry: reg})
	l.reconfigure(cfg)
	l.synced = true
	l.namespaces["ns-gauge"] = &nsInfo{}
	job := func(i int) *batchv1.Job {
		j := benchJob(i, 1, true)
		j.Namespace = "ns-gauge"
		j.Labels[queues.LabelQueue] = queue
		return StripJobOrDie(j)
	}
	check := func(when string, cpu, memory float64) {
		t.Helper()
		want := map[string]float64{
			`tally_cluster_queue_resource_usage{cluster_queue="gauge-live",cohort="",flavor="default",resource="cpu"}`:    cpu,
			`tally_cluster_queue_resource_usage{cluster_queue="gauge-live",cohort="",flavor="default",resource="memory"}`: memory,
		}
		if diff := cmp.Diff(want, only(gather(t, reg), "tally_cluster_queue_resource_usage")); diff != "" {
			t.Errorf("%s: usage (-want +got):\n%s", when, diff)
		}
	}

	check("no Job", 0, 0)
	a := job(0)
	l.onJob(a)
	check("pending", 0, 0)
	if writes := l.decide(); len(writes) != 1 {
		t.Fatalf("the pass decided %d writes, want 1", len(writes))
	}
	check("a decided", 1, 1<<30)
	aAdmitted := jobAt(a, "2", markAdmitted)
	l.onJob(aAdmitted)
	check("a admitted", 1, 1<<30)

	b := jobAt(job(1), "2", markAdmitted)
	l.onJob(b)
	check("b admitted", 2, 2<<30)

	l.onJob(jobAt(aAdmitted, "3", markFinished))
	check("a finished", 1, 1<<30)
	l.onJobDelete(b)
	check("b deleted", 0, 0)
}

// TestMetricsScenario drives the scenario ledger through admissions, a
// preemption, a requeue, a reload and a Job that can never fit, and checks
// Kueue's metrics after each step that changes them. The scenarios'
// ClusterQueues q (4 cpu, preempts lower priorities) and r (2 cpu) share
// cohort c; step N runs at second N.
func TestMetricsScenario(t *testing.T) {
	s := newScenario(t)
	run := func(lines ...string) {
		t.Helper()
		for _, line := range lines {
			s.step(strings.Fields(line))
			s.clock.Step(time.Second)
		}
	}
	q := func(name string, labels ...string) string {
		return name + `{cluster_queue="q"` + strings.Join(append([]string{""}, labels...), ",") + "}"
	}
	cpu := []string{`cohort="c"`, `flavor="default"`, `resource="cpu"`}
	var (
		active       = q("tally_pending_workloads", `status="active"`)
		inadmissible = q("tally_pending_workloads", `status="inadmissible"`)
		usage        = q("tally_cluster_queue_resource_usage", cpu...)
		nominal      = q("tally_cluster_queue_nominal_quota", cpu...)
		admitted     = q("tally_admitted_workloads_total")
		waitCount    = q("tally_admission_wait_time_seconds_count")
		waitSum      = q("tally_admission_wait_time_seconds_sum")
		evicted      = q("tally_evicted_workloads_total", `reason="Preempted"`)
		success      = `tally_admission_attempts_total{result="success"}`
		failure      = `tally_admission_attempts_total{result="inadmissible"}`
		preemptions  = `tally_preemptions_total{}`
	)
	// A key selects the series that have its labels, summed: a counter
	// with a priority_class label is checked over every class unless the
	// key names one.
	check := func(when string, want map[string]float64) {
		t.Helper()
		got := gather(t, s.reg)
		for k, v := range want {
			if sum, _ := selectSum(got, k); sum != v {
				t.Errorf("%s: %s = %v, want %v", when, k, sum, v)
			}
		}
	}
	lq := func(name string, labels ...string) string {
		return name + `{name="default",namespace="ns"` + strings.Join(append([]string{""}, labels...), ",") + "}"
	}

	check("start", map[string]float64{
		nominal: 4, q("tally_cluster_queue_borrowing_limit", cpu...): math.Inf(1), q("tally_cluster_queue_lending_limit", cpu...): math.Inf(1),
		`tally_cluster_queue_nominal_quota{cluster_queue="r",cohort="c",flavor="default",resource="cpu"}`: 2,
		usage: 0, `tally_cluster_queue_resource_usage{cluster_queue="r",cohort="c",flavor="default",resource="cpu"}`: 0,
		q("tally_cluster_queue_status", `status="active"`): 1, q("tally_cluster_queue_status", `status="pending"`): 0,
		q("tally_cluster_queue_status", `status="terminating"`): 0,
		active: 0, inadmissible: 0,
	})
	if _, n := selectSum(gather(t, s.reg), admitted); n > 0 {
		t.Errorf("start: %s exists before any admission", admitted)
	}

	// huge can never fit (q's 4 and the 2 r lends); r1 takes r's 2; a
	// and b fill q; c waits.
	run("create huge cpu=7", "create r1 cpu=2 queue=r", "create a cpu=2", "create b cpu=2", "create c cpu=4")
	check("created", map[string]float64{active: 4, inadmissible: 0})
	run("pass") // 5
	check("first pass", map[string]float64{active: 1, inadmissible: 1, usage: 4, success: 1, failure: 0, admitted: 0,
		// The scenario's namespace is bound by its annotation: its
		// workloads, which name no LocalQueue, are in "default". r1, a
		// and b hold quota, their admissions in flight.
		lq("tally_local_queue_pending_workloads", `status="active"`): 1, lq("tally_local_queue_pending_workloads", `status="inadmissible"`): 1,
		lq("tally_local_queue_reserving_active_workloads"): 3, lq("tally_local_queue_admitted_active_workloads"): 0,
		lq("tally_local_queue_resource_reservation", `flavor="default"`, `resource="cpu"`): 6,
		lq("tally_local_queue_resource_usage", `flavor="default"`, `resource="cpu"`):       6})
	run("landed r1", "landed a", "landed b") // 6, 7, 8: each 5s after its creation
	check("admitted", map[string]float64{admitted: 2, waitCount: 2, waitSum: 5 + 5, usage: 4,
		q("tally_admitted_workloads_total", `priority_class="prio-0"`):             2,
		q("tally_quota_reserved_workloads_total", `priority_class="prio-0"`):       2,
		q("tally_quota_reserved_wait_time_seconds_sum", `priority_class="prio-0"`): 10,
		`tally_admitted_workloads_total{cluster_queue="r"}`:                        1, `tally_admission_wait_time_seconds_sum{cluster_queue="r"}`: 5,
		lq("tally_local_queue_admitted_workloads_total", `priority_class="prio-0"`):               3,
		lq("tally_local_queue_quota_reserved_workloads_total", `priority_class="prio-0"`):         3,
		lq("tally_local_queue_admission_wait_time_seconds_sum", `priority_class="prio-0"`):        15,
		lq("tally_local_queue_quota_reserved_wait_time_seconds_count", `priority_class="prio-0"`): 3,
		lq("tally_local_queue_reserving_active_workloads"):                                        3, lq("tally_local_queue_admitted_active_workloads"): 3})
	run("running a", "running b")

	// urgent preempts one of a and b: the pass admits nothing. Its claim
	// takes over the victim's quota, which counts once until the
	// victim's pods are gone.
	run("create urgent cpu=2 prio=10", "pass") // 11, 12
	check("urgent preempts", map[string]float64{active: 2, usage: 4, success: 1, failure: 1, preemptions: 1, evicted: 0})
	victim := ""
	for name, w := range s.writes {
		if w.preemptor != nil {
			victim = name
		}
	}
	if victim == "" {
		t.Fatalf("no preemption decided; writes %v", s.writes)
	}
	run("landed " + victim) // 13
	check("preemption landed", map[string]float64{evicted: 1, active: 2, usage: 4,
		q("tally_evicted_workloads_total", `priority_class="prio-0"`, `reason="Preempted"`, `underlying_cause=""`):              1,
		`tally_preempted_workloads_total{preempting_cluster_queue="q",reason="InClusterQueue"}`:                                 1,
		lq("tally_local_queue_evicted_workloads_total", `priority_class="prio-0"`, `reason="Preempted"`, `underlying_cause=""`): 1,
		lq("tally_local_queue_pending_workloads", `status="active"`):                                                            2,
		// The victim holds its quota until its pods are gone.
		lq("tally_local_queue_reserving_active_workloads"): 3, lq("tally_local_queue_admitted_active_workloads"): 3})
	// Its pods are gone: it queues again, and its next wait counts from
	// now; urgent's claim is given back, until the pass admits it.
	run("stopped " + victim) // 14
	check("victim stopped", map[string]float64{active: 3, usage: 2})
	run("pass", "landed urgent") // 15, 16: 5s after its creation
	check("urgent admitted", map[string]float64{admitted: 3, waitSum: 15, active: 2, usage: 4, success: 2,
		q("tally_admitted_workloads_total", `priority_class="prio-10"`):                    1,
		lq("tally_local_queue_admitted_workloads_total", `priority_class="prio-10"`):       1,
		lq("tally_local_queue_resource_reservation", `flavor="default"`, `resource="cpu"`): 6})

	// The other one finishes: the victim comes back, 5s after it queued
	// again (a wait from its creation would be 17s or more).
	other := map[string]string{"a": "b", "b": "a"}[victim]
	run("finish "+other, "pass", "landed "+victim) // 17, 18, 19
	check("victim admitted again", map[string]float64{admitted: 4, waitCount: 4, waitSum: 20, usage: 4, active: 1, inadmissible: 1,
		lq("tally_local_queue_finished_workloads"):                                  1,
		lq("tally_local_queue_finished_workloads_total", `priority_class="prio-0"`): 1,
		lq("tally_local_queue_admitted_workloads_total"):                            5})

	// A reload gives huge another chance; the next pass sets it aside
	// again.
	run("delete c", "finish urgent", "finish "+victim)
	check("done", map[string]float64{usage: 0, active: 0, inadmissible: 1})
	run("quota 3")
	check("reload", map[string]float64{nominal: 3, active: 1, inadmissible: 0})
	run("pass")
	check("huge again", map[string]float64{active: 0, inadmissible: 1, success: 3, failure: 2})
	run("delete huge")
	check("deleted", map[string]float64{active: 0, inadmissible: 0,
		// r1 still runs; a, b and urgent finished.
		lq("tally_local_queue_pending_workloads"): 0, lq("tally_local_queue_reserving_active_workloads"): 1,
		lq("tally_local_queue_resource_reservation", `flavor="default"`, `resource="cpu"`): 2,
		lq("tally_local_queue_finished_workloads"):                                         3, lq("tally_local_queue_finished_workloads_total"): 3,
		`tally_preempted_workloads_total{}`: 1, preemptions: 1})
}

// selectSum sums the series of got that have the name and every label of
// selector, `name{k="v",...}`, and says how many there are.
func selectSum(got map[string]float64, selector string) (float64, int) {
	name, labels, _ := strings.Cut(strings.TrimSuffix(selector, "}"), "{")
	var want []string
	if labels != "" {
		want = strings.Split(labels, ",")
	}
	sum, n := 0.0, 0
	for k, v := range got {
		kn, kl, _ := strings.Cut(strings.TrimSuffix(k, "}"), "{")
		if kn != name {
			continue
		}
		have := strings.Split(kl, ",")
		if !slices.ContainsFunc(want, func(l string) bool { return !slices.Contains(have, l) }) {
			sum += v
			n++
		}
	}
	return sum, n
}

// TestMetricsFollowScenarios runs every golden scenario and checks after
// each step that the incrementally kept pending, usage and LocalQueue
// gauges equal a count from scratch of the ledger's workloads and usage.
func TestMetricsFollowScenarios(t *testing.T) {
	eachScenario(t, func(t *testing.T, _, script string) {
		step := 0
		runScenario(t, script, func(s *scenario) {
			step++
			if diff := cmp.Diff(recountedMetrics(s.l), keptMetrics(t, s.reg)); diff != "" {
				t.Errorf("step %d: gauges differ from a recount (-recount +gauges):\n%s", step, diff)
			}
		})
	})
}

// recountedMetrics counts from scratch what tally_pending_workloads,
// tally_cluster_queue_resource_usage and the LocalQueue gauges must show,
// leaving out zeros.
func recountedMetrics(l *Ledger) map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	for _, e := range l.jobs {
		if e.W == nil {
			continue
		}
		switch e.Phase() {
		case machine.Pending:
			out[fmt.Sprintf(`tally_pending_workloads{cluster_queue=%q,status="active"}`, e.W.Queue)]++
		case machine.Inadmissible:
			out[fmt.Sprintf(`tally_pending_workloads{cluster_queue=%q,status="inadmissible"}`, e.W.Queue)]++
		}
	}
	for _, es := range []map[types.UID]*entry{l.jobs, l.pods.ghosts} {
		for _, e := range es {
			if e.W == nil || e.metrics.LocalQueue() == "" {
				continue
			}
			lq := fmt.Sprintf(`name=%q,namespace=%q`, e.metrics.LocalQueue(), e.W.Namespace)
			if l.jobs[e.W.UID] == e {
				switch e.Phase() {
				case machine.Pending:
					out[`tally_local_queue_pending_workloads{`+lq+`,status="active"}`]++
				case machine.Inadmissible:
					out[`tally_local_queue_pending_workloads{`+lq+`,status="inadmissible"}`]++
				case machine.Finished:
					out[`tally_local_queue_finished_workloads{`+lq+`}`]++
				}
				if e.Charged != nil && e.Phase() != machine.Finished {
					out[`tally_local_queue_reserving_active_workloads{`+lq+`}`]++
					if e.Phase() == machine.Admitted || e.Phase() == machine.Evicting {
						out[`tally_local_queue_admitted_active_workloads{`+lq+`}`]++
					}
				}
			}
			for fr, a := range e.Charged {
				out[fmt.Sprintf(`tally_local_queue_resource_reservation{flavor=%q,%s,resource=%q}`, fr.Flavor, lq, fr.Resource)] += metrics.AmountValue(fr.Resource, a)
			}
		}
	}
	for q, u := range l.books.usage {
		cohort := ""
		if cq := l.cfg.ClusterQueues[q]; cq != nil {
			cohort = cq.Cohort
		}
		for fr, a := range u {
			out[fmt.Sprintf(`tally_cluster_queue_resource_usage{cluster_queue=%q,cohort=%q,flavor=%q,resource=%q}`, q, cohort, fr.Flavor, fr.Resource)] = metrics.AmountValue(fr.Resource, a)
		}
	}
	return out
}

// keptMetrics reads the non-zero gauges recountedMetrics counts.
func keptMetrics(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	for k, v := range only(gather(t, reg), "tally_pending_workloads", "tally_cluster_queue_resource_usage", "tally_local_queue_pending_workloads",
		"tally_local_queue_finished_workloads", "tally_local_queue_reserving_active_workloads", "tally_local_queue_admitted_active_workloads",
		"tally_local_queue_resource_reservation") {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestQuotaMetricsFollowConfig: the quota gauges are set from each config
// in force; a flavor that leaves a ClusterQueue takes its series along, a
// cohort change moves them all, and a ClusterQueue that leaves the config
// is terminating until the quota its workloads hold is released, then all
// its series go.
func TestQuotaMetricsFollowConfig(t *testing.T) {
	parse := func(doc string) *queues.Config {
		t.Helper()
		cfg, _, errs := queues.Parse([]byte(doc))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return cfg
	}
	first := parse(queuestest.New().Flavor("f1").Flavor("f2").
		ClusterQueue("qx", "cohort: c1", "namespaceSelector: {}").Group("cpu", "memory").
		Quotas("f1", "cpu=1500m/500m/1", "memory=1Gi").Quotas("f2", "cpu=2", "memory=2Gi").
		ClusterQueue("qy", "stopPolicy: Hold", "namespaceSelector: {}").Group("nvidia.com/gpu").Quotas("f1", "nvidia.com/gpu=4").String())
	second := parse(queuestest.New().Flavor("f1").Flavor("f2").
		ClusterQueue("qx", "cohort: c2", "namespaceSelector: {}").Group("cpu", "memory").Quotas("f1", "cpu=3", "memory=1Gi").String())
	reg := prometheus.NewRegistry()
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{Registry: reg})
	resourceMetrics := []string{"tally_cluster_queue_nominal_quota", "tally_cluster_queue_borrowing_limit",
		"tally_cluster_queue_lending_limit", "tally_cluster_queue_resource_usage", "tally_cluster_queue_status"}
	check := func(when string, want map[string]float64) {
		t.Helper()
		if diff := cmp.Diff(want, only(gather(t, reg), resourceMetrics...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", when, diff)
		}
	}
	cell := func(name, q, cohort, flavor, resource string) string {
		return fmt.Sprintf(`%s{cluster_queue=%q,cohort=%q,flavor=%q,resource=%q}`, name, q, cohort, flavor, resource)
	}
	status := func(name string, active, pending, terminating float64) map[string]float64 {
		return map[string]float64{
			fmt.Sprintf(`tally_cluster_queue_status{cluster_queue=%q,status="active"}`, name):      active,
			fmt.Sprintf(`tally_cluster_queue_status{cluster_queue=%q,status="pending"}`, name):     pending,
			fmt.Sprintf(`tally_cluster_queue_status{cluster_queue=%q,status="terminating"}`, name): terminating,
		}
	}
	merge := func(ms ...map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	inf := math.Inf(1)
	gpu := queues.FlavorResource{Flavor: "f1", Resource: "nvidia.com/gpu"}

	l.reconfigure(first)
	l.mu.Lock()
	l.books.move(l.cfg, "qy", queues.Usage{gpu: 3}, +1)
	l.mu.Unlock()
	check("first config", merge(map[string]float64{
		cell("tally_cluster_queue_nominal_quota", "qx", "c1", "f1", "cpu"):            1.5,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c1", "f1", "cpu"):          0.5,
		cell("tally_cluster_queue_lending_limit", "qx", "c1", "f1", "cpu"):            1,
		cell("tally_cluster_queue_resource_usage", "qx", "c1", "f1", "cpu"):           0,
		cell("tally_cluster_queue_nominal_quota", "qx", "c1", "f1", "memory"):         1 << 30,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c1", "f1", "memory"):       inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c1", "f1", "memory"):         inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c1", "f1", "memory"):        0,
		cell("tally_cluster_queue_nominal_quota", "qx", "c1", "f2", "cpu"):            2,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c1", "f2", "cpu"):          inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c1", "f2", "cpu"):            inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c1", "f2", "cpu"):           0,
		cell("tally_cluster_queue_nominal_quota", "qx", "c1", "f2", "memory"):         2 << 30,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c1", "f2", "memory"):       inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c1", "f2", "memory"):         inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c1", "f2", "memory"):        0,
		cell("tally_cluster_queue_nominal_quota", "qy", "", "f1", "nvidia.com/gpu"):   4,
		cell("tally_cluster_queue_borrowing_limit", "qy", "", "f1", "nvidia.com/gpu"): inf,
		cell("tally_cluster_queue_lending_limit", "qy", "", "f1", "nvidia.com/gpu"):   inf,
		cell("tally_cluster_queue_resource_usage", "qy", "", "f1", "nvidia.com/gpu"):  3,
	}, status("qx", 1, 0, 0), status("qy", 0, 1, 0)))

	l.mu.Lock()
	l.books.move(l.cfg, "qx", queues.Usage{{Flavor: "f1", Resource: "cpu"}: 250}, +1)
	l.mu.Unlock()
	l.reconfigure(second)
	check("second config", merge(map[string]float64{
		cell("tally_cluster_queue_nominal_quota", "qx", "c2", "f1", "cpu"):      3,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c2", "f1", "cpu"):    inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c2", "f1", "cpu"):      inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c2", "f1", "cpu"):     0.25,
		cell("tally_cluster_queue_nominal_quota", "qx", "c2", "f1", "memory"):   1 << 30,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c2", "f1", "memory"): inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c2", "f1", "memory"):   inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c2", "f1", "memory"):  0,
		// qy has left the config; its workloads still hold 3 GPUs.
		cell("tally_cluster_queue_resource_usage", "qy", "", "f1", "nvidia.com/gpu"): 3,
	}, status("qx", 1, 0, 0), status("qy", 0, 0, 1)))

	l.mu.Lock()
	l.books.move(l.cfg, "qy", queues.Usage{gpu: 3}, -1)
	l.mu.Unlock()
	check("qy released", merge(map[string]float64{
		cell("tally_cluster_queue_nominal_quota", "qx", "c2", "f1", "cpu"):      3,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c2", "f1", "cpu"):    inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c2", "f1", "cpu"):      inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c2", "f1", "cpu"):     0.25,
		cell("tally_cluster_queue_nominal_quota", "qx", "c2", "f1", "memory"):   1 << 30,
		cell("tally_cluster_queue_borrowing_limit", "qx", "c2", "f1", "memory"): inf,
		cell("tally_cluster_queue_lending_limit", "qx", "c2", "f1", "memory"):   inf,
		cell("tally_cluster_queue_resource_usage", "qx", "c2", "f1", "memory"):  0,
	}, status("qx", 1, 0, 0)))
	if got := only(gather(t, reg), "tally_pending_workloads"); len(got) != 2 {
		t.Errorf("pending series %v, want qx's two", got)
	}
}

// TestDashboardQueriesKnownMetrics: deploy/grafana/tally-dashboard.json is
// valid JSON, and every tally_ metric its queries name is one of the
// ledger's (a histogram's by its _bucket, _sum or _count series); every
// metric of Kueue's that tally has is on some panel.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	data, err := os.ReadFile("../deploy/grafana/tally-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	known := metrics.Names()
	used := map[string]bool{}
	name := regexp.MustCompile(`\btally_[a-z_]+`)
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && strings.HasSuffix(b, "_seconds") {
					base = b
				}
			}
			if !slices.Contains(known, base) {
				t.Errorf("the dashboard queries %s, which tally does not export (query %q)", n, e)
			}
			used[base] = true
		}
	}
	for _, n := range []string{"tally_pending_workloads", "tally_admitted_workloads_total", "tally_admission_wait_time_seconds",
		"tally_evicted_workloads_total", "tally_cluster_queue_resource_usage", "tally_cluster_queue_nominal_quota"} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

// TestWatchDelay: tally_watch_delay_seconds times an admission write's
// version until the watch brings it (or a later one), counts a version the
// watch brought first as no delay, and forgets a deleted workload's.
func TestWatchDelay(t *testing.T) {
	s := newScenario(t)
	delay := func() (count, sum float64) {
		got := gather(t, s.reg)
		return got["tally_watch_delay_seconds_count{}"], got["tally_watch_delay_seconds_sum{}"]
	}
	s.step(strings.Fields("create a"))
	s.step(strings.Fields("create b"))
	rv := func(name string) string {
		n, err := strconv.Atoi(s.objects[name].GetResourceVersion())
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(n + 1)
	}
	uid := func(name string) types.UID { return s.objects[name].GetUID() }

	s.l.awaitEcho(uid("a"), rv("a"))
	s.clock.Step(2 * time.Second)
	if n, _ := delay(); n != 0 {
		t.Fatalf("timed before the watch brought the version: count %v", n)
	}
	s.update("a", func(m map[string]any) {}) // the written version
	if n, sum := delay(); n != 1 || sum != 2 {
		t.Errorf("after the echo: count %v, sum %v; want 1, 2", n, sum)
	}

	s.update("b", func(m map[string]any) {})
	s.l.awaitEcho(uid("b"), s.objects["b"].GetResourceVersion()) // already seen
	if n, sum := delay(); n != 2 || sum != 2 {
		t.Errorf("a version the watch brought first: count %v, sum %v; want 2, 2", n, sum)
	}

	s.l.awaitEcho(uid("b"), rv("b"))
	s.l.onJobDelete(s.objects["b"])
	if len(s.l.echoes) != 0 {
		t.Errorf("a deleted workload's echo is kept: %v", s.l.echoes)
	}
	s.l.awaitEcho(uid("b"), "not-a-number")
	if len(s.l.echoes) != 0 {
		t.Errorf("an opaque resourceVersion is timed: %v", s.l.echoes)
	}
}

// TestLocalQueueMetricsFollowConfig: a LocalQueue of the config has its
// status and zeroed gauges, and so has the "default" LocalQueue of a
// namespace bound by its annotation; a LocalQueue that leaves the config
// loses its status at once and its other series once its last workload is
// gone; an annotation that goes takes its "default" along.
func TestLocalQueueMetricsFollowConfig(t *testing.T) {
	parse := func(c *queuestest.Config) *queues.Config {
		t.Helper()
		cfg, _, errs := queues.Parse(c.Bytes())
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return cfg
	}
	base := func() *queuestest.Config {
		return queuestest.New().Flavor("default").
			ClusterQueue("cq", "namespaceSelector: {}").Group("cpu", "memory").Quotas("default", "cpu=10", "memory=10Gi").
			ClusterQueue("held", "stopPolicy: Hold", "namespaceSelector: {}").Group("cpu", "memory").Quotas("default", "cpu=1", "memory=1Gi")
	}
	reg := prometheus.NewRegistry()
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{Registry: reg})
	l.synced = true
	l.reconfigure(parse(base().LocalQueue("team", "lq", "cq").LocalQueue("team", "stopped", "held")))
	local := func(ns, name string) map[string]float64 {
		out := map[string]float64{}
		for k, v := range gather(t, reg) {
			if strings.HasPrefix(k, "tally_local_queue_") && strings.Contains(k, fmt.Sprintf(`name=%q,namespace=%q`, name, ns)) {
				out[k] = v
			}
		}
		return out
	}
	series := func(ns, name string, active float64, more map[string]float64) map[string]float64 {
		lq := fmt.Sprintf(`name=%q,namespace=%q`, name, ns)
		out := map[string]float64{
			`tally_local_queue_pending_workloads{` + lq + `,status="active"}`:       0,
			`tally_local_queue_pending_workloads{` + lq + `,status="inadmissible"}`: 0,
			`tally_local_queue_reserving_active_workloads{` + lq + `}`:              0,
			`tally_local_queue_admitted_active_workloads{` + lq + `}`:               0,
			`tally_local_queue_finished_workloads{` + lq + `}`:                      0,
		}
		if active >= 0 {
			out[`tally_local_queue_status{active="True",`+lq+`}`] = active
			out[`tally_local_queue_status{active="False",`+lq+`}`] = 1 - active
			out[`tally_local_queue_status{active="Unknown",`+lq+`}`] = 0
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	check := func(when, ns, name string, want map[string]float64) {
		t.Helper()
		if diff := cmp.Diff(want, local(ns, name)); diff != "" {
			t.Errorf("%s: LocalQueue %s/%s (-want +got):\n%s", when, ns, name, diff)
		}
	}
	check("in the config", "team", "lq", series("team", "lq", 1, nil))
	check("its ClusterQueue held", "team", "stopped", series("team", "stopped", 0, nil))

	l.onNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bound", Annotations: map[string]string{queues.AnnotationNamespaceQueue: "cq"}}})
	check("bound by its annotation", "bound", "default", series("bound", "default", 1, nil))

	job := StripJobOrDie(kindstest.Job("team", "a").UID("uid-a").ResourceVersion("1").Generation(1).Created(time.Unix(1, 0)).
		Label(queues.LabelState, "pending").Label(queues.LabelQueue, "cq").Label(queues.LabelKueueQueueName, "lq").
		Suspend(true).Request("cpu", "1").Obj())
	l.onJob(job)
	pending := map[string]float64{`tally_local_queue_pending_workloads{name="lq",namespace="team",status="active"}`: 1}
	check("a workload waits", "team", "lq", series("team", "lq", 1, pending))

	// The LocalQueue leaves the config: its status goes, its workload
	// still counts; its ClusterQueue leaves too.
	l.reconfigure(parse(queuestest.New().Flavor("default").
		ClusterQueue("other", "namespaceSelector: {}").Group("cpu").Quotas("default", "cpu=1")))
	check("left the config", "team", "lq", series("team", "lq", -1, pending))
	check("left the config, empty", "team", "stopped", map[string]float64{})
	check("its ClusterQueue left the config", "bound", "default", series("bound", "default", 0, nil))

	l.onJobDelete(job)
	check("its workload deleted", "team", "lq", map[string]float64{})

	l.onNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bound"}})
	check("unbound", "bound", "default", map[string]float64{})
}
