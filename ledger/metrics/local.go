package metrics

import (
	"cmp"

	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// Kueue's LocalQueue metrics (tally_local_queue_*), labelled name and
// namespace. A workload's LocalQueue is the one its
// kueue.x-k8s.io/queue-name label names; one that names none counts in
// its namespace's LocalQueue "default", the one Kueue's LocalQueue
// defaulting would have named (a namespace bound by its
// tally.dev/cluster-queue annotation has that LocalQueue, to the
// annotation's ClusterQueue). A LocalQueue has series while the config
// or its namespace's annotation has it, or while the ledger counts
// something in it; they are all removed once neither holds. As the
// ClusterQueue metrics, they are kept at the cost of the change: each
// workload's entry remembers how it was counted (localCount).

// localKey names a LocalQueue.
type localKey struct{ namespace, name string }

// localVecs are the LocalQueue metrics.
type localVecs struct {
	pending      *prometheus.GaugeVec     // {name, namespace, status}
	reserving    *prometheus.GaugeVec     // {name, namespace}
	admittedNow  *prometheus.GaugeVec     // likewise
	finished     *prometheus.GaugeVec     // likewise
	status       *prometheus.GaugeVec     // {name, namespace, active}
	reservation  *prometheus.GaugeVec     // {name, namespace, flavor, resource}
	usage        *prometheus.GaugeVec     // likewise
	admitted     *prometheus.CounterVec   // {name, namespace, priority_class}
	waitTime     *prometheus.HistogramVec // likewise
	reserved     *prometheus.CounterVec   // likewise
	reservedWait *prometheus.HistogramVec // likewise
	finishedAll  *prometheus.CounterVec   // likewise
	evicted      *prometheus.CounterVec   // {name, namespace, reason, underlying_cause, priority_class}
}

func newLocalVecs(
	gauges func(name, help string, labels ...string) *prometheus.GaugeVec,
	counters func(name, help string, labels ...string) *prometheus.CounterVec,
	histograms func(name, help string, labels ...string) *prometheus.HistogramVec,
) localVecs {
	lq := []string{"name", "namespace"}
	with := func(more ...string) []string { return append(append([]string(nil), lq...), more...) }
	return localVecs{
		pending: gauges("tally_local_queue_pending_workloads",
			`Workloads waiting for quota, per LocalQueue and status ("active", "inadmissible"), as tally_pending_workloads.`, with("status")...),
		reserving: gauges("tally_local_queue_reserving_active_workloads",
			"Workloads that hold quota and have not finished, per LocalQueue: admitted ones, and admissions in flight.", lq...),
		admittedNow: gauges("tally_local_queue_admitted_active_workloads",
			"Admitted workloads that have not finished, per LocalQueue.", lq...),
		finished: gauges("tally_local_queue_finished_workloads",
			"Finished workloads that still exist, per LocalQueue.", lq...),
		status: gauges("tally_local_queue_status",
			`1 for whether each LocalQueue is active, 0 for the other values: "True" when its ClusterQueue is in the config and admits, "False" when it is not or is stopped by its stopPolicy ("Unknown" is always 0).`,
			with("active")...),
		reservation: gauges("tally_local_queue_resource_reservation",
			"Quota the workloads of each LocalQueue hold, per flavor and resource (cpu in cores, memory in bytes): admitted workloads until their pods are gone, and admissions in flight.",
			with("flavor", "resource")...),
		usage: gauges("tally_local_queue_resource_usage",
			"As tally_local_queue_resource_reservation (tally has no admission checks).", with("flavor", "resource")...),
		admitted: counters("tally_local_queue_admitted_workloads_total",
			"Workloads admitted (the admission write landed), per LocalQueue and priority class.", with("priority_class")...),
		waitTime: histograms("tally_local_queue_admission_wait_time_seconds",
			"Time from a workload's creation, or its return to its queue after an eviction, until its admission, per LocalQueue and priority class.",
			with("priority_class")...),
		reserved: counters("tally_local_queue_quota_reserved_workloads_total",
			"Workloads that got their quota, per LocalQueue and priority class: in tally, as admitted.", with("priority_class")...),
		reservedWait: histograms("tally_local_queue_quota_reserved_wait_time_seconds",
			"Time from a workload's creation, or its return to its queue after an eviction, until it got its quota, per LocalQueue and priority class: in tally, as the admission wait.",
			with("priority_class")...),
		finishedAll: counters("tally_local_queue_finished_workloads_total",
			"Admitted workloads that finished, per LocalQueue and priority class.", with("priority_class")...),
		evicted: counters("tally_local_queue_evicted_workloads_total",
			"Running workloads tally suspended, per LocalQueue, reason, underlying cause and priority class, as tally_evicted_workloads_total.",
			with("reason", "underlying_cause", "priority_class")...),
	}
}

// localMetrics is what the metrics keep of one LocalQueue.
type localMetrics struct {
	localKey
	// config is the ClusterQueue a LocalQueue of the config binds it to,
	// annotation that of its namespace's annotation (for "default"):
	// either gives it a status. Both "": it has series only while the
	// ledger counts something in it.
	config, annotation string
	pending            [2]int
	reserving          int
	admitted           int
	finished           int
	usage              queues.Usage
	// cells, classes and evictions are the label values its series have
	// been made with, to delete exactly those. cells holds its
	// reservation and usage gauges of each.
	cells     map[queues.FlavorResource][2]prometheus.Gauge
	classes   map[string]bool
	evictions map[[2]string]bool
	// admissions holds its admission series of each class.
	admissions map[string]admissionSeries
	// Its gauges of pending (by status), reserving, admitted and
	// finished workloads, looked up once: a workload's every change sets
	// some of them, and a lookup hashes the labels.
	pendingG                         [2]prometheus.Gauge
	reservingG, admittedG, finishedG prometheus.Gauge
}

// localCount is how the LocalQueue metrics count one workload.
type localCount struct {
	in                            *localMetrics
	pending                       uint8 // as pendingStatus
	reserving, admitted, finished bool
	usage                         queues.Usage // what it is charged (entry.Charged, never changed in place)
}

// localQueueOf is the LocalQueue of a workload whose labels are labels.
func localQueueOf(labels map[string]string) string {
	return cmp.Or(labels[queues.LabelKueueQueueName], queues.DefaultLocalQueue)
}

// local returns the metrics of LocalQueue k, made (its gauges at 0) if it
// has none yet.
func (m *Metrics) local(cfg *queues.Config, k localKey) *localMetrics {
	if lm := m.locals[k]; lm != nil {
		return lm
	}
	lm := &localMetrics{localKey: k, usage: queues.Usage{}, cells: map[queues.FlavorResource][2]prometheus.Gauge{},
		classes: map[string]bool{}, evictions: map[[2]string]bool{}, admissions: map[string]admissionSeries{},
		reservingG: m.lq.reserving.WithLabelValues(k.name, k.namespace),
		admittedG:  m.lq.admittedNow.WithLabelValues(k.name, k.namespace),
		finishedG:  m.lq.finished.WithLabelValues(k.name, k.namespace)}
	if cfg != nil {
		lm.config = cfg.LocalQueues[k.namespace+"/"+k.name]
	}
	m.locals[k] = lm
	for i, s := range pendingStatuses {
		lm.pendingG[i] = m.lq.pending.WithLabelValues(k.name, k.namespace, s)
		lm.pendingG[i].Set(0)
	}
	for _, g := range []prometheus.Gauge{lm.reservingG, lm.admittedG, lm.finishedG} {
		g.Set(0)
	}
	m.setLocalStatus(cfg, lm)
	return lm
}

// localOf returns the metrics of e's LocalQueue, made if need be (the
// caller calls forgetLocalIfDone after counting in it); nil when e has
// none.
func (m *Metrics) localOf(cfg *queues.Config, wm *Workload, e *machine.Entry) *localMetrics {
	if e == nil || e.W == nil || wm.localQueue == "" {
		return nil
	}
	return m.local(cfg, localKey{e.W.Namespace, wm.localQueue})
}

// setLocalStatus sets the status series of a LocalQueue that the config
// or its namespace has, and removes them from one that neither has.
func (m *Metrics) setLocalStatus(cfg *queues.Config, lm *localMetrics) {
	cq := cmp.Or(lm.config, lm.annotation)
	if cq == "" {
		for _, s := range lqStatuses {
			m.lq.status.DeleteLabelValues(lm.name, lm.namespace, s)
		}
		return
	}
	status := lqInactive
	if cfg != nil {
		if c := cfg.ClusterQueues[cq]; c != nil && c.StopPolicy != "Hold" && c.StopPolicy != "HoldAndDrain" {
			status = lqActive
		}
	}
	for _, s := range lqStatuses {
		v := 0.0
		if s == status {
			v = 1
		}
		m.lq.status.WithLabelValues(lm.name, lm.namespace, s).Set(v)
	}
}

// observeLocalConfig puts cfg's LocalQueues in force: each has series and
// a status, and those that left it lose their status, and their series
// once nothing counts in them. Every status is set again, as a
// ClusterQueue may have changed.
func (m *Metrics) observeLocalConfig(cfg *queues.Config) {
	for key, cq := range cfg.LocalQueues {
		ns, name, _ := strings.Cut(key, "/")
		m.local(cfg, localKey{ns, name}).config = cq
	}
	for k, lm := range m.locals {
		lm.config = cfg.LocalQueues[k.namespace+"/"+k.name]
		m.setLocalStatus(cfg, lm)
		m.forgetLocalIfDone(lm)
	}
}

// bindNamespace records that namespace ns is bound by its annotation to
// ClusterQueue queue ("" for none, or once it is gone): its LocalQueue
// "default" has series while it is.
func (m *Metrics) BindNamespace(cfg *queues.Config, ns, queue string) {
	k := localKey{ns, queues.DefaultLocalQueue}
	lm := m.locals[k]
	if lm == nil && queue == "" {
		return
	}
	if lm == nil {
		lm = m.local(cfg, k)
	}
	lm.annotation = queue
	m.setLocalStatus(cfg, lm)
	m.forgetLocalIfDone(lm)
}

// noteLocal keeps the LocalQueue metrics in step with e, which may have
// changed; gone says it has left the ledger (a deleted workload whose
// pods still run keeps its quota, and counts in the resource series
// only); class is its priority class.
func (m *Metrics) noteLocal(cfg *queues.Config, wm *Workload, e *machine.Entry, gone bool, class string) {
	var next localCount
	if e.W != nil && wm.localQueue != "" {
		if !gone {
			phase := e.Phase()
			next.pending = pendingStatus(e, false)
			next.reserving = e.Charged != nil && phase != machine.Finished
			next.admitted = next.reserving && (phase == machine.Admitted || phase == machine.Evicting)
			next.finished = phase == machine.Finished
		}
		if len(e.Charged) > 0 {
			next.usage = e.Charged
		}
	}
	cur := wm.local
	counts := next.pending != 0 || next.reserving || next.finished || next.usage != nil
	same := cur.in != nil && e.W != nil && cur.in.namespace == e.W.Namespace && cur.in.name == wm.localQueue
	if (same || cur.in == nil && !counts) && cur.pending == next.pending && cur.reserving == next.reserving &&
		cur.admitted == next.admitted && cur.finished == next.finished && cur.usage.Equal(next.usage) {
		return
	}
	if counts {
		next.in = m.local(cfg, localKey{e.W.Namespace, wm.localQueue})
		if next.finished && !cur.finished && cur.admitted {
			// Kueue counts a workload that finishes after its admission.
			next.in.classes[class] = true
			m.lq.finishedAll.WithLabelValues(next.in.name, next.in.namespace, class).Inc()
		}
	}
	if cur.in != nil {
		m.countLocal(cur.in, cur, -1)
	}
	if next.in != nil {
		m.countLocal(next.in, next, +1)
	}
	wm.local = next
	if cur.in != nil && cur.in != next.in {
		m.forgetLocalIfDone(cur.in)
	}
}

// countLocal adds (sign +1) or takes away (-1) what c counts in lm.
func (m *Metrics) countLocal(lm *localMetrics, c localCount, sign int) {
	if c.pending != 0 {
		i := c.pending - 1
		lm.pending[i] += sign
		lm.pendingG[i].Set(float64(lm.pending[i]))
	}
	for _, n := range []struct {
		on bool
		to *int
		g  prometheus.Gauge
	}{{c.reserving, &lm.reserving, lm.reservingG}, {c.admitted, &lm.admitted, lm.admittedG}, {c.finished, &lm.finished, lm.finishedG}} {
		if n.on {
			*n.to += sign
			n.g.Set(float64(*n.to))
		}
	}
	if c.usage == nil {
		return
	}
	if sign > 0 {
		lm.usage.Add(c.usage)
	} else {
		lm.usage.Sub(c.usage)
	}
	for fr := range c.usage {
		v := AmountValue(fr.Resource, lm.usage[fr])
		g, ok := lm.cells[fr]
		if !ok {
			g = [2]prometheus.Gauge{m.lq.reservation.WithLabelValues(lm.name, lm.namespace, fr.Flavor, string(fr.Resource)),
				m.lq.usage.WithLabelValues(lm.name, lm.namespace, fr.Flavor, string(fr.Resource))}
			lm.cells[fr] = g
		}
		g[0].Set(v)
		g[1].Set(v)
	}
}

// forgetLocalIfDone removes every series of a LocalQueue that neither the
// config nor its namespace has once the ledger counts nothing in it.
func (m *Metrics) forgetLocalIfDone(lm *localMetrics) {
	if lm.config != "" || lm.annotation != "" || lm.pending != [2]int{} || lm.reserving != 0 || lm.finished != 0 ||
		len(lm.usage) > 0 || m.locals[lm.localKey] != lm {
		return
	}
	name, ns := lm.name, lm.namespace
	for _, s := range pendingStatuses {
		m.lq.pending.DeleteLabelValues(name, ns, s)
	}
	for _, g := range []*prometheus.GaugeVec{m.lq.reserving, m.lq.admittedNow, m.lq.finished} {
		g.DeleteLabelValues(name, ns)
	}
	for fr := range lm.cells {
		m.lq.reservation.DeleteLabelValues(name, ns, fr.Flavor, string(fr.Resource))
		m.lq.usage.DeleteLabelValues(name, ns, fr.Flavor, string(fr.Resource))
	}
	for class := range lm.classes {
		m.lq.admitted.DeleteLabelValues(name, ns, class)
		m.lq.waitTime.DeleteLabelValues(name, ns, class)
		m.lq.reserved.DeleteLabelValues(name, ns, class)
		m.lq.reservedWait.DeleteLabelValues(name, ns, class)
		m.lq.finishedAll.DeleteLabelValues(name, ns, class)
	}
	for re := range lm.evictions {
		m.lq.evicted.DeleteLabelValues(name, ns, re[0], "", re[1])
	}
	delete(m.locals, lm.localKey)
}
