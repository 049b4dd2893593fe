package queues

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"tally.dev/tally/flavors"
)

// Builders for literal configs and workloads, so decision tables need no
// parsing and no API server.

type cqB struct{ cq *ClusterQueue }

func makeCQ(name string) *cqB {
	return &cqB{&ClusterQueue{Name: name, NamespaceSelector: labels.Everything(), Strategy: BestEffortFIFO, FairWeight: 1000}}
}

func (b *cqB) Cohort(c string) *cqB            { b.cq.Cohort = c; return b }
func (b *cqB) Strict() *cqB                    { b.cq.Strategy = StrictFIFO; return b }
func (b *cqB) Stop(p string) *cqB              { b.cq.StopPolicy = p; return b }
func (b *cqB) Selector(s labels.Selector) *cqB { b.cq.NamespaceSelector = s; return b }
func (b *cqB) WhenCanBorrow(v string) *cqB     { b.cq.FlavorFungibility.WhenCanBorrow = v; return b }
func (b *cqB) Obj() *ClusterQueue              { return b.cq }

// Fair turns on fair sharing with a weight in thousandths.
func (b *cqB) Fair(weight int64) *cqB {
	b.cq.FairSharing, b.cq.FairWeight = true, weight
	return b
}
func (b *cqB) Group(covered ...corev1.ResourceName) *cqB {
	b.cq.ResourceGroups = append(b.cq.ResourceGroups, ResourceGroup{Covered: covered})
	return b
}

// Flavor adds a flavor to the last group; quotas are "res=nominal[/borrow[/lend]]".
func (b *cqB) Flavor(name string, quotas ...string) *cqB {
	g := &b.cq.ResourceGroups[len(b.cq.ResourceGroups)-1]
	fq := FlavorQuotas{Name: name, Quotas: map[corev1.ResourceName]Quota{}}
	for _, q := range quotas {
		var res, nom, bor, lend string
		parts := strings.SplitN(q, "=", 2)
		res = parts[0]
		vals := strings.SplitN(parts[1], "/", 3)
		nom = vals[0]
		if len(vals) > 1 {
			bor = vals[1]
		}
		if len(vals) > 2 {
			lend = vals[2]
		}
		r := corev1.ResourceName(res)
		qt := Quota{Nominal: amt(r, nom), BorrowingLimit: flavors.Unlimited, LendingLimit: flavors.Unlimited}
		if bor != "" && bor != "-" {
			qt.BorrowingLimit = amt(r, bor)
		}
		if lend != "" {
			qt.LendingLimit = amt(r, lend)
		}
		fq.Quotas[r] = qt
	}
	g.Flavors = append(g.Flavors, fq)
	return b
}

func amt(r corev1.ResourceName, s string) flavors.Amount {
	return flavors.FromQuantity(r, resource.MustParse(s))
}

func makeConfig(fls []*flavors.Flavor, cqs ...*ClusterQueue) *Config {
	c := &Config{Flavors: map[string]*flavors.Flavor{}, ClusterQueues: map[string]*ClusterQueue{}, Cohorts: map[string][]string{},
		LocalQueues: map[string]string{}, PriorityClasses: map[string]int32{}}
	for _, f := range fls {
		c.Flavors[f.Name] = f
	}
	for _, cq := range cqs {
		c.ClusterQueues[cq.Name] = cq
		c.QueueNames = append(c.QueueNames, cq.Name)
		if cq.Cohort != "" {
			c.Cohorts[cq.Cohort] = append(c.Cohorts[cq.Cohort], cq.Name)
		}
	}
	sort.Strings(c.QueueNames)
	for k := range c.Cohorts {
		sort.Strings(c.Cohorts[k])
	}
	return c
}

func flavor(name string, kv ...string) *flavors.Flavor {
	f := &flavors.Flavor{Name: name, NodeLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.NodeLabels[kv[i]] = kv[i+1]
	}
	return f
}

type wlB struct{ w *Workload }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// makeWL makes a one-pod workload named name in queue q, created at second t.
func makeWL(name, q string, t int) *wlB {
	return &wlB{&Workload{Namespace: "ns", Name: name, UID: types.UID(name), Queue: q, Created: epoch.Add(time.Duration(t) * time.Second),
		PodSets: []PodSet{{Name: MainPodSet, Count: 1, Requests: flavors.Resources{}}}}}
}

func (b *wlB) Req(r corev1.ResourceName, q string) *wlB {
	b.w.PodSets[0].Requests[r] = amt(r, q)
	return b
}
func (b *wlB) Count(n int64) *wlB { b.w.PodSets[0].Count = n; return b }
func (b *wlB) Prio(p int32) *wlB  { b.w.Priority = p; return b }

// Evicted says it was evicted at second t because its pods were not
// ready in time; ByCreation orders it by its creation all the same.
func (b *wlB) Evicted(t int) *wlB        { b.w.Evicted = epoch.Add(time.Duration(t) * time.Second); return b }
func (b *wlB) ByCreation() *wlB          { b.w.ByCreation = true; return b }
func (b *wlB) NS(ns string) *wlB         { b.w.Namespace = ns; return b }
func (b *wlB) Selector(k, v string) *wlB { b.w.NodeSelector = map[string]string{k: v}; return b }
func (b *wlB) Tolerate(t corev1.Toleration) *wlB {
	b.w.Tolerations = append(b.w.Tolerations, t)
	return b
}
func (b *wlB) Obj() *Workload { return b.w.Seal() }

// seqs sorts workloads into per-queue pending lists.
func seqs(ws ...*Workload) map[string][]*Workload {
	out := map[string][]*Workload{}
	for _, w := range ws {
		out[w.Queue] = append(out[w.Queue], w)
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return Before(list[i], list[j]) })
	}
	return out
}

// usageOf builds a usage map: "cq:flavor:res=amount".
func usageOf(cells ...string) map[string]Usage {
	out := map[string]Usage{}
	for _, c := range cells {
		kv := strings.SplitN(c, "=", 2)
		parts := strings.SplitN(kv[0], ":", 3)
		r := corev1.ResourceName(parts[2])
		if out[parts[0]] == nil {
			out[parts[0]] = Usage{}
		}
		out[parts[0]][FlavorResource{parts[1], r}] = amt(r, kv[1])
	}
	return out
}

// victimNames lists the victims of d's preemptions, in order; nil if none.
func victimNames(d Decision) []string {
	var out []string
	for _, p := range d.Preemptions {
		for _, v := range p.Victims {
			out = append(out, v.W.Name)
		}
	}
	return out
}

func admittedNames(adms []Admission) []string {
	out := []string{}
	for _, a := range adms {
		out = append(out, fmt.Sprintf("%s@%s", a.Workload.Name, strings.Join(a.Assignment.Flavors, "+")))
	}
	return out
}

// snapshotOf is a Snapshot of cfg in which admitted hold their quota and
// may be preempted; namespace ns is bound, with no labels. The candidates
// come through AdmittedIn, as the ledger gives them (the tests that set
// Admitted itself cover the other way).
func snapshotOf(cfg *Config, admitted []*Admitted) *Snapshot {
	usage := map[string]Usage{}
	byQueue := map[string][]*Admitted{}
	for _, a := range admitted {
		if usage[a.W.Queue] == nil {
			usage[a.W.Queue] = Usage{}
		}
		usage[a.W.Queue].Add(a.Usage)
		byQueue[a.W.Queue] = append(byQueue[a.W.Queue], a)
	}
	snap := NewSnapshot(cfg, usage, map[string]labels.Set{"ns": {}})
	snap.AdmittedIn = func(q string) []*Admitted { return byQueue[q] }
	return snap
}
