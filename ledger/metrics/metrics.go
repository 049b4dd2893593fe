package metrics

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/flavors"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Label values, as Kueue's.
const (
	pendingActive       = "active"
	pendingInadmissible = "inadmissible"

	cqStatusPending     = "pending"
	cqStatusActive      = "active"
	cqStatusTerminating = "terminating"

	// EvictedPreempted: suspended by tally to make room for another
	// workload (Kueue's reason of the same name).
	EvictedPreempted = "Preempted"
	// EvictedSuspendedLate: found running without tally's admission and
	// suspended, as it does not fit (late.go; Kueue has no such reason).
	EvictedSuspendedLate = "SuspendedLate"
	// EvictedResized: suspended to be admitted again at the size its pods
	// turned out to have (gated.go; Kueue has no such reason).
	EvictedResized = "PodsLarger"
	// EvictedPodsReady: its pods were not ready in time (podsready.go;
	// Kueue's reason of the same name).
	EvictedPodsReady = "PodsReadyTimeout"
	// EvictedNodeFailures: a node its pods were placed on in a topology
	// was lost, and its domain has no room to make them again
	// (ledger/topology.go; Kueue's reason of the same name).
	EvictedNodeFailures = "NodeFailures"

	attemptSuccess      = "success"
	attemptInadmissible = "inadmissible"

	lqActive   = "True"
	lqInactive = "False"
	lqUnknown  = "Unknown"
)

var (
	cqStatuses      = [...]string{cqStatusPending, cqStatusActive, cqStatusTerminating}
	lqStatuses      = [...]string{lqActive, lqInactive, lqUnknown}
	pendingStatuses = [...]string{pendingActive, pendingInadmissible}
)

// waitBuckets are Kueue's buckets for its wait times: 1s, then 2.5s
// doubling up to 10240s (about 2h50m).
var waitBuckets = append([]float64{1}, prometheus.ExponentialBuckets(2.5, 2, 13)...)

// Metrics are the ledger's metrics and what they keep to move at the cost
// of a change. Its methods are called under the ledger's lock.
type Metrics struct {
	// names are the metric names, in registration order.
	names []string

	// Kueue's.
	pending       *prometheus.GaugeVec     // {cluster_queue, status}
	admitted      *prometheus.CounterVec   // {cluster_queue, priority_class}
	waitTime      *prometheus.HistogramVec // {cluster_queue, priority_class}
	reserved      *prometheus.CounterVec   // likewise
	reservedWait  *prometheus.HistogramVec // likewise
	evicted       *prometheus.CounterVec   // {cluster_queue, reason, underlying_cause, priority_class}
	preemptedWith *prometheus.CounterVec   // {preempting_cluster_queue, reason}
	usage         *prometheus.GaugeVec     // {cluster_queue, cohort, flavor, resource}
	nominal       *prometheus.GaugeVec     // likewise
	borrowing     *prometheus.GaugeVec     // likewise
	lending       *prometheus.GaugeVec     // likewise
	status        *prometheus.GaugeVec     // {cluster_queue, status}
	attempts      *prometheus.CounterVec   // {result}

	// tally's own.
	share       *prometheus.GaugeVec
	preempted   prometheus.Counter
	drift       prometheus.Counter
	repairs     *prometheus.CounterVec
	passSeconds prometheus.Histogram
	watchDelay  prometheus.Histogram

	// Kueue's, per LocalQueue (localmetrics.go).
	lq localVecs

	// queues holds, per ClusterQueue that has series, what they were set
	// from; locals likewise per LocalQueue. They change under the
	// ledger's lock.
	queues map[string]*queueMetrics
	locals map[localKey]*localMetrics
	// admissions holds the series of each ClusterQueue and priority
	// class that admissions were counted in: they are never removed.
	admissions map[[2]string]admissionSeries
}

// admissionSeries are the series one admission adds to, looked up once:
// a lookup hashes the labels, and every admission adds to eight.
type admissionSeries struct {
	admitted, reserved prometheus.Counter
	wait, reservedWait prometheus.Observer
}

