package ledger

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/queues"
)

type metrics struct {
	usage       *prometheus.GaugeVec
	share       *prometheus.GaugeVec
	pending     prometheus.Gauge
	admitted    prometheus.Counter
	preempted   prometheus.Counter
	drift       prometheus.Counter
	repairs     *prometheus.CounterVec
	passSeconds prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		usage: register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tally_cluster_queue_usage", Help: "Quota in use per ClusterQueue, flavor and resource, in canonical units (millicores for cpu).",
		}, []string{"cluster_queue", "flavor", "resource"})),
		share: register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tally_cluster_queue_share", Help: "Weighted dominant-resource share of each ClusterQueue in a cohort with fair sharing (0 within nominal quota; 1000 = borrowing all the cohort lends).",
		}, []string{"cluster_queue", "cohort"})),
		pending: register(prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_pending_jobs", Help: "Jobs waiting for quota.",
		})),
		admitted: register(prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_admissions_total", Help: "Jobs admitted.",
		})),
		preempted: register(prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_preemptions_total", Help: "Jobs preempted.",
		})),
		drift: register(prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_usage_drift_repairs_total", Help: "ClusterQueues whose usage a recount had to repair.",
		})),
		repairs: register(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_recount_repairs_total", Help: "Job events the ledger missed and a recount replayed, by kind: missed-admission, missed-finish, missed-delete, missed-update.",
		}, []string{"kind"})),
		passSeconds: register(prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_admission_pass_seconds", Help: "Time one admission pass holds the ledger.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		})),
	}
}

// register registers c with controller-runtime's registry, reusing an
// already registered collector of the same name.
func register[C prometheus.Collector](c C) C {
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// setUsage sets the usage gauge of the cells of queue named in changed to
// their value in cur: 0 for a cell cur no longer holds.
func (m *metrics) setUsage(queue string, cur, changed queues.Usage) {
	for fr := range changed {
		m.usage.WithLabelValues(queue, fr.Flavor, string(fr.Resource)).Set(float64(cur[fr]))
	}
}

// observeUsage sets the usage gauge to a recount's totals, fresh, where
// the gauge showed old: a cell in old only reads 0.
func (m *metrics) observeUsage(old, fresh map[string]queues.Usage) {
	for q := range unionKeys(old, fresh) {
		m.setUsage(q, fresh[q], old[q])
		m.setUsage(q, fresh[q], fresh[q])
	}
}

// observeShares sets the share gauge of every ClusterQueue in a cohort with
// fair sharing and returns the shares.
func (m *metrics) observeShares(s *queues.Snapshot) map[string]int64 {
	shares := map[string]int64{}
	for _, name := range s.Config.QueueNames {
		cq := s.Config.ClusterQueues[name]
		if !s.Config.FairSharing(cq.Cohort) {
			continue
		}
		shares[name] = s.Share(cq)
		m.share.WithLabelValues(name, cq.Cohort).Set(float64(shares[name]))
	}
	return shares
}
