package queues_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// Builders for the Config a test expects.

type wantConfig struct{ c *queues.Config }

func newConfig() *wantConfig {
	return &wantConfig{&queues.Config{
		Flavors: map[string]*flavors.Flavor{}, ClusterQueues: map[string]*queues.ClusterQueue{},
		Cohorts: map[string][]string{}, LocalQueues: map[string]string{}, PriorityClasses: map[string]int32{},
	}}
}

func (w *wantConfig) Flavors(fs ...*flavors.Flavor) *wantConfig {
	for _, f := range fs {
		w.c.Flavors[f.Name] = f
	}
	return w
}

func (w *wantConfig) Queues(cqs ...*queues.ClusterQueue) *wantConfig {
	for _, cq := range cqs {
		w.c.ClusterQueues[cq.Name] = cq
		w.c.QueueNames = append(w.c.QueueNames, cq.Name)
		if cq.Cohort != "" {
			w.c.Cohorts[cq.Cohort] = append(w.c.Cohorts[cq.Cohort], cq.Name)
		}
	}
	return w
}

func (w *wantConfig) Local(key, cq string) *wantConfig { w.c.LocalQueues[key] = cq; return w }

func (w *wantConfig) Priority(name string, v int32) *wantConfig {
	w.c.PriorityClasses[name] = v
	return w
}

// Topology adds a Topology with the node labels of its levels.
func (w *wantConfig) Topology(name string, levels ...string) *wantConfig {
	if w.c.Topologies == nil {
		w.c.Topologies = map[string]*queues.Topology{}
	}
	w.c.Topologies[name] = &queues.Topology{Name: name, Levels: levels}
	return w
}

func (w *wantConfig) Warnings(ws ...string) *wantConfig { w.c.Warnings = ws; return w }
func (w *wantConfig) Obj() *queues.Config               { return w.c }

type cqBuilder struct{ cq *queues.ClusterQueue }

// wantCQ starts from Kueue's defaults for every optional field.
func wantCQ(name string) *cqBuilder {
	return &cqBuilder{&queues.ClusterQueue{
		Name: name, NamespaceSelector: labels.Everything(), Strategy: queues.BestEffortFIFO,
		Preemption: queues.PreemptionPolicy{WithinClusterQueue: "Never", ReclaimWithinCohort: "Never",
			BorrowWithinCohort: queues.BorrowWithinCohort{Policy: "Never"}},
		FlavorFungibility: queues.FlavorFungibility{WhenCanBorrow: "Borrow", WhenCanPreempt: "TryNextFlavor"},
		FairWeight:        1000, StopPolicy: "None",
	}}
}

func (b *cqBuilder) Cohort(c string) *cqBuilder { b.cq.Cohort = c; return b }
func (b *cqBuilder) Mod(f func(*queues.ClusterQueue)) *cqBuilder {
	f(b.cq)
	return b
}
func (b *cqBuilder) Obj() *queues.ClusterQueue { return b.cq }

func (b *cqBuilder) Group(covered ...corev1.ResourceName) *cqBuilder {
	b.cq.ResourceGroups = append(b.cq.ResourceGroups, queues.ResourceGroup{Covered: covered})
	return b
}

// Flavor adds a flavor to the last group; quotas are
// "resource=nominal[/borrowingLimit[/lendingLimit]]", "-" for unset.
func (b *cqBuilder) Flavor(name string, quotas ...string) *cqBuilder {
	g := &b.cq.ResourceGroups[len(b.cq.ResourceGroups)-1]
	fq := queues.FlavorQuotas{Name: name, Quotas: map[corev1.ResourceName]queues.Quota{}}
	for _, spec := range quotas {
		res, vals, _ := strings.Cut(spec, "=")
		r := corev1.ResourceName(res)
		parts := append(strings.Split(vals, "/"), "-", "-")
		fq.Quotas[r] = queues.Quota{Nominal: amount(r, parts[0]), BorrowingLimit: amount(r, parts[1]), LendingLimit: amount(r, parts[2])}
	}
	g.Flavors = append(g.Flavors, fq)
	return b
}

func amount(r corev1.ResourceName, s string) flavors.Amount {
	if s == "-" {
		return flavors.Unlimited
	}
	return flavors.FromQuantity(r, resource.MustParse(s))
}

