package queues

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// benchSelective is one pass over 100,000 pending Workloads in 1,000 full
// ClusterQueues, each listing flavors spot and on-demand, where every
// Workload's pods may only run on on-demand nodes, as mark says: each
// Workload is matched against both flavors, and waits.
func benchSelective(b *testing.B, mark func(*wlB) *wlB) {
	const queues, perQueue = 1000, 100
	var cqs []*ClusterQueue
	for i := range queues {
		cqs = append(cqs, makeCQ(fmt.Sprintf("cq-%04d", i)).Cohort(fmt.Sprintf("cohort-%d", i%10)).Group(cpu).
			Flavor("spot", "cpu=10").Flavor("on-demand", "cpu=10").Obj())
	}
	cfg := makeConfig([]*flavors.Flavor{flavor("spot", "tier", "spot"), flavor("on-demand", "tier", "on-demand")}, cqs...)
	var ws []*Workload
	usage := map[string]Usage{}
	for i, cq := range cqs {
		usage[cq.Name] = Usage{{"spot", cpu}: 10000, {"on-demand", cpu}: 10000}
		for j := range perQueue {
			ws = append(ws, mark(makeWL(fmt.Sprintf("w-%d-%d", i, j), cq.Name, j).Req(cpu, "1")).Obj())
		}
	}
	pending := seqs(ws...)
	ns := map[string]labels.Set{"ns": {}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		waits := 0
		Decide(NewSnapshot(cfg, CloneUsages(usage), ns), pending, func(_ *Workload, v Verdict, _ int) {
			if v.Code == "quota/on-demand/cpu" {
				waits++
			}
		})
		if waits != queues*perQueue {
			b.Fatalf("%d wait for on-demand", waits)
		}
	}
}

// BenchmarkDecideSelector: every Workload has a nodeSelector.
func BenchmarkDecideSelector(b *testing.B) {
	benchSelective(b, func(w *wlB) *wlB { return w.Selector("tier", "on-demand") })
}

// BenchmarkDecideAffinity: every Workload has a required node affinity.
func BenchmarkDecideAffinity(b *testing.B) {
	benchSelective(b, func(w *wlB) *wlB {
		return w.Affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "tier", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}},
			{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		}})
	})
}
