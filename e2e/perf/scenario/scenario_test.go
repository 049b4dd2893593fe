package scenario_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

// benchDir is the repository's bench directory, from this package's
// directory, where the test runs.
func benchDir() string {
	return filepath.Join("..", "..", "..", "bench")
}

// The scenario files load, expand to the Jobs they promise, and render a
// config that tally's own parser accepts.
func TestScenarioFiles(t *testing.T) {
	cases := []struct {
		file              string
		jobs, queues      int
		workSecondsPerCPU float64
	}{
		{"baseline.yaml", 15000, 30, 66},
		{"large.yaml", 50000, 1000, 66},
		{"kueue-large-scale.yaml", 50000, 1000, 4.025},
		{"smoke.yaml", 300, 4, 5.25},
		{"tas.yaml", 15000, 30, 66},
		{"smoke-tas.yaml", 96, 4, 1.65},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			s, err := scenario.Load(filepath.Join(benchDir(), tc.file))
			if err != nil {
				t.Fatal(err)
			}
			p := s.Expand()
			if len(p.Jobs) != tc.jobs || len(p.Queues) != tc.queues {
				t.Errorf("%d jobs in %d queues, want %d in %d", len(p.Jobs), len(p.Queues), tc.jobs, tc.queues)
			}
			if got := p.WorkSeconds() / (float64(p.NominalMilli()) / 1000); got < tc.workSecondsPerCPU-1e-9 || got > tc.workSecondsPerCPU+1e-9 {
				t.Errorf("work / quota = %.3fs, want %.3fs", got, tc.workSecondsPerCPU)
			}
			for i := 1; i < len(p.Jobs); i++ {
				if p.Jobs[i].Arrival < p.Jobs[i-1].Arrival {
					t.Fatalf("jobs not sorted by arrival at %d", i)
				}
			}
			cfg, warnings, errs := queues.Parse([]byte(p.Config()))
			if len(errs) > 0 || len(warnings) > 0 {
				t.Fatalf("config rejected: %v %v\n%s", errs, warnings, p.Config())
			}
			if len(cfg.ClusterQueues) != tc.queues || len(cfg.PriorityClasses) != len(s.Classes) {
				t.Errorf("config has %d ClusterQueues and %d priority classes", len(cfg.ClusterQueues), len(cfg.PriorityClasses))
			}
			if s.Topology != nil && len(cfg.Topologies) != 1 {
				t.Errorf("config has %d Topologies, want 1:\n%s", len(cfg.Topologies), p.Config())
			}
		})
	}
}

