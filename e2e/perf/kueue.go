package perf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/e2e/perf/scenario"
)

// The generator config of Kueue's scheduler-performance runner
// (test/performance/scheduler/runner/generator of sigs.k8s.io/kueue), as
// far as a scenario uses it. Quantities are strings there.
type (
	kueueGenerator struct {
		Topology       *kueueTopology       `json:"topology,omitempty"`
		ResourceFlavor *kueueResourceFlavor `json:"resourceFlavor,omitempty"`
		Cohorts        []kueueCohortSet     `json:"cohorts"`
	}
	kueueTopology struct {
		Name   string               `json:"name"`
		Levels []kueueTopologyLevel `json:"levels"`
	}
	kueueTopologyLevel struct {
		Name      string `json:"name"`
		Count     int    `json:"count"`
		NodeLabel string `json:"nodeLabel"`
		// Capacity is each node's, on the last level only.
		Capacity *kueueCapacity `json:"capacity,omitempty"`
	}
	kueueCapacity struct {
		CPU    string `json:"cpu"`
		Memory string `json:"memory"`
	}
	kueueResourceFlavor struct {
		Name         string `json:"name"`
		NodeLabel    string `json:"nodeLabel,omitempty"`
		TopologyName string `json:"topologyName,omitempty"`
	}
	kueueCohortSet struct {
		ClassName  string           `json:"className"`
		Count      int              `json:"count"`
		QueuesSets []kueueQueuesSet `json:"queuesSets"`
	}
	kueueQueuesSet struct {
		ClassName           string              `json:"className"`
		Count               int                 `json:"count"`
		NominalQuota        string              `json:"nominalQuota"`
		BorrowingLimit      string              `json:"borrowingLimit,omitempty"`
		ReclaimWithinCohort string              `json:"reclaimWithinCohort"`
		WithinClusterQueue  string              `json:"withinClusterQueue"`
		WorkloadsSets       []kueueWorkloadsSet `json:"workloadsSets"`
	}
	kueueWorkloadsSet struct {
		Count              int             `json:"count"`
		CreationIntervalMs int64           `json:"creationIntervalMs"`
		Workloads          []kueueWorkload `json:"workloads"`
	}
	kueueWorkload struct {
		ClassName string `json:"className"`
		RuntimeMs int64  `json:"runtimeMs"`
		Priority  int32  `json:"priority"`
		Request   string `json:"request"`
		// PodCount, TASConstraint (required, preferred or balanced),
		// TASLevel and SliceSize ask for a topology-aware placement.
		PodCount      int32  `json:"podCount,omitempty"`
		TASConstraint string `json:"tasConstraint,omitempty"`
		TASLevel      string `json:"tasLevel,omitempty"`
		SliceSize     int32  `json:"sliceSize,omitempty"`
	}
)