func (s admissionSeries) observe(wait time.Duration) {
	s.admitted.Inc()
	s.wait.Observe(wait.Seconds())
	s.reserved.Inc()
	s.reservedWait.Observe(wait.Seconds())
}

// queueMetrics is what the metrics keep of one ClusterQueue.
// Workload is what the metrics keep of one workload (the ledger's
// entry embeds it): how tally_pending_workloads counts it (0: not at
// all, 1: active, 2: inadmissible), in pendingIn's ClusterQueue
// (notePending); its LocalQueue (localQueueOf), and how the
// LocalQueue metrics count it (noteLocal).
type Workload struct {
	pendingAs  uint8
	pendingIn  *queueMetrics
	localQueue string
	local      localCount
}

type queueMetrics struct {
	name string
	// cohort is the cohort label of its resource series.
	cohort string
	// inConfig: the config in force has it. removed: a config had it,
	// the one in force has not, and the ledger still counts workloads in
	// it (its status is terminating until they are gone).
	inConfig, removed bool
	// quota holds the cells that have quota series.
	quota map[queues.FlavorResource]bool
	// used: the ledger counts usage in it.
	used bool
	// pending counts its workloads by pending status (pendingStatuses),
	// with their gauges.
	pending      [2]int
	pendingGauge [2]prometheus.Gauge
}