func TestExpand(t *testing.T) {
	s, err := scenario.Parse([]byte(`
name: t
cohorts: 2
clusterQueuesPerCohort: 1
quota: {nominal: 1500m}
classes:
- {name: a, count: 2, interval: 1s, cpu: 250m, runtime: 3s, priority: 7}
- {name: b, count: 1, interval: 0s, cpu: "2", runtime: 1s}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Expand()
	var got []string
	for _, j := range p.Jobs {
		q := p.Queues[j.Queue]
		got = append(got, q.Cohort+"/"+q.Name+"/"+j.Namespace+"/"+j.Name+"@"+j.Arrival.String())
	}
	want := "cohort-0/cq-0-0/bench-0-0/a-0@0s cohort-0/cq-0-0/bench-0-0/b-0@0s cohort-1/cq-1-0/bench-1-0/a-0@0s cohort-1/cq-1-0/bench-1-0/b-0@0s " +
		"cohort-0/cq-0-0/bench-0-0/a-1@1s cohort-1/cq-1-0/bench-1-0/a-1@1s"
	if strings.Join(got, " ") != want {
		t.Errorf("jobs:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	j := p.Jobs[0]
	if j.CPUMilli != 250 || j.Runtime != 3*time.Second || j.Priority != 7 || p.Queues[0].NominalMilli != 1500 || p.Queues[0].BorrowingLimitMilli != -1 {
		t.Errorf("job %+v queue %+v", j, p.Queues[0])
	}
	if p.Queues[0].WithinClusterQueue != scenario.PolicyNever || p.Queues[0].ReclaimWithinCohort != scenario.PolicyNever {
		t.Errorf("policies default to Never, got %+v", p.Queues[0])
	}
	if !strings.Contains(p.Config(), "{name: cpu, nominalQuota: 1500m}") {
		t.Errorf("config without borrowing limit:\n%s", p.Config())
	}
}

func TestValidate(t *testing.T) {
	_, err := scenario.Parse([]byte(`
name: ""
cohorts: 0
clusterQueuesPerCohort: 0
quota: {nominal: "1", borrowingLimit: "1"}
preemption: {withinClusterQueue: Any, reclaimWithinCohort: Sometimes}
queueingStrategy: Random
kueueConfig: ../baseline
classes:
- {name: A, count: 0, interval: 1s, cpu: "0", runtime: 0s}
- {name: A, count: 1, interval: 1s, cpu: "1", runtime: 1s}
`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		"name: required",
		"clusterQueuesPerCohort: must be positive",
		"quota.borrowingLimit: must not be set without cohorts",
		`preemption.withinClusterQueue: "Any" is not Never or LowerPriority`,
		`preemption.reclaimWithinCohort: "Sometimes"`,
		`queueingStrategy: "Random"`,
		`classes[0].name: "A" is not a lowercase DNS label`,
		"classes[0].count: must be positive",
		"classes[0].cpu: must be positive",
		"classes[0].runtime: must be positive",
		`classes[1].name: "A" is repeated`,
		`kueueConfig: "../baseline" is not a lowercase DNS label`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, err := scenario.Parse([]byte("name: x\nunknownField: 1\n")); err == nil || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("unknown fields must be rejected, got %v", err)
	}
}

// A topology and the classes' placements are checked with their field
// paths.
func TestValidateTopology(t *testing.T) {
	const head = `
name: t
cohorts: 1
clusterQueuesPerCohort: 1
quota: {nominal: "4"}
`
	const topology = `
topology:
  name: dc
  levels:
  - {name: rack, count: 2, nodeLabel: rack}
  - {name: node, count: 2, nodeLabel: kubernetes.io/hostname}
  nodeCapacity: {cpu: "4", memory: 1Gi}
  flavorNodeLabel: pool
`
	cases := map[string]struct {
		yaml string
		want []string // empty: valid
	}{
		"a required placement at a level of the topology": {
			yaml: head + topology + `classes:
- {name: a, count: 1, interval: 1s, pods: 2, cpu: "1", runtime: 1s, placement: {constraint: required, level: rack}}
`,
		},
		"balanced slices of a size that divides the pods": {
			yaml: head + topology + `classes:
- {name: a, count: 1, interval: 1s, pods: 4, cpu: "1", runtime: 1s, placement: {constraint: balanced, level: rack, sliceSize: 2}}
`,
		},
		"a placement without a topology": {
			yaml: head + `classes:
- {name: a, count: 1, interval: 1s, cpu: "1", runtime: 1s, placement: {constraint: preferred, level: rack}}
`,
			want: []string{"classes[0].placement: needs the scenario's topology"},
		},
		"placements that do not parse": {
			yaml: head + topology + `classes:
- {name: a, count: 1, interval: 1s, pods: -1, cpu: "1", runtime: 1s, placement: {constraint: spread, level: zone}}
- {name: b, count: 1, interval: 1s, pods: 3, cpu: "1", runtime: 1s, placement: {constraint: balanced, level: rack, sliceSize: 2}}
- {name: c, count: 1, interval: 1s, cpu: "1", runtime: 1s, placement: {constraint: balanced, level: rack}}
- {name: d, count: 1, interval: 1s, cpu: "1", runtime: 1s, placement: {constraint: required, level: rack, sliceSize: 1}}
`,
			want: []string{
				"classes[0].pods: must not be negative",
				`classes[0].placement.constraint: "spread" is not required, preferred or balanced`,
				`classes[0].placement.level: "zone" is not the nodeLabel of one of the topology's levels`,
				"classes[1].placement.sliceSize: 2 does not divide the Job's 3 pods",
				"classes[2].placement.sliceSize: must be positive for balanced",
				"classes[3].placement.sliceSize: only for balanced",
			},
		},
		"a topology that does not parse": {
			yaml: head + `classes:
- {name: a, count: 1, interval: 1s, cpu: "1", runtime: 1s}
topology:
  name: DC
  levels:
  - {name: rack, count: 0, nodeLabel: rack}
  - {name: rack, count: 2, nodeLabel: rack}
  - {name: node, count: 20000, nodeLabel: pool}
  nodeCapacity: {cpu: "0"}
  flavorNodeLabel: pool
`,
			want: []string{
				`topology.name: "DC" is not a lowercase DNS label`,
				"topology.levels[0].count: must be positive",
				`topology.levels[1].name: "rack" is repeated`,
				`topology.levels[1].nodeLabel: "rack" is repeated`,
				`topology.levels[2].nodeLabel: "pool" is the flavorNodeLabel`,
				"topology.levels[2].count: makes more than 10000 nodes",
				"topology.nodeCapacity.cpu: must be positive",
				"topology.nodeCapacity.memory: must be positive",
			},
		},
		"a topology without levels or flavor label": {
			yaml: head + `classes:
- {name: a, count: 1, interval: 1s, cpu: "1", runtime: 1s}
topology: {name: dc, nodeCapacity: {cpu: "1", memory: 1Gi}}
`,
			want: []string{"topology.levels: want 1 to 16, got 0", "topology.flavorNodeLabel: required"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tc.yaml))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want errors")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
			}
			if n, m := len(strings.Split(err.Error(), "\n")), len(tc.want); n != m {
				t.Errorf("%d errors, want %d:\n%v", n, m, err)
			}
		})
	}
}