func wantFlavor(name string, nodeLabels ...string) *flavors.Flavor {
	f := &flavors.Flavor{Name: name, NodeLabels: map[string]string{}}
	for i := 0; i+1 < len(nodeLabels); i += 2 {
		f.NodeLabels[nodeLabels[i]] = nodeLabels[i+1]
	}
	return f
}

// configCmp compares Configs: selectors by what they select, and nil and
// empty collections alike.
func configCmp() cmp.Options {
	return cmp.Options{
		cmpopts.IgnoreUnexported(queues.Config{}),
		cmp.FilterPath(func(p cmp.Path) bool {
			for _, step := range p {
				if step.Type() == selectorType {
					return false
				}
			}
			return true
		}, cmpopts.EquateEmpty()),
		cmp.Transformer("Selector", func(s labels.Selector) string {
			switch {
			case s == nil:
				return "<nil>"
			case s.Empty():
				return "<everything>"
			case s.String() == "":
				return "<nothing>"
			}
			return s.String()
		}),
	}
}

var selectorType = reflect.TypeOf((*labels.Selector)(nil)).Elem()

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in   string
		want *queues.Config
	}{
		"the four kinds in one stream, with comments and empty documents": {
			in: `# The queues of team a.
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default   # every node
---
# nothing here
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: 8
      - name: memory
        nominalQuota: 32Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: "Urgent work."
---
`,
			want: newConfig().Flavors(wantFlavor("default")).
				Queues(wantCQ("team-a").Group("cpu", "memory").Flavor("default", "cpu=8", "memory=32Gi").Obj()).
				Local("team-a/main", "team-a").Priority("high", 1000).Obj(),
		},
		"an empty config is valid and empty": {
			in:   "# nothing yet\n",
			want: newConfig().Obj(),
		},
		"omitted optional fields take Kueue's defaults, and limits are unlimited": {
			in:   queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", queuestest.OneGroup)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"tally.dev/v1 is accepted": {
			in: `apiVersion: tally.dev/v1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: tally.dev/v1
kind: ClusterQueue
metadata: {name: a}
spec:
` + queuestest.OneGroup,
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"every ClusterQueue field, v1beta1": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.Flavor("spot"), `apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: a}
spec:
  cohort: ml
  namespaceSelector:
    matchLabels: {team: a}
  queueingStrategy: StrictFIFO
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: Preempt}
  fairSharing: {weight: "2.5"}
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "2", lendingLimit: 250m}
      - {name: memory, nominalQuota: 8Gi}
    - name: spot
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 16Gi, lendingLimit: 0}
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 1.5}]
`, queuestest.Flavor("gpu")),
			want: newConfig().Flavors(wantFlavor("default"), wantFlavor("spot"), wantFlavor("gpu")).Queues(
				wantCQ("a").Cohort("ml").Mod(func(cq *queues.ClusterQueue) {
					cq.NamespaceSelector = labels.SelectorFromSet(labels.Set{"team": "a"})
					cq.Strategy = queues.StrictFIFO
					threshold := int32(100)
					cq.Preemption = queues.PreemptionPolicy{WithinClusterQueue: "LowerOrNewerEqualPriority", ReclaimWithinCohort: "Any",
						BorrowWithinCohort: queues.BorrowWithinCohort{Policy: "LowerPriority", MaxPriorityThreshold: &threshold}}
					cq.FlavorFungibility = queues.FlavorFungibility{WhenCanBorrow: "TryNextFlavor", WhenCanPreempt: "Preempt"}
					cq.FairWeight, cq.FairSharing = 2500, true
					cq.StopPolicy = "Hold"
				}).
					Group("cpu", "memory").Flavor("default", "cpu=500m/2/250m", "memory=8Gi").Flavor("spot", "cpu=4", "memory=16Gi/-/0").
					Group("nvidia.com/gpu").Flavor("gpu", "nvidia.com/gpu=2").Obj()).Obj(),
		},
		"v1beta2: cohortName, and MayStopSearch read as Borrow and Preempt": {
			in: queuestest.Stream(queuestest.Flavor("default"), `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  cohortName: ml
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}
`+queuestest.OneGroup),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Cohort("ml").Mod(func(cq *queues.ClusterQueue) {
				cq.FlavorFungibility = queues.FlavorFungibility{WhenCanBorrow: "Borrow", WhenCanPreempt: "Preempt"}
			}).Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"cohort and cohortName may both be set when they agree": {
			in:   queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", "  cohort: ml\n  cohortName: ml\n"+queuestest.OneGroup)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Cohort("ml").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"cohorts list their members sorted, and a cohort may share a queue's name": {
			in: queuestest.Stream(queuestest.Flavor("default"),
				queuestest.ClusterQueue("zeta", "  cohort: alpha\n"+queuestest.OneGroup),
				queuestest.ClusterQueue("alpha", "  cohort: alpha\n"+queuestest.OneGroup),
				queuestest.ClusterQueue("solo", queuestest.OneGroup)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(
				wantCQ("alpha").Cohort("alpha").Group("cpu").Flavor("default", "cpu=4").Obj(),
				wantCQ("solo").Group("cpu").Flavor("default", "cpu=4").Obj(),
				wantCQ("zeta").Cohort("alpha").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"coveredResources left out is the flavors' resources, in order of appearance": {
			in: queuestest.Stream(queuestest.Flavor("a"), queuestest.Flavor("b"), queuestest.ClusterQueue("q", `  resourceGroups:
  - flavors:
    - name: a
      resources: [{name: memory, nominalQuota: 1Gi}, {name: cpu, nominalQuota: 1}]
    - name: b
      resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 2Gi}]
`)),
			want: newConfig().Flavors(wantFlavor("a"), wantFlavor("b")).Queues(
				wantCQ("q").Group("memory", "cpu").Flavor("a", "memory=1Gi", "cpu=1").Flavor("b", "cpu=2", "memory=2Gi").Obj()).Obj(),
		},
		"a namespaceSelector of {} selects every namespace": {
			in:   queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", "  namespaceSelector: {}\n"+queuestest.OneGroup)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"a namespaceSelector with expressions": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", `  namespaceSelector:
    matchExpressions: [{key: team, operator: In, values: [a, b]}]
`+queuestest.OneGroup)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Mod(func(cq *queues.ClusterQueue) {
				sel, _ := labels.Parse("team in (a,b)")
				cq.NamespaceSelector = sel
			}).Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"a flavor's labels, taints and tolerations": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {node-type: gpu, "example.com/zone": a}
  nodeTaints: [{key: example.com/gpu, value: "true", effect: NoSchedule}]
  tolerations: [{key: example.com/gpu, operator: Exists, effect: NoSchedule}]
`,
			want: newConfig().Flavors(&flavors.Flavor{Name: "gpu",
				NodeLabels:  map[string]string{"node-type": "gpu", "example.com/zone": "a"},
				NodeTaints:  []corev1.Taint{{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
				Tolerations: []corev1.Toleration{{Key: "example.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			}).Obj(),
		},
		"nodeSelector is merged into nodeLabels, with a warning": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {node-type: gpu}
  nodeSelector: {node-type: gpu, zone: a}
`,
			want: newConfig().Flavors(wantFlavor("gpu", "node-type", "gpu", "zone", "a")).Warnings(
				`ResourceFlavor "gpu".spec.nodeSelector: accepted as an alias of spec.nodeLabels, Kueue's name for this field`).Obj(),
		},
		"status is ignored, unknown fields are warnings, not errors": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", "  colour: blue\n"+queuestest.OneGroup)+`status:
  pendingWorkloads: 3
`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: ns, labels: {team: a}, uid: "1234", resourceVersion: "7"}
spec: {clusterQueue: a, stopPolicy: None}
`),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).
				Local("ns/main", "a").Warnings(
				`ClusterQueue "a".spec.colour: unknown field, ignored`).Obj(),
		},
		"local queues of one name in two namespaces": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", queuestest.OneGroup), `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: x}
