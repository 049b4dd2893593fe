package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// A ClusterQueue of 3 cpu and 6Gi on the CPU nodes, in no cohort, that
// preempts lower priorities within itself.
const metricsQueueDoc = `
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: e2e-metrics
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu-flavor
      resources:
      - {name: cpu, nominalQuota: 3}
      - {name: memory, nominalQuota: 6Gi}
`

// One Job of 4 cpu (more than the queue can ever give), then five 1-cpu
// Jobs, in a queue of 3 cpu: tally's /metrics shows 3 admissions, 2
// workloads active and 1 inadmissible in the queue, 3 cpu and 3Gi in use,
// its quota and its status, and admission wait times that match the Jobs'
// admitted-at annotations. A Job of higher priority then preempts one:
// one eviction, one more admission, and the victim waits again. At each
// step the Jobs themselves say the same, and so do the metrics of the
// namespace's LocalQueue "default" and tally_preempted_workloads_total.
func TestMetrics(t *testing.T) {
	s := setup(t)
	ctx := testContext(t, 5*time.Minute)
	const ns, queue = "e2e-metrics", "e2e-metrics"
	useQueues(ctx, t, s, []string{queue}, metricsQueueDoc, priorityClassDocs)
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatalf("binding namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Errorf("deleting the Jobs of %s: %v", ns, err)
		}
	})
	m := &metricsCheck{s: s, ns: ns, queue: queue}
	m.before = m.scrape(ctx, t)

	job := func(name, prio, cpu string) *batchv1.Job {
		return framework.NewJob(ns, name).Request("cpu", cpu).Request("memory", "1Gi").Runtime(10*time.Minute).
			Label(framework.LabelPriorityClass, prio).Obj()
	}
	// huge comes first, and alone, so that a pass tries it itself: behind
	// a smaller Job that had to wait, a pass would only find that it waits
	// too (see README, Metrics).
	if err := framework.CreateJobs(ctx, s.client, job("huge", "e2e-low", "4")); err != nil {
		t.Fatal(err)
	}
	m.wait(ctx, t, metricsWant{inadmissible: 1})
	var jobs []*batchv1.Job
	for i := range 5 {
		jobs = append(jobs, job(fmt.Sprintf("low-%d", i), "e2e-low", "1"))
	}
	if err := framework.CreateJobs(ctx, s.client, jobs...); err != nil {
		t.Fatal(err)
	}
	got := m.wait(ctx, t, metricsWant{admissions: 3, running: 3, active: 2, inadmissible: 1, cpu: 3, memory: 3 << 30})

	// Each admission's wait is the time from the Job's creation to its
	// admitted-at annotation, both to the second.
	var waited float64
	for _, j := range m.jobs(ctx, t) {
		if j.Labels[framework.LabelState] != framework.StateAdmitted {
			continue
		}
		at, err := time.Parse(time.RFC3339, j.Annotations[framework.AnnotationAdmittedAt])
		if err != nil {
			t.Fatalf("Job %s: %s: %v", j.Name, framework.AnnotationAdmittedAt, err)
		}
		waited += at.Sub(j.CreationTimestamp.Time).Seconds()
	}
	sum := m.delta(got, "tally_admission_wait_time_seconds_sum", "cluster_queue", queue)
	if math.Abs(sum-waited) >= 3 {
		t.Errorf("tally_admission_wait_time_seconds_sum grew by %.3fs; the Jobs' annotations say %.0fs (to within 1s a Job)", sum, waited)
	}
	t.Logf("3 admissions waited %.3fs in all", sum)

	urgent := job("urgent", "e2e-high", "1")
	if err := framework.CreateJobs(ctx, s.client, urgent); err != nil {
		t.Fatal(err)
	}
	waitAdmitted(ctx, t, s.client, urgent, time.Minute)
	m.wait(ctx, t, metricsWant{admissions: 4, evictions: 1, running: 3, active: 3, inadmissible: 1, cpu: 3, memory: 3 << 30})
}

// metricsWant is what tally's metrics and the Jobs must show for the test's
// queue: admissions and evictions since the test started; running,
// active and inadmissible Jobs; cpu (cores) and memory (bytes) in use.
type metricsWant struct {
	admissions, evictions, running, active, inadmissible int
	cpu, memory                                          float64
}

type metricsCheck struct {
	s         *suite
	ns, queue string
	// before is the scrape at the start: tally's counters may have
	// counted before this test.
	before framework.Metrics
}