// New makes the ledger's metrics and registers them with reg
// (controller-runtime's registry when nil).
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{queues: map[string]*queueMetrics{}, locals: map[localKey]*localMetrics{}, admissions: map[[2]string]admissionSeries{}}
	resourceLabels := []string{"cluster_queue", "cohort", "flavor", "resource"}
	gauges := func(name, help string, labels ...string) *prometheus.GaugeVec {
		m.names = append(m.names, name)
		return Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
	}
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		m.names = append(m.names, name)
		return Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
	}
	histograms := func(name, help string, labels ...string) *prometheus.HistogramVec {
		m.names = append(m.names, name)
		return Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: waitBuckets}, labels))
	}

	m.pending = gauges("tally_pending_workloads",
		`Workloads waiting for quota, per ClusterQueue and status: "active" waits in the queue (a preemptor waiting for its victims to stop included); "inadmissible" cannot fit under the config in force and waits for a config change, or a change to itself.`,
		"cluster_queue", "status")
	m.admitted = counters("tally_admitted_workloads_total",
		"Workloads admitted (the admission write landed), per ClusterQueue and priority class.", "cluster_queue", "priority_class")
	m.waitTime = histograms("tally_admission_wait_time_seconds",
		"Time from a workload's creation, or its return to its queue after an eviction, until its admission, per ClusterQueue and priority class.",
		"cluster_queue", "priority_class")
	m.reserved = counters("tally_quota_reserved_workloads_total",
		"Workloads that got their quota, per ClusterQueue and priority class: in tally, as admitted (no admission checks).", "cluster_queue", "priority_class")
	m.reservedWait = histograms("tally_quota_reserved_wait_time_seconds",
		"Time from a workload's creation, or its return to its queue after an eviction, until it got its quota, per ClusterQueue and priority class: in tally, as the admission wait.",
		"cluster_queue", "priority_class")
	m.evicted = counters("tally_evicted_workloads_total",
		`Running workloads tally suspended, per ClusterQueue, reason, underlying cause (always "") and priority class: "Preempted" (to make room for another workload), "PodsReadyTimeout" (its pods were not ready in time), "SuspendedLate" (found running without tally's admission, and it does not fit) "PodsLarger" (to be admitted again at its pods' size), "ClusterQueueStopped" or "LocalQueueStopped" (drained by a stopPolicy HoldAndDrain).`,
		"cluster_queue", "reason", "underlying_cause", "priority_class")
	m.preemptedWith = counters("tally_preempted_workloads_total",
		`Workloads preempted (the preemption write landed), per preempting ClusterQueue and reason: "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing" or "InCohortFairSharing".`,
		"preempting_cluster_queue", "reason")
	m.usage = gauges("tally_cluster_queue_resource_usage",
		"Quota in use per ClusterQueue, flavor and resource (cpu in cores, memory in bytes, other resources in their own units): admitted workloads until their pods are gone, admissions in flight and preemptors' claims.",
		resourceLabels...)
	m.nominal = gauges("tally_cluster_queue_nominal_quota",
		"Nominal quota per ClusterQueue, flavor and resource (cpu in cores, memory in bytes).", resourceLabels...)
	m.borrowing = gauges("tally_cluster_queue_borrowing_limit",
		"Borrowing limit per ClusterQueue, flavor and resource (cpu in cores, memory in bytes); +Inf when unset.", resourceLabels...)
	m.lending = gauges("tally_cluster_queue_lending_limit",
		"Lending limit per ClusterQueue, flavor and resource (cpu in cores, memory in bytes); +Inf when unset.", resourceLabels...)
	m.status = gauges("tally_cluster_queue_status",
		`1 for the status of each ClusterQueue, 0 for the others: "active" (in the config in force, admitting), "pending" (in the config, stopped by its stopPolicy), "terminating" (gone from the config while workloads still hold quota or wait in it).`,
		"cluster_queue", "status")
	m.attempts = counters("tally_admission_attempts_total",
		`Admission passes over waiting workloads: "success" when the pass admitted at least one, else "inadmissible".`, "result")

	m.lq = newLocalVecs(gauges, counters, histograms)

	m.share = gauges("tally_cluster_queue_share",
		"Weighted dominant-resource share of each ClusterQueue in a cohort with fair sharing (0 within nominal quota; 1000 = borrowing all the cohort lends).",
		"cluster_queue", "cohort")
	m.names = append(m.names, "tally_preemptions_total")
	m.preempted = Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tally_preemptions_total", Help: "Workloads a pass decided to preempt, whether or not the preemption write then landed (tally_preempted_workloads_total counts those that landed).",
	}))
	m.names = append(m.names, "tally_usage_drift_repairs_total")
	m.drift = Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tally_usage_drift_repairs_total", Help: "ClusterQueues whose usage a recount had to repair.",
	}))
	m.repairs = counters("tally_recount_repairs_total",
		"Job events the ledger missed and a recount replayed, by kind: missed-admission, missed-finish, missed-delete, missed-update.", "kind")
	m.names = append(m.names, "tally_admission_pass_seconds")
	m.passSeconds = Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tally_admission_pass_seconds", Help: "Time one admission pass holds the ledger.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}))
	m.names = append(m.names, "tally_watch_delay_seconds")
	m.watchDelay = Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tally_watch_delay_seconds",
		Help:    "Time from the answer to an admission write until the ledger's watch brings that version of the workload: how far its view, and so the quota it sees freed, lags behind the API server.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}))
	return m
}

// Names lists the names of the ledger's metrics, sorted (a histogram's
// series add _bucket, _sum and _count to its name).
func Names() []string {
	names := append([]string(nil), New(prometheus.NewRegistry()).names...)
	sort.Strings(names)
	return names
}

// Register registers c with reg, reusing an already registered collector
// of the same name.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// ObservePass records how long one admission pass held the ledger.
func (m *Metrics) ObservePass(took time.Duration) { m.passSeconds.Observe(took.Seconds()) }

// ObserveWatchDelay records how long after an admission write's answer
// the watch brought that version of the workload.
func (m *Metrics) ObserveWatchDelay(d time.Duration) { m.watchDelay.Observe(d.Seconds()) }

// Preempting counts victims a pass decided to preempt.
func (m *Metrics) Preempting(victims int) { m.preempted.Add(float64(victims)) }

// Repaired counts a missed Job event a recount replayed, by kind.
func (m *Metrics) Repaired(kind string) { m.repairs.WithLabelValues(kind).Inc() }

