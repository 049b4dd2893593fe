package ledger

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/record"

	"tally.dev/tally/queues"
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

// TestUsageGaugeIsLive: tally_cluster_queue_usage follows every charge and
// release as it happens, with no recount: an admission decided by a pass,
// one the informer shows, a finish and a delete. The gauge is shared by
// every Ledger of the test binary; this test's ClusterQueue is its own.
func TestUsageGaugeIsLive(t *testing.T) {
	const queue = "gauge-live"
	cfg, _, errs := queues.Parse([]byte(`apiVersion: tally.dev/v1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: tally.dev/v1
kind: ClusterQueue
metadata: {name: gauge-live}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 10}, {name: memory, nominalQuota: 10Gi}]
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{})
	l.cfg = cfg
	l.synced = true
	l.namespaces["ns-gauge"] = &nsInfo{}
	job := func(i int) *batchv1.Job {
		j := StripJobOrDie(benchJob(i, 1, true))
		j.Namespace = "ns-gauge"
		j.Labels[queues.LabelQueue] = queue
		return j
	}
	check := func(when string, cpu, memory float64) {
		t.Helper()
		if got := metricValue(t, l.metrics.usage.WithLabelValues(queue, "default", "cpu")); got != cpu {
			t.Errorf("%s: cpu gauge %v, want %v", when, got, cpu)
		}
		if got := metricValue(t, l.metrics.usage.WithLabelValues(queue, "default", "memory")); got != memory {
			t.Errorf("%s: memory gauge %v, want %v", when, got, memory)
		}
	}

	a := job(0)
	l.onJob(a)
	check("pending", 0, 0)
	if writes := l.decide(); len(writes) != 1 {
		t.Fatalf("the pass decided %d writes, want 1", len(writes))
	}
	check("a decided", 1000, 1<<30)
	aAdmitted := jobAt(a, "2", markAdmitted)
	l.onJob(aAdmitted)
	check("a admitted", 1000, 1<<30)

	b := jobAt(job(1), "2", markAdmitted)
	l.onJob(b)
	check("b admitted", 2000, 2<<30)

	l.onJob(jobAt(aAdmitted, "3", markFinished))
	check("a finished", 1000, 1<<30)
	l.onJobDelete(b)
	check("b deleted", 0, 0)
}