// A topology's nodes are named and labelled as Kueue's performance runner
// makes them, and its Jobs ask for pods × cpu.
func TestTopologyNodes(t *testing.T) {
	s, err := scenario.Load(filepath.Join(benchDir(), "tas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := s.Topology.Nodes()
	if len(nodes) != 640 || s.Topology.NodeCount() != 640 {
		t.Fatalf("%d nodes (NodeCount %d), want 640", len(nodes), s.Topology.NodeCount())
	}
	n := nodes[2*64+15]
	want := map[string]string{"tas-node-group": "tas", "cloud.provider.com/topology-block": "block-0",
		"cloud.provider.com/topology-rack": "rack-2", "kubernetes.io/hostname": "node-15"}
	if n.Name != "node-b0-r2-n15" || len(n.Labels) != len(want) {
		t.Errorf("node %+v, want node-b0-r2-n15 with %v", n, want)
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("node %s: label %s=%q, want %q", n.Name, k, n.Labels[k], v)
		}
	}
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.Name] = true
	}
	if len(names) != len(nodes) {
		t.Errorf("%d distinct node names for %d nodes", len(names), len(nodes))
	}
	p := s.Expand()
	for _, j := range p.Jobs {
		c := p.Classes[j.Class]
		if j.Pods != c.Pods || j.PodCPUMilli != c.CPU.MilliValue() || j.CPUMilli != int64(c.Pods)*c.CPU.MilliValue() {
			t.Fatalf("job %s: %d pods of %dm, %dm in all; class %+v", j.Name, j.Pods, j.PodCPUMilli, j.CPUMilli, c)
		}
	}
	cfg := p.Config()
	for _, w := range []string{"kind: Topology\nmetadata: {name: default-topology}", "  - nodeLabel: cloud.provider.com/topology-rack\n",
		`nodeLabels: {tas-node-group: "tas"}`, "topologyName: default-topology"} {
		if !strings.Contains(cfg, w) {
			t.Errorf("config lacks %q:\n%s", w, cfg[:min(len(cfg), 800)])
		}
	}
}