// Drifted counts ClusterQueues whose usage a recount had to repair.
func (m *Metrics) Drifted(queues int) { m.drift.Add(float64(queues)) }

// SetLocalQueue records the LocalQueue of a workload whose labels are
// labels (localQueueOf).
func (wm *Workload) SetLocalQueue(labels map[string]string) { wm.localQueue = localQueueOf(labels) }

// LocalQueue is the LocalQueue the workload counts in.
func (wm *Workload) LocalQueue() string { return wm.localQueue }

// AmountValue is a in the resource's standard unit, as Kueue reports it:
// cpu in cores (tally counts millicores), +Inf for Unlimited.
func AmountValue(r corev1.ResourceName, a flavors.Amount) float64 {
	if a.IsUnlimited() {
		return math.Inf(1)
	}
	if r == corev1.ResourceCPU {
		return float64(a) / 1000
	}
	return float64(a)
}

// queue returns the metrics of the ClusterQueue named name, made (with
// its pending gauges at 0) if it has none yet; cfg is the config in force.
func (m *Metrics) queue(cfg *queues.Config, name string) *queueMetrics {
	if q := m.queues[name]; q != nil {
		return q
	}
	q := &queueMetrics{name: name}
	if cfg != nil {
		if cq := cfg.ClusterQueues[name]; cq != nil {
			q.cohort, q.inConfig = cq.Cohort, true
		}
	}
	for i, s := range pendingStatuses {
		q.pendingGauge[i] = m.pending.WithLabelValues(name, s)
		q.pendingGauge[i].Set(0)
	}
	m.queues[name] = q
	return q
}

// setUsage sets the usage gauge of the cells of queue named in changed to
// their value in cur: 0 for a cell cur no longer holds.
func (m *Metrics) SetUsage(cfg *queues.Config, queue string, cur, changed queues.Usage) {
	q := m.queue(cfg, queue)
	for fr := range changed {
		m.usage.WithLabelValues(queue, q.cohort, fr.Flavor, string(fr.Resource)).Set(AmountValue(fr.Resource, cur[fr]))
	}
	q.used = len(cur) > 0
	m.forgetIfDone(q)
}

// observeUsage sets the usage gauge to a recount's totals, fresh, where
// the gauge showed old: a cell in old only reads 0.
func (m *Metrics) ObserveUsage(cfg *queues.Config, old, fresh map[string]queues.Usage) {
	for q := range queues.UnionKeys(old, fresh) {
		m.SetUsage(cfg, q, fresh[q], old[q])
		m.SetUsage(cfg, q, fresh[q], fresh[q])
	}
}

// pendingStatus is how tally_pending_workloads counts e (see
// Workload.pendingAs); gone says it has left the ledger.
func pendingStatus(e *machine.Entry, gone bool) uint8 {
	if gone || e.W == nil {
		return 0
	}
	switch e.Phase() {
	case machine.Pending:
		return 1
	case machine.Inadmissible:
		return 2
	}
	return 0
}

// Note keeps the metrics in step with workload e (wm what they keep of
// it), which may have changed; gone says it has left the ledger (a
// deleted workload whose pods still run keeps its quota, and counts in the
// resource series only); class is its priority class.
func (m *Metrics) Note(cfg *queues.Config, wm *Workload, e *machine.Entry, gone bool, class string) {
	m.notePending(cfg, wm, e, gone)
	m.noteLocal(cfg, wm, e, gone, class)
}

// notePending keeps tally_pending_workloads in step with e, whose phase or
// queue may have changed; gone says it has left the ledger. A workload
// counts as active while pending, as inadmissible while inadmissible.
func (m *Metrics) notePending(cfg *queues.Config, wm *Workload, e *machine.Entry, gone bool) {
	as := pendingStatus(e, gone)
	if as == wm.pendingAs && (as == 0 || wm.pendingIn.name == e.W.Queue) {
		return
	}
	if q := wm.pendingIn; q != nil {
		i := wm.pendingAs - 1
		q.pending[i]--
		q.pendingGauge[i].Set(float64(q.pending[i]))
		wm.pendingAs, wm.pendingIn = 0, nil
		m.forgetIfDone(q)
	}
	if as != 0 {
		q := m.queue(cfg, e.W.Queue)
		q.pending[as-1]++
		q.pendingGauge[as-1].Set(float64(q.pending[as-1]))
		wm.pendingAs, wm.pendingIn = as, q
	}
}