func (m *metricsCheck) scrape(ctx context.Context, t *testing.T) framework.Metrics {
	t.Helper()
	got, err := framework.ScrapeMetrics(ctx, m.s.tally.MetricsPort)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (m *metricsCheck) jobs(ctx context.Context, t *testing.T) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := m.s.client.List(ctx, &list, client.InNamespace(m.ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// delta is how much a counter's series that have labels grew, in all,
// since the test started (a counter has a series per priority class).
func (m *metricsCheck) delta(got framework.Metrics, name string, labels ...string) float64 {
	now, _ := got.Sum(name, labels...)
	was, _ := m.before.Sum(name, labels...)
	return now - was
}

// wait polls the Jobs and /metrics until both show want, and returns the
// last scrape.
func (m *metricsCheck) wait(ctx context.Context, t *testing.T, want metricsWant) framework.Metrics {
	t.Helper()
	var last framework.Metrics
	err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		var list batchv1.JobList
		if err := m.s.client.List(ctx, &list, client.InNamespace(m.ns)); err != nil {
			return false, err.Error(), nil
		}
		jobs := list.Items
		got, err := framework.ScrapeMetrics(ctx, m.s.tally.MetricsPort)
		if err != nil {
			return false, err.Error(), nil
		}
		last = got
		var bad []string
		expect := func(what string, have, want float64) {
			if have != want {
				bad = append(bad, fmt.Sprintf("%s %v (want %v)", what, have, want))
			}
		}

		// What the Jobs say.
		var running, waiting, never int
		var cpu, memory float64
		for i := range jobs {
			j := &jobs[i]
			switch state := j.Labels[framework.LabelState]; {
			case state == framework.StateAdmitted && !framework.Suspended(j):
				running++
				n := float64(ptrOr(j.Spec.Parallelism, 1))
				cpu += n * float64(framework.PodRequest(&j.Spec.Template.Spec, corev1.ResourceCPU))
				memory += n * float64(framework.PodRequest(&j.Spec.Template.Spec, corev1.ResourceMemory))
			case state == framework.StatePending && framework.Suspended(j):
				waiting++
			case state == framework.StateInadmissible:
				never++
			}
		}
		expect("running Jobs", float64(running), float64(want.running))
		expect("pending Jobs", float64(waiting), float64(want.active))
		expect("inadmissible Jobs", float64(never), float64(want.inadmissible))
		expect("cpu the running Jobs request", cpu, want.cpu)
		expect("memory the running Jobs request", memory, want.memory)

		// What tally's metrics say.
		q := []string{"cluster_queue", m.queue}
		value := func(name string, labels ...string) float64 {
			v, ok := got.Value(name, append(append([]string{}, q...), labels...)...)
			if !ok {
				bad = append(bad, fmt.Sprintf("no series %s", framework.Series(name, pairs(append(append([]string{}, q...), labels...)))))
			}
			return v
		}
		cell := func(resource string) []string {
			return []string{"cohort", "", "flavor", "cpu-flavor", "resource", resource}
		}
		expect("tally_admitted_workloads_total growth", m.delta(got, "tally_admitted_workloads_total", q...), float64(want.admissions))
		expect("tally_admission_wait_time_seconds_count growth", m.delta(got, "tally_admission_wait_time_seconds_count", q...), float64(want.admissions))
		expect("tally_evicted_workloads_total{reason=Preempted} growth",
			m.delta(got, "tally_evicted_workloads_total", append(append([]string{}, q...), "reason", "Preempted")...), float64(want.evictions))
		expect("active", value("tally_pending_workloads", "status", "active"), float64(want.active))
		expect("inadmissible", value("tally_pending_workloads", "status", "inadmissible"), float64(want.inadmissible))
		expect("cpu usage", value("tally_cluster_queue_resource_usage", cell("cpu")...), want.cpu)
		expect("memory usage", value("tally_cluster_queue_resource_usage", cell("memory")...), want.memory)
		expect("cpu nominal quota", value("tally_cluster_queue_nominal_quota", cell("cpu")...), 3)
		expect("memory nominal quota", value("tally_cluster_queue_nominal_quota", cell("memory")...), 6<<30)
		expect("cpu borrowing limit", value("tally_cluster_queue_borrowing_limit", cell("cpu")...), math.Inf(1))
		expect("status active", value("tally_cluster_queue_status", "status", "active"), 1)
		expect("status pending", value("tally_cluster_queue_status", "status", "pending"), 0)
		expect("tally_preempted_workloads_total{reason=InClusterQueue} growth", m.delta(got, "tally_preempted_workloads_total",
			"preempting_cluster_queue", m.queue, "reason", "InClusterQueue"), float64(want.evictions))

		// The namespace is bound by its annotation: its Jobs, which
		// name no LocalQueue, are in its LocalQueue "default".
		lq := []string{"name", "default", "namespace", m.ns}
		local := func(name string, labels ...string) float64 {
			v, ok := got.Value(name, append(append([]string{}, lq...), labels...)...)
			if !ok {
				bad = append(bad, fmt.Sprintf("no series %s", framework.Series(name, pairs(append(append([]string{}, lq...), labels...)))))
			}
			return v
		}
		expect("local active", local("tally_local_queue_pending_workloads", "status", "active"), float64(want.active))
		expect("local inadmissible", local("tally_local_queue_pending_workloads", "status", "inadmissible"), float64(want.inadmissible))
		expect("local admitted active", local("tally_local_queue_admitted_active_workloads"), float64(want.running))
		// A cell has a series once a workload is charged in it.
		reserved, _ := got.Sum("tally_local_queue_resource_reservation", append(append([]string{}, lq...), "flavor", "cpu-flavor", "resource", "cpu")...)
		expect("local cpu reservation", reserved, want.cpu)
		expect("local status", local("tally_local_queue_status", "active", "True"), 1)
		expect("tally_local_queue_admitted_workloads_total growth", m.delta(got, "tally_local_queue_admitted_workloads_total", lq...), float64(want.admissions))
		expect("tally_local_queue_evicted_workloads_total{reason=Preempted,priority_class=e2e-low} growth", m.delta(got, "tally_local_queue_evicted_workloads_total",
			append(append([]string{}, lq...), "reason", "Preempted", "priority_class", "e2e-low")...), float64(want.evictions))
		if len(bad) > 0 {
			return false, strings.Join(bad, "; "), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("tally's metrics and the Jobs of %s do not show %+v: %v", m.ns, want, err)
	}
	return last
}

// pairs makes a label map of k, v pairs.
func pairs(kv []string) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