spec: {clusterQueue: a}
`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: "y"}
spec: {clusterQueue: a}
`),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).
				Local("x/main", "a").Local("y/main", "a").Obj(),
		},
		"priority class values span int32": {
			in: queuestest.Stream(`apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: top}
value: 2147483647
`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: bottom}
value: -2147483648
`),
			want: newConfig().Priority("top", math.MaxInt32).Priority("bottom", math.MinInt32).Obj(),
		},
		"a huge quota saturates at Unlimited": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", `  resourceGroups:
  - flavors:
    - name: default
      resources: [{name: pods, nominalQuota: 1e30}]
`)),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("pods").Mod(func(cq *queues.ClusterQueue) {
				cq.ResourceGroups[0].Flavors = []queues.FlavorQuotas{{Name: "default", Quotas: map[corev1.ResourceName]queues.Quota{
					"pods": {Nominal: flavors.Unlimited, BorrowingLimit: flavors.Unlimited, LendingLimit: flavors.Unlimited}}}}
			}).Obj()).Obj(),
		},
		"a Topology, v1beta1, and a flavor that names it": {
			in: queuestest.Stream(topology("v1beta1", "default", "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"),
				queuestest.Flavor("tas", "  nodeLabels: {cloud.provider.com/node-group: tas}\n  topologyName: default\n"), queuestest.Flavor("plain")),
			want: newConfig().Flavors(&flavors.Flavor{Name: "tas", NodeLabels: map[string]string{"cloud.provider.com/node-group": "tas"}, TopologyName: "default"},
				wantFlavor("plain")).
				Topology("default", "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname").Obj(),
		},
		"Topologies of v1beta2 and v1alpha1, kubernetes.io/hostname not required": {
			in: queuestest.Stream(topology("v1beta2", "racks", "example.com/block", "example.com/rack"),
				topology("v1alpha1", "hosts", "kubernetes.io/hostname")),
			want: newConfig().Topology("racks", "example.com/block", "example.com/rack").Topology("hosts", "kubernetes.io/hostname").Obj(),
		},
		"16 levels, the most Kueue allows": {
			in:   topology("v1beta2", "deep", strings.Split("l1 l2 l3 l4 l5 l6 l7 l8 l9 l10 l11 l12 l13 l14 l15 l16", " ")...),
			want: newConfig().Topology("deep", strings.Split("l1 l2 l3 l4 l5 l6 l7 l8 l9 l10 l11 l12 l13 l14 l15 l16", " ")...).Obj(),
		},
		"unknown fields of a Topology are warnings; status and metadata are ignored": {
			in: `apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: t, labels: {team: a}}
