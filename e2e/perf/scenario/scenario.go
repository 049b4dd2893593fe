package scenario

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Scenario is a benchmark as written in a bench/*.yaml file: Cohorts
// cohorts of ClusterQueuesPerCohort ClusterQueues each, all with the same
// cpu quota and preemption policies, and classes of Jobs that every
// ClusterQueue receives.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Cohorts is the number of cohorts. Zero puts every ClusterQueue on
	// its own, without a cohort (then ClusterQueuesPerCohort is the number
	// of ClusterQueues and no borrowing limit may be set).
	Cohorts                int        `json:"cohorts"`
	ClusterQueuesPerCohort int        `json:"clusterQueuesPerCohort"`
	Quota                  Quota      `json:"quota"`
	Preemption             Preemption `json:"preemption,omitempty"`
	// QueueingStrategy is BestEffortFIFO (the default) or StrictFIFO.
	QueueingStrategy string  `json:"queueingStrategy,omitempty"`
	Classes          []Class `json:"classes"`
	// Topology, when set, gives the scenario's one ResourceFlavor a
	// topology and its nodes, and lets classes ask for a placement.
	Topology *Topology `json:"topology,omitempty"`
	// Timeout bounds a measured run, and in a comparison with Kueue,
	// Kueue's runner's recording too; zero lets the runner pick one from
	// the ideal makespan.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// KueueConfig names the Kueue scheduler-performance scenario this one
	// is, its folder in test/performance/scheduler/configs of
	// sigs.k8s.io/kueue (baseline, tas, large-scale). A comparison with
	// Kueue checks the scenario against that folder's generator.yaml and
	// judges Kueue's runs by its rangespec.yaml. Empty: none.
	KueueConfig string `json:"kueueConfig,omitempty"`
}

// Quota is every ClusterQueue's cpu quota.
type Quota struct {
	Nominal resource.Quantity `json:"nominal"`
	// BorrowingLimit caps what a ClusterQueue may borrow from its cohort;
	// absent means no cap.
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`
}

// Preemption holds Kueue's ClusterQueue preemption policies. Empty means
// Never.
type Preemption struct {
	// WithinClusterQueue: Never or LowerPriority.
	WithinClusterQueue string `json:"withinClusterQueue,omitempty"`
	// ReclaimWithinCohort: Never, LowerPriority or Any.
	ReclaimWithinCohort string `json:"reclaimWithinCohort,omitempty"`
}

// The preemption policy values.
const (
	PolicyNever         = "Never"
	PolicyLowerPriority = "LowerPriority"
	PolicyAny           = "Any"
)

// The queueing strategies.
const (
	BestEffortFIFO = "BestEffortFIFO"
	StrictFIFO     = "StrictFIFO"
)

// Class is a kind of Job. Each ClusterQueue receives Count of them, the
// k-th (from 0) at k×Interval after the start.
type Class struct {
	Name     string          `json:"name"`
	Count    int             `json:"count"`
	Interval metav1.Duration `json:"interval"`
	// CPU is each pod's request; a Job asks for Pods × CPU.
	CPU      resource.Quantity `json:"cpu"`
	Runtime  metav1.Duration   `json:"runtime"`
	Priority int32             `json:"priority"`
	// Pods is each Job's parallelism and completions; 0 means 1.
	Pods int32 `json:"pods,omitempty"`
	// Placement asks for a topology-aware placement of the Job's pods
	// (the scenario needs a Topology).
	Placement *Placement `json:"placement,omitempty"`
}

// PodCount is the number of pods of each of the class's Jobs.
func (c Class) PodCount() int32 { return max(c.Pods, 1) }

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes and validates a scenario.
func Parse(b []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(b, s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate reports every problem of the scenario at once.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Name == "" {
		bad("name: required")
	}
	if s.Cohorts < 0 {
		bad("cohorts: must not be negative")
	}
	if s.ClusterQueuesPerCohort <= 0 {
		bad("clusterQueuesPerCohort: must be positive")
	}
	if s.Quota.Nominal.Sign() < 0 {
		bad("quota.nominal: must not be negative")
	}
	if l := s.Quota.BorrowingLimit; l != nil {
		if l.Sign() < 0 {
			bad("quota.borrowingLimit: must not be negative")
		}
		if s.Cohorts == 0 {
			bad("quota.borrowingLimit: must not be set without cohorts")
		}
	}
	switch s.Preemption.WithinClusterQueue {
	case "", PolicyNever, PolicyLowerPriority:
	default:
		bad("preemption.withinClusterQueue: %q is not Never or LowerPriority", s.Preemption.WithinClusterQueue)
	}
	switch s.Preemption.ReclaimWithinCohort {
	case "", PolicyNever, PolicyLowerPriority, PolicyAny:
	default:
		bad("preemption.reclaimWithinCohort: %q is not Never, LowerPriority or Any", s.Preemption.ReclaimWithinCohort)
	}
	switch s.QueueingStrategy {
	case "", BestEffortFIFO, StrictFIFO:
	default:
		bad("queueingStrategy: %q is not BestEffortFIFO or StrictFIFO", s.QueueingStrategy)
	}
	if len(s.Classes) == 0 {
		bad("classes: at least one is required")
	}
	seen := map[string]bool{}
	for i, c := range s.Classes {
		p := fmt.Sprintf("classes[%d]", i)
		switch {
		case c.Name == "":
			bad("%s.name: required", p)
		case seen[c.Name]:
			bad("%s.name: %q is repeated", p, c.Name)
		case !isDNSLabel(c.Name):
			bad("%s.name: %q is not a lowercase DNS label", p, c.Name)
		}
		seen[c.Name] = true
		if c.Count <= 0 {
			bad("%s.count: must be positive", p)
		}
		if c.Interval.Duration < 0 {
			bad("%s.interval: must not be negative", p)
		}
		if c.CPU.Sign() <= 0 {
			bad("%s.cpu: must be positive", p)
		}
		if c.Runtime.Duration <= 0 {
			bad("%s.runtime: must be positive", p)
		}
		if c.Pods < 0 {
			bad("%s.pods: must not be negative", p)
		}
		errs = append(errs, c.Placement.validate(p+".placement", c.PodCount(), s.Topology)...)
	}
	errs = append(errs, s.Topology.validate("topology")...)
	if s.KueueConfig != "" && !isDNSLabel(s.KueueConfig) {
		bad("kueueConfig: %q is not a lowercase DNS label", s.KueueConfig)
	}
	return errors.Join(errs...)
}

func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 40 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

// ClusterQueue is one ClusterQueue of an expanded scenario, with the one
// namespace bound to it.
type ClusterQueue struct {
	Name      string
	Cohort    string // empty: none
	Namespace string
	// NominalMilli is the cpu nominal quota in millicores.
	NominalMilli int64
	// BorrowingLimitMilli caps borrowing; negative means no cap.
	BorrowingLimitMilli int64
	WithinClusterQueue  string
	ReclaimWithinCohort string
	StrictFIFO          bool
}

// Job is one Job of an expanded scenario.
type Job struct {
	Name      string
	Namespace string
	// Queue indexes Plan.Queues.
	Queue int
	// Class indexes Plan.Classes.
	Class int
	// CPUMilli is the whole Job's request: Pods × PodCPUMilli.
	CPUMilli int64
	// Pods is the Job's parallelism (0 is read as 1), PodCPUMilli each
	// pod's request.
	Pods        int32
	PodCPUMilli int64
	Runtime     time.Duration
	Priority    int32
	// Arrival is the nominal creation time, from the start of the run.
	Arrival time.Duration
}

// Plan is a scenario expanded into its ClusterQueues and Jobs. Jobs are
// sorted by nominal arrival (ties by ClusterQueue, then class).
type Plan struct {
	Name    string
	Queues  []ClusterQueue
	Classes []Class
	Jobs    []Job
	// Topology is the scenario's, or nil.
	Topology *Topology
}

// Expand lists the scenario's ClusterQueues and Jobs.
func (s *Scenario) Expand() *Plan {
	p := &Plan{Name: s.Name, Classes: s.Classes, Topology: s.Topology}
	borrow := int64(-1)
	if s.Quota.BorrowingLimit != nil {
		borrow = s.Quota.BorrowingLimit.MilliValue()
	}
	groups := max(s.Cohorts, 1)
	for c := range groups {
		for q := range s.ClusterQueuesPerCohort {
			cq := ClusterQueue{
				Name:                fmt.Sprintf("cq-%d-%d", c, q),
				Namespace:           fmt.Sprintf("bench-%d-%d", c, q),
				NominalMilli:        s.Quota.Nominal.MilliValue(),
				BorrowingLimitMilli: borrow,
				WithinClusterQueue:  orNever(s.Preemption.WithinClusterQueue),
				ReclaimWithinCohort: orNever(s.Preemption.ReclaimWithinCohort),
				StrictFIFO:          s.QueueingStrategy == StrictFIFO,
			}
			if s.Cohorts > 0 {
				cq.Cohort = fmt.Sprintf("cohort-%d", c)
			}
			p.Queues = append(p.Queues, cq)
		}
	}
	for k := 0; ; k++ {
		more := false
		for qi := range p.Queues {
			for ci, c := range s.Classes {
				if k >= c.Count {
					continue
				}
				more = true
				p.Jobs = append(p.Jobs, Job{
					Name:        fmt.Sprintf("%s-%d", c.Name, k),
					Namespace:   p.Queues[qi].Namespace,
					Queue:       qi,
					Class:       ci,
					CPUMilli:    int64(c.PodCount()) * c.CPU.MilliValue(),
					Pods:        c.PodCount(),
					PodCPUMilli: c.CPU.MilliValue(),
					Runtime:     c.Runtime.Duration,
					Priority:    c.Priority,
					Arrival:     time.Duration(k) * c.Interval.Duration,
				})
			}
		}
		if !more {
			break
		}
	}
	sortJobs(p.Jobs)
	return p
}

func orNever(p string) string {
	if p == "" {
		return PolicyNever
	}
	return p
}

// Arrivals returns the nominal arrival of every Job.
func (p *Plan) Arrivals() []time.Duration {
	out := make([]time.Duration, len(p.Jobs))
	for i, j := range p.Jobs {
		out[i] = j.Arrival
	}
	return out
}

// WithoutPreemption is a copy of the plan whose ClusterQueues never
// preempt.
func (p *Plan) WithoutPreemption() *Plan {
	c := *p
	c.Queues = slices.Clone(p.Queues)
	for i := range c.Queues {
		c.Queues[i].WithinClusterQueue, c.Queues[i].ReclaimWithinCohort = PolicyNever, PolicyNever
	}
	return &c
}

// NominalMilli is the sum of the ClusterQueues' nominal quotas.
func (p *Plan) NominalMilli() int64 {
	var n int64
	for _, q := range p.Queues {
		n += q.NominalMilli
	}
	return n
}

// WorkSeconds is the cpu-seconds the Jobs need (runtime × cpu, summed).
func (p *Plan) WorkSeconds() float64 {
	var w float64
	for _, j := range p.Jobs {
		w += float64(j.CPUMilli) / 1000 * j.Runtime.Seconds()
	}
	return w
}

// PriorityClassName is the WorkloadPriorityClass of a class's Jobs.
func PriorityClassName(class string) string { return "bench-" + class }

// Config renders the tally config documents (Kueue's format) that set the
// plan up: one ResourceFlavor (with the Topology it names, if any), a
// WorkloadPriorityClass per class and the ClusterQueues, each admitting
// every namespace.
func (p *Plan) Config() string {
	var b strings.Builder
	if t := p.Topology; t != nil {
		b.WriteString(t.config())
	} else {
		b.WriteString(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: ` + FlavorName + `}
spec:
  nodeLabels: {tally.dev/bench: "true"}
`)
	}
	for _, c := range p.Classes {
		fmt.Fprintf(&b, `---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: %s}
value: %d
`, PriorityClassName(c.Name), c.Priority)
	}
	for _, q := range p.Queues {
		fmt.Fprintf(&b, "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: %s}\nspec:\n", q.Name)
		if q.Cohort != "" {
			fmt.Fprintf(&b, "  cohort: %s\n", q.Cohort)
		}
		b.WriteString("  namespaceSelector: {}\n")
		if q.StrictFIFO {
			b.WriteString("  queueingStrategy: StrictFIFO\n")
		}
		fmt.Fprintf(&b, "  preemption: {withinClusterQueue: %s, reclaimWithinCohort: %s}\n", q.WithinClusterQueue, q.ReclaimWithinCohort)
		quota := fmt.Sprintf("{name: cpu, nominalQuota: %s", milli(q.NominalMilli))
		if q.BorrowingLimitMilli >= 0 {
			quota += ", borrowingLimit: " + milli(q.BorrowingLimitMilli)
		}
		fmt.Fprintf(&b, "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: %s\n      resources: [%s}]\n", FlavorName, quota)
	}
	return b.String()
}

// FlavorName is the one ResourceFlavor of every scenario.
const FlavorName = "bench"

func milli(m int64) string {
	return resource.NewMilliQuantity(m, resource.DecimalSI).String()
}