// setStatus reports status as the ClusterQueue's.
func (m *Metrics) setStatus(queue, status string) {
	for _, s := range cqStatuses {
		v := 0.0
		if s == status {
			v = 1
		}
		m.status.WithLabelValues(queue, s).Set(v)
	}
}

// observeConfig puts cfg in force: the quota series of every ClusterQueue
// and a usage series for each of its quota cells, its status, and the
// series of ClusterQueues and cells that went away removed. usage is the
// ledger's.
func (m *Metrics) ObserveConfig(cfg *queues.Config, usage map[string]queues.Usage) {
	for _, name := range cfg.QueueNames {
		cq := cfg.ClusterQueues[name]
		q := m.queue(cfg, name)
		if q.cohort != cq.Cohort {
			// Every resource series carries the cohort: all are set
			// again under the new one.
			m.deleteResourceSeries(q)
			q.cohort = cq.Cohort
			for fr, a := range usage[name] {
				m.usage.WithLabelValues(name, q.cohort, fr.Flavor, string(fr.Resource)).Set(AmountValue(fr.Resource, a))
			}
		}
		q.inConfig, q.removed = true, false
		cells := map[queues.FlavorResource]queues.Quota{}
		for gi := range cq.ResourceGroups {
			for _, fq := range cq.ResourceGroups[gi].Flavors {
				for r, quota := range fq.Quotas {
					fr := queues.FlavorResource{Flavor: fq.Name, Resource: r}
					if _, dup := cells[fr]; !dup {
						cells[fr] = quota
					}
				}
			}
		}
		for fr := range q.quota {
			if _, ok := cells[fr]; !ok {
				m.deleteQuotaSeries(q, fr, usage[name])
			}
		}
		q.quota = make(map[queues.FlavorResource]bool, len(cells))
		for fr, quota := range cells {
			labels := []string{name, q.cohort, fr.Flavor, string(fr.Resource)}
			m.nominal.WithLabelValues(labels...).Set(AmountValue(fr.Resource, quota.Nominal))
			m.borrowing.WithLabelValues(labels...).Set(AmountValue(fr.Resource, quota.BorrowingLimit))
			m.lending.WithLabelValues(labels...).Set(AmountValue(fr.Resource, quota.LendingLimit))
			m.usage.WithLabelValues(labels...).Set(AmountValue(fr.Resource, usage[name][fr]))
			q.quota[fr] = true
		}
		if cq.StopPolicy == "Hold" || cq.StopPolicy == "HoldAndDrain" {
			m.setStatus(name, cqStatusPending)
		} else {
			m.setStatus(name, cqStatusActive)
		}
	}
	for name, q := range m.queues {
		if cfg.ClusterQueues[name] != nil {
			continue
		}
		if q.inConfig {
			q.inConfig, q.removed = false, true
			for fr := range q.quota {
				m.deleteQuotaSeries(q, fr, usage[name])
			}
			q.quota = nil
			m.setStatus(name, cqStatusTerminating)
		}
		m.forgetIfDone(q)
	}
	m.observeLocalConfig(cfg)
}

// deleteQuotaSeries removes the quota series of a cell, and its usage
// series unless the queue uses it.
func (m *Metrics) deleteQuotaSeries(q *queueMetrics, fr queues.FlavorResource, used queues.Usage) {
	labels := []string{q.name, q.cohort, fr.Flavor, string(fr.Resource)}
	m.nominal.DeleteLabelValues(labels...)
	m.borrowing.DeleteLabelValues(labels...)
	m.lending.DeleteLabelValues(labels...)
	if _, ok := used[fr]; !ok {
		m.usage.DeleteLabelValues(labels...)
	}
}