spec:
  levels:
  - {nodeLabel: example.com/rack, weight: 2}
  colour: blue
status: {}
`,
			want: newConfig().Topology("t", "example.com/rack").Warnings(
				`Topology "t".spec.colour: unknown field, ignored`,
				`Topology "t".spec.levels[0].weight: unknown field, ignored`).Obj(),
		},
		"a byte order mark, and separators with comments": {
			in:   "\ufeff" + strings.ReplaceAll(queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", queuestest.OneGroup)), "---\n", "--- # next\n"),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
		"a document end marker": {
			in:   queuestest.Flavor("default") + "...\n" + queuestest.ClusterQueue("a", queuestest.OneGroup),
			want: newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, warnings, errs := queues.Parse([]byte(tc.in))
			if len(errs) > 0 {
				t.Fatalf("Parse: unexpected errors:\n%s", strings.Join(queues.FormatErrors(errs), "\n"))
			}
			if diff := cmp.Diff(tc.want, got, configCmp()); diff != "" {
				t.Errorf("Config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.Warnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCRLF(t *testing.T) {
	in := strings.ReplaceAll(queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", queuestest.OneGroup)), "\n", "\r\n")
	got, _, errs := queues.Parse([]byte(in))
	if len(errs) > 0 {
		t.Fatalf("Parse: %v", queues.FormatErrors(errs))
	}
	want := newConfig().Flavors(wantFlavor("default")).Queues(wantCQ("a").Group("cpu").Flavor("default", "cpu=4").Obj()).Obj()
	if diff := cmp.Diff(want, got, configCmp()); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
}

// The GPU training example's manifests load unchanged.
func TestParseFilesGPUTraining(t *testing.T) {
	dir := filepath.Join("..", "examples", "gpu-training")
	paths := []string{filepath.Join(dir, "resource-flavor.yaml"), filepath.Join(dir, "cluster-queue.yaml"), filepath.Join(dir, "local-queue.yaml")}
	got, warnings, errs := queues.ParseFiles(paths...)
	if len(errs) > 0 {
		t.Fatalf("ParseFiles: %v", queues.FormatErrors(errs))
	}
	wantWarnings := []string{paths[0] + `: ResourceFlavor "nvidia-gpu-flavor".spec.nodeSelector: accepted as an alias of spec.nodeLabels, Kueue's name for this field`}
	want := newConfig().Flavors(&flavors.Flavor{
		Name:       "nvidia-gpu-flavor",
		NodeLabels: map[string]string{"kueue.x-k8s.io/default-flavor": "true"},
		Tolerations: []corev1.Toleration{{
			Key: "kueue.x-k8s.io/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
		}},
	}).Queues(wantCQ("cluster-queue-a").Group("nvidia.com/gpu", "cpu", "memory").
		Flavor("nvidia-gpu-flavor", "nvidia.com/gpu=10", "cpu=40", "memory=100Gi").Obj()).
		Local("team-a/team-a-queue", "cluster-queue-a").Warnings(wantWarnings...).Obj()
	if diff := cmp.Diff(want, got, configCmp()); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	// The quotas in canonical units: 40 cpus are 40000 millicores.
	q, _ := got.QuotaOf("cluster-queue-a", queues.FlavorResource{Flavor: "nvidia-gpu-flavor", Resource: corev1.ResourceCPU})
	if q.Nominal != 40000 {
		t.Errorf("cpu quota = %d millicores, want 40000", q.Nominal)
	}
	q, _ = got.QuotaOf("cluster-queue-a", queues.FlavorResource{Flavor: "nvidia-gpu-flavor", Resource: corev1.ResourceMemory})
	if q.Nominal != 100<<30 {
		t.Errorf("memory quota = %d bytes, want 100Gi", q.Nominal)
	}
	if cq, err := got.Route("team-a", "", map[string]string{queues.LabelKueueQueueName: "team-a-queue"}); cq != "cluster-queue-a" || err != nil {
		t.Errorf("Route(team-a, team-a-queue) = %q, %v; want cluster-queue-a", cq, err)
	}
}