// KueueGenerator writes the scenario as a generator config for Kueue's
// runner: the same cohorts, ClusterQueues, quotas, policies and classes,
// and the same topology, nodes and placements (Kueue's runner makes the
// nodes itself, as tally's does: see scenario.Topology.Nodes).
// Kueue's generator always puts its ClusterQueues in cohorts and leaves
// their queueing strategy at BestEffortFIFO, so a scenario without
// cohorts, or with StrictFIFO, has no Kueue equivalent.
//
// One difference stays: Kueue's generator waits an interval before each
// Workload of a class, counted from the return of the previous create, so
// the k-th is due at (k+1)×interval at the earliest, later when creates
// are slow, where the scenario's Job is due at k×interval.
func KueueGenerator(s *scenario.Scenario) ([]byte, error) {
	var errs []error
	if s.Cohorts == 0 {
		errs = append(errs, errors.New("cohorts: Kueue's generator puts every ClusterQueue in a cohort; 0 has no equivalent"))
	}
	if s.QueueingStrategy == scenario.StrictFIFO {
		errs = append(errs, errors.New("queueingStrategy: Kueue's generator has no StrictFIFO"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	q := kueueQueuesSet{
		ClassName:           "cq",
		Count:               s.ClusterQueuesPerCohort,
		NominalQuota:        s.Quota.Nominal.String(),
		ReclaimWithinCohort: orNever(s.Preemption.ReclaimWithinCohort),
		WithinClusterQueue:  orNever(s.Preemption.WithinClusterQueue),
	}
	if s.Quota.BorrowingLimit != nil {
		q.BorrowingLimit = s.Quota.BorrowingLimit.String()
	}
	for _, c := range s.Classes {
		w := kueueWorkload{ClassName: c.Name, RuntimeMs: c.Runtime.Milliseconds(), Priority: c.Priority, Request: c.CPU.String()}
		if c.Pods > 0 || c.Placement != nil {
			w.PodCount = c.PodCount()
		}
		if pl := c.Placement; pl != nil {
			w.TASConstraint, w.TASLevel, w.SliceSize = pl.Constraint, pl.Level, pl.SliceSize
		}
		q.WorkloadsSets = append(q.WorkloadsSets, kueueWorkloadsSet{
			Count:              c.Count,
			CreationIntervalMs: c.Interval.Milliseconds(),
			Workloads:          []kueueWorkload{w},
		})
	}
	g := kueueGenerator{Cohorts: []kueueCohortSet{{ClassName: "cohort", Count: s.Cohorts, QueuesSets: []kueueQueuesSet{q}}}}
	if t := s.Topology; t != nil {
		g.Topology = &kueueTopology{Name: t.Name}
		for _, l := range t.Levels {
			g.Topology.Levels = append(g.Topology.Levels, kueueTopologyLevel{Name: l.Name, Count: l.Count, NodeLabel: l.NodeLabel})
		}
		g.Topology.Levels[len(t.Levels)-1].Capacity = &kueueCapacity{CPU: t.NodeCapacity.CPU.String(), Memory: t.NodeCapacity.Memory.String()}
		g.ResourceFlavor = &kueueResourceFlavor{Name: scenario.FlavorName, NodeLabel: t.FlavorNodeLabel, TopologyName: t.Name}
	}
	return yaml.Marshal(g)
}

func orNever(policy string) string {
	if policy == "" {
		return scenario.PolicyNever
	}
	return policy
}

// SameKueueGenerator tells whether two generator configs describe the
// same work (Kueue's own file writes quantities as numbers, comments and
// all). The ResourceFlavor's name is no part of the work: Kueue's runner
// uses it only to name the flavor.
func SameKueueGenerator(a, b []byte) (bool, error) {
	var ga, gb kueueGenerator
	if err := yaml.Unmarshal(a, &ga); err != nil {
		return false, err
	}
	if err := yaml.Unmarshal(b, &gb); err != nil {
		return false, err
	}
	for _, g := range []*kueueGenerator{&ga, &gb} {
		if g.ResourceFlavor != nil {
			g.ResourceFlavor.Name = ""
		}
	}
	return reflect.DeepEqual(ga, gb), nil
}

// KueueSummary is what Kueue's runner reports: summary.yaml (recorder
// Summary) and minimalkueue.stats.yaml (stats CmdStats).
type KueueSummary struct {
	ClusterQueueClasses map[string]struct {
		CPUUsed        int64     `json:"cpuUsed"`
		NominalQuota   int64     `json:"nominalQuota"`
		FirstEventTime time.Time `json:"firstEventTime"`
		LastEventTime  time.Time `json:"lastEventTime"`
	} `json:"clusterQueueClasses"`
	WorkloadClasses map[string]struct {
		Count                    int   `json:"count"`
		TotalEvictions           int   `json:"totalEvictions"`
		AverageTimeToAdmissionMs int64 `json:"averageTimeToAdmissionMs"`
	} `json:"workloadClasses"`
	DroppedWorkloadEvents int `json:"droppedWorkloadEvents"`
	Cmd                   struct {
		WallMs int64 `json:"wallMs"`
		UserMs int64 `json:"userMs"`
		SysMs  int64 `json:"sysMs"`
		// Maxrss is in KiB, as getrusage gives it on Linux (the bench
		// writes its own file with the process's VmHWM there).
		Maxrss int64 `json:"maxrss"`
	} `json:"-"`
}

// ReadKueue reads the summary Kueue's runner wrote in dir.
func ReadKueue(dir string) (*KueueSummary, error) {
	s := &KueueSummary{}
	for _, f := range []struct {
		name string
		into any
	}{{"summary.yaml", s}, {"minimalkueue.stats.yaml", &s.Cmd}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, f.into); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f.name), err)
		}
	}
	if len(s.ClusterQueueClasses) == 0 || len(s.WorkloadClasses) == 0 {
		return nil, fmt.Errorf("%s: no ClusterQueue or Workload classes", filepath.Join(dir, "summary.yaml"))
	}
	return s, nil
}

// Makespan is the span of the ClusterQueue events Kueue's recorder saw
// (the first ClusterQueue's creation to the last one going idle), the
// nearest to tally's wall time: first creation to last completion.
func (k *KueueSummary) Makespan() time.Duration {
	var first, last time.Time
	for _, c := range k.ClusterQueueClasses {
		if first.IsZero() || c.FirstEventTime.Before(first) {
			first = c.FirstEventTime
		}
		if c.LastEventTime.After(last) {
			last = c.LastEventTime
		}
	}
	return last.Sub(first)
}

// UsagePercent is quota held over nominal quota × Makespan, as Kueue's
// checker computes it.
func (k *KueueSummary) UsagePercent() float64 {
	var used, quota float64
	for _, c := range k.ClusterQueueClasses {
		used += float64(c.CPUUsed)
		quota += float64(c.NominalQuota)
	}
	ms := float64(k.Makespan().Milliseconds())
	if quota == 0 || ms == 0 {
		return 0
	}
	return 100 * used / (quota * ms)
}

// Evictions is the number of evictions Kueue's recorder counted.
func (k *KueueSummary) Evictions() int {
	n := 0
	for _, c := range k.WorkloadClasses {
		n += c.TotalEvictions
	}
	return n
}