// deleteResourceSeries removes every resource series of a ClusterQueue.
func (m *Metrics) deleteResourceSeries(q *queueMetrics) {
	match := prometheus.Labels{"cluster_queue": q.name}
	for _, v := range []*prometheus.GaugeVec{m.usage, m.nominal, m.borrowing, m.lending} {
		v.DeletePartialMatch(match)
	}
	q.quota = nil
}

// forgetIfDone removes every series of a ClusterQueue that the config in
// force does not have once the ledger counts nothing in it.
func (m *Metrics) forgetIfDone(q *queueMetrics) {
	if q.inConfig || q.used || q.pending != [2]int{} || m.queues[q.name] != q {
		return
	}
	m.deleteResourceSeries(q)
	for _, s := range pendingStatuses {
		m.pending.DeleteLabelValues(q.name, s)
	}
	if q.removed {
		for _, s := range cqStatuses {
			m.status.DeleteLabelValues(q.name, s)
		}
	}
	delete(m.queues, q.name)
}

// observeAdmission counts the admission of e that landed, in queue, wait
// after it started waiting: in tally, quota is reserved and the workload
// admitted at once. class is its priority class.
func (m *Metrics) ObserveAdmission(cfg *queues.Config, wm *Workload, e *machine.Entry, queue, class string, wait time.Duration) {
	s, ok := m.admissions[[2]string{queue, class}]
	if !ok {
		s = admissionSeries{admitted: m.admitted.WithLabelValues(queue, class), reserved: m.reserved.WithLabelValues(queue, class),
			wait: m.waitTime.WithLabelValues(queue, class), reservedWait: m.reservedWait.WithLabelValues(queue, class)}
		m.admissions[[2]string{queue, class}] = s
	}
	s.observe(wait)
	if lm := m.localOf(cfg, wm, e); lm != nil {
		ls, ok := lm.admissions[class]
		if !ok {
			lm.classes[class] = true
			ls = admissionSeries{admitted: m.lq.admitted.WithLabelValues(lm.name, lm.namespace, class),
				reserved:     m.lq.reserved.WithLabelValues(lm.name, lm.namespace, class),
				wait:         m.lq.waitTime.WithLabelValues(lm.name, lm.namespace, class),
				reservedWait: m.lq.reservedWait.WithLabelValues(lm.name, lm.namespace, class)}
			lm.admissions[class] = ls
		}
		ls.observe(wait)
		m.forgetLocalIfDone(lm)
	}
}

// observeEviction counts the eviction of e, from queue, for reason, that
// landed; class is its priority class. Every eviction reason is counted
// here: a new one is a new evicted* constant.
func (m *Metrics) ObserveEviction(cfg *queues.Config, wm *Workload, e *machine.Entry, queue, reason, class string) {
	m.evicted.WithLabelValues(queue, reason, "", class).Inc()
	if lm := m.localOf(cfg, wm, e); lm != nil {
		lm.evictions[[2]string{reason, class}] = true
		m.lq.evicted.WithLabelValues(lm.name, lm.namespace, reason, "", class).Inc()
		m.forgetLocalIfDone(lm)
	}
}

// observePreemption counts a preemption that landed, decided for a
// workload of queue, for reason (a queues.Preempt* value).
func (m *Metrics) ObservePreemption(queue, reason string) {
	m.preemptedWith.WithLabelValues(queue, reason).Inc()
}

// observeAttempt counts an admission pass over waiting workloads.
func (m *Metrics) ObserveAttempt(admitted bool) {
	if admitted {
		m.attempts.WithLabelValues(attemptSuccess).Inc()
	} else {
		m.attempts.WithLabelValues(attemptInadmissible).Inc()
	}
}

// observeShares sets the share gauge of every ClusterQueue in a cohort with
// fair sharing and returns the shares.
func (m *Metrics) ObserveShares(s *queues.Snapshot) map[string]int64 {
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