// Kueue's topology-aware scheduling sample loads its Topology and the
// flavor that names it.
func TestParseFilesKueueTAS(t *testing.T) {
	got, warnings, errs := queues.ParseFiles(filepath.Join("testdata", "kueue", "tas", "sample-gpu-queues.yaml"))
	if len(errs) > 0 || len(warnings) > 0 {
		t.Fatalf("ParseFiles: errors %v, warnings %v", queues.FormatErrors(errs), warnings)
	}
	want := &queues.Topology{Name: "default", Levels: []string{"cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"}}
	if diff := cmp.Diff(map[string]*queues.Topology{"default": want}, got.Topologies); diff != "" {
		t.Errorf("Topologies (-want +got):\n%s", diff)
	}
	f := got.Flavors["tas-flavor"]
	if f == nil || f.TopologyName != "default" || f.NodeLabels["cloud.provider.com/node-group"] != "tas-group" {
		t.Errorf("flavor tas-flavor = %+v, want topologyName default and its nodeLabels", f)
	}
}

func TestParseFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flavorsFile := write("flavors.yaml", queuestest.Flavor("default"))
	queuesFile := write("queues.yaml", queuestest.ClusterQueue("a", queuestest.OneGroup)+"---\n"+queuestest.ClusterQueue("b", strings.ReplaceAll(queuestest.OneGroup, "default", "x")))
	missing := filepath.Join(dir, "missing.yaml")

	cases := map[string]struct {
		paths []string
		want  []string
	}{
		"one file: paths start at the document": {
			paths: []string{queuesFile},
			want: []string{
				`ClusterQueue "a".spec.resourceGroups[0].flavors[0].name: flavor "default" is not defined`,
				`ClusterQueue "b".spec.resourceGroups[0].flavors[0].name: flavor "x" is not defined`,
			},
		},
		"several files: paths start with the file": {
			paths: []string{flavorsFile, queuesFile},
			want:  []string{queuesFile + `: ClusterQueue "b".spec.resourceGroups[0].flavors[0].name: flavor "x" is not defined`},
		},
		"a file that cannot be read": {
			paths: []string{flavorsFile, missing},
			want:  []string{missing + ": open " + missing + ": no such file or directory"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.ParseFiles(tc.paths...)
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if cfg != nil {
				t.Errorf("Config = %v, want nil on errors", cfg)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []string
	}{
		"MaxDocuments documents are read": {
			in: strings.Repeat("---\n", queues.MaxDocuments-1),
		},
		"one more document is an error": {
			in:   strings.Repeat("---\n", queues.MaxDocuments),
			want: []string{"document[10000]: more than 10000 documents"},
		},
		"more than 1 MiB is an error": {
			in:   "# " + strings.Repeat("x", queues.MaxConfigBytes),
			want: []string{"config: is larger than the 1 MiB limit (1048576 bytes)"},
		},
		"a billion laughs stops at the alias limit": {
			in: `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
`,
			want: []string{"document[0]: yaml: document contains excessive aliasing"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, errs := queues.Parse([]byte(tc.in))
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
