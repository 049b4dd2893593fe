package queues

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
)

// BenchmarkDecideFull is one admission pass over 100,000 pending Workloads
// spread across 1,000 ClusterQueues in 10 cohorts, with every queue full,
// so every Workload is examined and none admitted: the worst case. In
// StrictFIFO queues everything waits behind each queue's head.
func BenchmarkDecideFull(b *testing.B) {
	const queues, perQueue = 1000, 100
	for _, strict := range []bool{false, true} {
		name := "BestEffortFIFO"
		if strict {
			name = "StrictFIFO"
		}
		b.Run(name, func(b *testing.B) {
			var cqs []*ClusterQueue
			for i := range queues {
				cq := makeCQ(fmt.Sprintf("cq-%04d", i)).Cohort(fmt.Sprintf("cohort-%d", i%10)).Group(cpu, mem).
					Flavor("on-demand", "cpu=10", "memory=10Gi")
				if strict {
					cq.Strict()
				}
				cqs = append(cqs, cq.Obj())
			}
			cfg := makeConfig([]*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}, cqs...)
			var ws []*Workload
			usage := map[string]Usage{}
			for i, cq := range cqs {
				usage[cq.Name] = Usage{{"on-demand", cpu}: 10000, {"on-demand", mem}: 10 << 30}
				for j := range perQueue {
					ws = append(ws, makeWL(fmt.Sprintf("w-%d-%d", i, j), cq.Name, j).Req(cpu, "1").Req(mem, "1Gi").Obj())
				}
			}
			pending := seqs(ws...)
			ns := map[string]labels.Set{"ns": {}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				u := CloneUsages(usage)
				waits := 0
				Decide(NewSnapshot(cfg, u, ns), pending, func(*Workload, Verdict, int) { waits++ })
				if waits != queues*perQueue {
					b.Fatalf("examined %d", waits)
				}
			}
		})
	}
}

// BenchmarkDecidePreemptFails is one pass over 1,000 full ClusterQueues in
// 10 cohorts where every queue's head outranks all the Jobs its queue
// runs but needs more than its nominal quota, which it may not borrow by
// preempting: each head searches for victims, in a cohort of 100 queues,
// and finds that even all of them would not do.
func BenchmarkDecidePreemptFails(b *testing.B) {
	const queues, perQueue, running = 1000, 50, 10
	var cqs []*ClusterQueue
	for i := range queues {
		cq := makeCQ(fmt.Sprintf("cq-%04d", i)).Cohort(fmt.Sprintf("cohort-%d", i%10)).Group(cpu).Flavor("on-demand", "cpu=10").Obj()
		cqs = append(cqs, withPolicy(cq, "LowerPriority", "Any", "Never", nil))
	}
	cfg := makeConfig([]*flavors.Flavor{flavor("on-demand", "tier", "on-demand")}, cqs...)
	var ws []*Workload
	usage := map[string]Usage{}
	admitted := map[string][]*Admitted{}
	for i, cq := range cqs {
		usage[cq.Name] = Usage{{"on-demand", cpu}: 10000}
		for j := range running {
			admitted[cq.Name] = append(admitted[cq.Name], adm(fmt.Sprintf("r-%d-%d", i, j), cq.Name, "on-demand", "1", 0, j))
		}
		for j := range perQueue {
			ws = append(ws, makeWL(fmt.Sprintf("w-%d-%d", i, j), cq.Name, j).Req(cpu, "12").Prio(10).Obj())
		}
	}
	pending := seqs(ws...)
	ns := map[string]labels.Set{"ns": {}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		u := CloneUsages(usage)
		s := NewSnapshot(cfg, u, ns)
		s.Admitted = admitted
		d := Decide(s, pending, func(*Workload, Verdict, int) {})
		if len(d.Admissions)+len(d.Preemptions) != 0 {
			b.Fatalf("decided %d admissions and %d preemptions", len(d.Admissions), len(d.Preemptions))
		}
	}
}
