package queues_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// subdomainRule is apimachinery's description of a DNS-1123 subdomain.
const subdomainRule = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', ` +
	`and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is ` +
	`'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`

// group renders a resourceGroups entry; flavors are "name: [resources]"
// lines in flow style.
func group(covered string, flavors ...string) string {
	var b strings.Builder
	b.WriteString("  - ")
	if covered != "" {
		b.WriteString("coveredResources: " + covered + "\n    ")
	}
	b.WriteString("flavors:\n")
	for _, f := range flavors {
		name, resources, _ := strings.Cut(f, ": ")
		b.WriteString("    - name: " + name + "\n      resources: " + resources + "\n")
	}
	return b.String()
}

func groups(gs ...string) string { return "  resourceGroups:\n" + strings.Join(gs, "") }

// cpu4 is the resources of a flavor with 4 cpu.
const cpu4 = "[{name: cpu, nominalQuota: 4}]"

// topology renders a Topology document of apiVersion version whose levels
// have the node labels, coarsest first.
func topology(version, name string, nodeLabels ...string) string {
	levels := make([]string, len(nodeLabels))
	for i, l := range nodeLabels {
		levels[i] = "{nodeLabel: '" + l + "'}"
	}
	return "apiVersion: kueue.x-k8s.io/" + version + "\nkind: Topology\nmetadata: {name: " + name + "}\nspec: {levels: [" + strings.Join(levels, ", ") + "]}\n"
}

// labelKeyRule is apimachinery's description of a label key's name part.
const labelKeyRule = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric ` +
	`character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`

func TestValidate(t *testing.T) {
	base := queuestest.Stream(queuestest.Flavor("default"), queuestest.Flavor("spot"))
	cases := map[string]struct {
		in   string
		want []string
	}{
		// References between documents.
		"a ClusterQueue names a flavor that is not defined": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: "+cpu4, "x: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[1].name: flavor "x" is not defined`},
		},
		"a LocalQueue names a ClusterQueue that is not defined": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: nope}
`,
			want: []string{`LocalQueue "team-a/main".spec.clusterQueue: ClusterQueue "nope" is not defined`},
		},
		"a broken flavor document still defines its name": {
			in: queuestest.Stream(`apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
spec: {nodeLabels: [a]}
`, queuestest.ClusterQueue("a", queuestest.OneGroup)),
			want: []string{`ResourceFlavor "default".spec.nodeLabels: must be an object, not a list`},
		},

		// Names.
		"a document without a name": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {}\n",
			want: []string{`document[0].metadata.name: is required`},
		},
		"a name that is not a DNS-1123 subdomain": {
			in:   queuestest.Flavor("Team_A"),
			want: []string{`ResourceFlavor "Team_A".metadata.name: "Team_A" is not a valid name: ` + subdomainRule},
		},
		"two ClusterQueues of one name": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", queuestest.OneGroup), queuestest.ClusterQueue("a", queuestest.OneGroup)),
			want: []string{
				`ClusterQueue "a".metadata.name: ClusterQueue "a" is defined twice: in document[2] and document[3]`,
			},
		},
		"two flavors of one name": {
			in:   queuestest.Stream(base, queuestest.Flavor("default")),
			want: []string{`ResourceFlavor "default".metadata.name: ResourceFlavor "default" is defined twice: in document[0] and document[2]`},
		},
		"a flavor and a ClusterQueue may share a name": {
			in: queuestest.Stream(queuestest.Flavor("a"), queuestest.ClusterQueue("a", groups(group("[cpu]", "a: "+cpu4)))),
		},
		"two LocalQueues of one name in one namespace": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", queuestest.OneGroup), `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: ns}
spec: {clusterQueue: a}
`, `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: ns}
spec: {clusterQueue: a}
`),
			want: []string{`LocalQueue "ns/main".metadata.name: LocalQueue "ns/main" is defined twice: in document[3] and document[4]`},
		},
		"a LocalQueue without a namespace or a ClusterQueue": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main}
spec: {}
`,
			want: []string{
				`LocalQueue "main".metadata.namespace: is required`,
				`LocalQueue "main".spec.clusterQueue: is required`,
			},
		},

		// Resource groups.
		"a flavor listed twice in one group": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: "+cpu4, "default: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[1].name: flavor "default" is already listed in resourceGroups[0].flavors[0]`},
		},
		"a flavor listed in two groups": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(
				group("[cpu]", "default: "+cpu4),
				group("[memory]", "default: [{name: memory, nominalQuota: 1Gi}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[1].flavors[0].name: flavor "default" is already listed in resourceGroups[0].flavors[0]`},
		},
		"a resource covered by two groups": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(
				group("[cpu]", "default: "+cpu4),
				group("[cpu]", "spot: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[1].coveredResources[0]: resource "cpu" is already covered by resourceGroups[0]`},
		},
		"a resource two groups cover without coveredResources": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(
				group("", "default: "+cpu4),
				group("", "spot: [{name: memory, nominalQuota: 1Gi}, {name: cpu, nominalQuota: 1}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[1].flavors[0].resources[1].name: resource "cpu" is already covered by resourceGroups[0]`},
		},
		"a flavor missing a covered resource": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu, memory]", "default: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources: missing resource "memory": ` +
				`each flavor of a resource group must list all its resources (cpu, memory)`},
		},
		"a flavor missing a resource its sibling lists, without coveredResources": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("",
				"default: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 1Gi}]",
				"spot: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[1].resources: missing resource "memory": ` +
				`each flavor of a resource group must list all its resources (cpu, memory)`},
		},
		"a flavor missing several covered resources": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu, memory, pods]", "default: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources: missing resources "memory", "pods": ` +
				`each flavor of a resource group must list all its resources (cpu, memory, pods)`},
		},
		"more resource groups than Kueue allows": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(strings.Repeat(group("[cpu]", "default: "+cpu4), 17)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups: has 17 groups, more than 16`},
		},
		"more flavors in a group than Kueue allows": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", strings.Split(strings.Repeat("default: "+cpu4+"\n", 65), "\n")[:65]...)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors: has 65 flavors, more than 64`},
		},
		"more resources in a flavor than Kueue allows": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("", "default: ["+strings.Repeat("{name: cpu, nominalQuota: 1},", 65)+"]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources: has 65 resources, more than 64`},
		},
		"a flavor with a resource the group does not cover": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4}, {name: pods, nominalQuota: 10}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[1].name: resource "pods" is not in coveredResources (cpu)`},
		},
		"a resource listed twice in a flavor": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4}, {name: cpu, nominalQuota: 2}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[1].name: resource "cpu" is listed twice`},
		},
		"a resource listed twice in coveredResources": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu, cpu]", "default: "+cpu4)))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].coveredResources[1]: resource "cpu" is listed twice`},
		},
		"a resource name that is not a qualified name": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("", "default: [{name: 'nvidia.com/gpu/x', nominalQuota: 4}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].name: "nvidia.com/gpu/x" is not a valid resource name: ` +
				`it must be a qualified name such as cpu, memory or example.com/gpu`},
		},
		"a group without flavors": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: []\n")),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors: must list at least one flavor`},
		},
		"a group whose flavors list no resource": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("", "default: []")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].coveredResources: must list at least one resource`},
		},

		// Quotas.
		"a negative nominal quota": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: -1}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must not be negative, got -1`},
		},
		"a missing nominal quota": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: is required`},
		},
		"a nominal quota that is not a quantity": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: four}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: ` +
				`"four" is not a valid quantity such as 10, 500m or 100Gi`},
		},
		"quantities with absurd exponents are out of range": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  cohort: ml\n  fairSharing: {weight: 1e40}\n"+
				groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 1e999999999, lendingLimit: 1e31}]")))),
			want: []string{
				`ClusterQueue "a".spec.fairSharing.weight: "1e+40" is out of range: at most 64 characters, with a decimal exponent within ±30`,
				`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "1e999999999" is out of range: at most 64 characters, with a decimal exponent within ±30`,
				`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: "1e+31" is out of range: at most 64 characters, with a decimal exponent within ±30`,
			},
		},
		"a borrowingLimit without a cohort": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4, borrowingLimit: 2}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: ` +
				`must not be set when the ClusterQueue has no cohort`},
		},
		"a lendingLimit without a cohort": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4, lendingLimit: 2}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: ` +
				`must not be set when the ClusterQueue has no cohort`},
		},
		"a lendingLimit above the nominal quota": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  cohort: ml\n"+groups(group("[memory]", "default: [{name: memory, nominalQuota: 4Gi, lendingLimit: 5Gi}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: ` +
				`must not be more than nominalQuota (4Gi)`},
		},
		"a negative borrowingLimit": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  cohort: ml\n"+groups(group("[cpu]", "default: [{name: cpu, nominalQuota: 4, borrowingLimit: -2}]")))),
			want: []string{`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: ` +
				`must not be negative, got -2`},
		},

		// Enums and policies.
		"an unknown queueingStrategy": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  queueingStrategy: FIFO\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.queueingStrategy: unsupported value "FIFO": must be one of BestEffortFIFO, StrictFIFO`},
		},
		"an unknown withinClusterQueue": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  preemption: {withinClusterQueue: Any}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.preemption.withinClusterQueue: unsupported value "Any": ` +
				`must be one of Never, LowerPriority, LowerOrNewerEqualPriority`},
		},
		"an unknown reclaimWithinCohort": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  preemption: {reclaimWithinCohort: Always}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.preemption.reclaimWithinCohort: unsupported value "Always": ` +
				`must be one of Never, LowerPriority, Any`},
		},
		"an unknown borrowWithinCohort policy": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: Any}}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.preemption.borrowWithinCohort.policy: unsupported value "Any": ` +
				`must be one of Never, LowerPriority`},
		},
		"borrowWithinCohort without reclaimWithinCohort": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.preemption.borrowWithinCohort.policy: must be Never when reclaimWithinCohort is Never`},
		},
		"a maxPriorityThreshold outside int32": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 3000000000}}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.preemption.borrowWithinCohort.maxPriorityThreshold: ` +
				`must be an integer from -2147483648 to 2147483647, got 3000000000`},
		},
		"unknown flavorFungibility values": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  flavorFungibility: {whenCanBorrow: Preempt, whenCanPreempt: Borrow}\n"+queuestest.OneGroup)),
			want: []string{
				`ClusterQueue "a".spec.flavorFungibility.whenCanBorrow: unsupported value "Preempt": must be one of Borrow, TryNextFlavor, MayStopSearch`,
				`ClusterQueue "a".spec.flavorFungibility.whenCanPreempt: unsupported value "Borrow": must be one of TryNextFlavor, Preempt, MayStopSearch`,
			},
		},
		"an unknown stopPolicy": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  stopPolicy: Drain\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.stopPolicy: unsupported value "Drain": must be one of None, Hold, HoldAndDrain`},
		},
		"a negative fair sharing weight": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  fairSharing: {weight: -1}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.fairSharing.weight: must not be negative, got -1`},
		},
		"a fair sharing weight too large": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  fairSharing: {weight: 2M}\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.fairSharing.weight: must not be more than 1000000`},
		},
		"an invalid namespaceSelector": {
			in: queuestest.Stream(base, queuestest.ClusterQueue("a", "  namespaceSelector:\n    matchExpressions: [{key: team, operator: Near}]\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.namespaceSelector.matchExpressions[0].operator: ` +
				`Invalid value: "Near": not a valid selector operator`},
		},

		// Cohorts.
		"cohort and cohortName that differ": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  cohort: ml\n  cohortName: hpc\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.cohortName: "hpc" differs from spec.cohort "ml": set one of them`},
		},
		"a cohort name that is not a DNS-1123 subdomain": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  cohortName: ML\n"+queuestest.OneGroup)),
			want: []string{`ClusterQueue "a".spec.cohortName: "ML" is not a valid cohort name: ` + subdomainRule},
		},

		// Topologies.
		"a Topology without levels": {
			in:   topology("v1beta1", "t"),
			want: []string{`Topology "t".spec.levels: must list at least one level`},
		},
		"a Topology without spec": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\n",
			want: []string{`Topology "t".spec.levels: must list at least one level`},
		},
		"more levels than Kueue allows": {
			in:   topology("v1beta2", "t", strings.Split("l1 l2 l3 l4 l5 l6 l7 l8 l9 l10 l11 l12 l13 l14 l15 l16 l17", " ")...),
			want: []string{`Topology "t".spec.levels: has 17 levels, more than 16`},
		},
		"a node label that is not a label key, and one left empty": {
			in: topology("v1beta2", "t", "rack!", "", "kubernetes.io/hostname"),
			want: []string{
				`Topology "t".spec.levels[0].nodeLabel: "rack!" is not a valid label key: ` + labelKeyRule,
				`Topology "t".spec.levels[1].nodeLabel: is required`,
			},
		},
		"a node label listed twice": {
			in:   topology("v1beta2", "t", "example.com/block", "example.com/rack", "example.com/block"),
			want: []string{`Topology "t".spec.levels[2].nodeLabel: node label "example.com/block" is already listed in levels[0]`},
		},
		"kubernetes.io/hostname above the lowest level": {
			in:   topology("v1beta1", "t", "example.com/block", "kubernetes.io/hostname", "example.com/rack"),
			want: []string{`Topology "t".spec.levels[1].nodeLabel: "kubernetes.io/hostname" may only be the lowest (last) level`},
		},
		"levels that are not a list": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\nspec: {levels: {nodeLabel: rack}}\n",
			want: []string{`Topology "t".spec.levels: must be a list, not an object`},
		},
		"a Topology name that is not a DNS-1123 subdomain": {
			in:   topology("v1beta2", "TAS", "kubernetes.io/hostname"),
			want: []string{`Topology "TAS".metadata.name: "TAS" is not a valid name: ` + subdomainRule},
		},
		"two Topologies of one name": {
			in:   queuestest.Stream(topology("v1beta1", "t", "kubernetes.io/hostname"), topology("v1beta2", "t", "example.com/rack")),
			want: []string{`Topology "t".metadata.name: Topology "t" is defined twice: in document[0] and document[1]`},
		},
		"node-fit with a value other than true": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: gpu, annotations: {tally.dev/node-fit: \"yes\"}}\n",
			want: []string{`ResourceFlavor "gpu".metadata.annotations[tally.dev/node-fit]: "yes": the only value is "true" (each pod of a workload must fit on one of the flavor's nodes); remove the annotation for no node-level fit`},
		},
		"node-fit on a flavor with a Topology": {
			in: queuestest.Stream(topology("v1beta2", "default", "kubernetes.io/hostname"),
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: gpu, annotations: {tally.dev/node-fit: \"true\"}}\nspec: {topologyName: default}\n"),
			want: []string{`ResourceFlavor "gpu".metadata.annotations[tally.dev/node-fit]: the flavor has a Topology (spec.topologyName): make kubernetes.io/hostname its lowest level for node-level fit, and remove the annotation`},
		},
		"a flavor names a Topology that is not defined": {
			in:   queuestest.Stream(topology("v1beta2", "default", "kubernetes.io/hostname"), queuestest.Flavor("tas", "  topologyName: nope\n")),
			want: []string{`ResourceFlavor "tas".spec.topologyName: Topology "nope" is not defined`},
		},
		"a broken Topology document still defines its name": {
			in: queuestest.Stream("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: default}\nspec: {levels: [kubernetes.io/hostname]}\n",
				queuestest.Flavor("tas", "  topologyName: default\n")),
			want: []string{`Topology "default".spec.levels: must be an object, not a string`},
		},
		"a Topology of apiVersion v1alpha2": {
			in: topology("v1alpha2", "t", "kubernetes.io/hostname"),
			want: []string{`document[0].apiVersion: unsupported apiVersion "kueue.x-k8s.io/v1alpha2": ` +
				`must be one of tally.dev/v1, kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2, kueue.x-k8s.io/v1alpha1`},
		},

		// Flavors.
		"nodeSelector in conflict with nodeLabels": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {zone: a}
  nodeSelector: {zone: b}
`,
			want: []string{`ResourceFlavor "gpu".spec.nodeSelector[zone]: "b" conflicts with "a" in spec.nodeLabels`},
		},
		"an invalid node label value": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {zone: "a b"}
`,
			want: []string{`ResourceFlavor "gpu".spec.nodeLabels[zone]: "a b" is not a valid label value: ` +
				`a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with ` +
				`an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		},
		"a taint without an effect and a toleration with a value it cannot have": {
			in: `apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeTaints: [{key: gpu, value: "true"}]
  tolerations: [{key: gpu, operator: Exists, value: "true"}, {operator: Equal, effect: Never}]
`,
			want: []string{
				`ResourceFlavor "gpu".spec.nodeTaints[0].effect: is required: one of NoSchedule, PreferNoSchedule, NoExecute`,
				`ResourceFlavor "gpu".spec.tolerations[0].value: must be empty when operator is Exists`,
				`ResourceFlavor "gpu".spec.tolerations[1].operator: must be Exists when key is empty`,
				`ResourceFlavor "gpu".spec.tolerations[1].effect: unsupported value "Never": must be one of NoSchedule, PreferNoSchedule, NoExecute`,
			},
		},

		// Priority classes.
		"a priority class value outside int32": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 2147483648\n",
			want: []string{`WorkloadPriorityClass "high".value: must be an integer from -2147483648 to 2147483647, got 2147483648`},
		},
		"a priority class value written as a string": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: \"1000\"\n",
			want: []string{`WorkloadPriorityClass "high".value: must be an integer from -2147483648 to 2147483647, got 1000`},
		},
		"a priority class without a value": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nspec: {value: 1000}\n",
			want: []string{`WorkloadPriorityClass "high".value: is required`},
		},

		// Documents.
		"an unknown apiVersion": {
			in: strings.Replace(queuestest.Flavor("default"), "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1alpha1", 1),
			want: []string{`document[0].apiVersion: unsupported apiVersion "kueue.x-k8s.io/v1alpha1": ` +
				`must be one of tally.dev/v1, kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2`},
		},
		"a document without apiVersion and kind": {
			in: "metadata: {name: a}\n",
			want: []string{
				`document[0].apiVersion: is required: one of tally.dev/v1, kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2`,
				`document[0].kind: is required: one of ResourceFlavor, Topology, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, WorkloadKind`,
			},
		},
		"an unknown kind": {
			in:   queuestest.Stream(base, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Queue\nmetadata: {name: prov}\n"),
			want: []string{`document[2].kind: unknown kind "Queue": must be one of ResourceFlavor, Topology, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, WorkloadKind`},
		},
		"Kueue kinds tally does not run are refused, each with why": {
			in: queuestest.Stream(base,
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: kueue.x-k8s.io/provisioning-request}\n",
				"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ProvisioningRequestConfig\nmetadata: {name: prov-config}\nspec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io}\n",
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: MultiKueueConfig\nmetadata: {name: mk}\n",
				"apiVersion: kueue.x-k8s.io/v1alpha1\nkind: MultiKueueCluster\nmetadata: {name: worker1}\n",
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\n",
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\n"),
			want: []string{
				`AdmissionCheck "prov": tally does not run admission checks or ProvisioningRequests; remove the document`,
				`ProvisioningRequestConfig "prov-config": tally does not run admission checks or ProvisioningRequests; remove the document`,
				`MultiKueueConfig "mk": tally does not dispatch workloads to other clusters (MultiKueue); remove the document`,
				`MultiKueueCluster "worker1": tally does not dispatch workloads to other clusters (MultiKueue); remove the document`,
				`Workload "w": tally keeps a workload's state on the job object itself, not in Workload objects; remove the document`,
				`document[7]: tally does not run admission checks or ProvisioningRequests; remove the document`,
			},
		},
		"Kueue fields tally does not run are refused, each with why": {
			in: queuestest.Stream(queuestest.Flavor("default"),
				queuestest.ClusterQueue("a", "  admissionChecks: [prov]\n  admissionChecksStrategy:\n    admissionChecks: [{name: prov, onFlavors: [default]}]\n"+
					"  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: BorrowingOverPreemption}\n"+
					"  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}\n"+queuestest.OneGroup),
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: main, namespace: ns}\nspec: {clusterQueue: a, fairSharing: {weight: 2}}\n"),
			want: []string{
				`ClusterQueue "a".spec.admissionChecks: tally does not run admission checks; remove the field (tally admits as soon as quota allows)`,
				`ClusterQueue "a".spec.admissionChecksStrategy: tally does not run admission checks; remove the field (tally admits as soon as quota allows)`,
				`ClusterQueue "a".spec.admissionScope: tally does not run admission fair sharing; remove the field (tally orders a queue's workloads by priority, then creation time)`,
				`ClusterQueue "a".spec.concurrentAdmissionPolicy: tally does not run concurrent admission (flavor migration); remove the field (an admitted workload keeps its flavor)`,
				`ClusterQueue "a".spec.flavorFungibility.preference: tally does not run flavor preference; remove the field (tally chooses between borrowing and preempting by whenCanBorrow and whenCanPreempt)`,
				`LocalQueue "ns/main".spec.fairSharing: tally does not run admission fair sharing; remove the field (fair sharing in tally is a ClusterQueue's fairSharing, between the queues of a cohort)`,
			},
		},
		"a LocalQueue's stopPolicy is one of Kueue's": {
			in: queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", queuestest.OneGroup),
				"apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: main, namespace: ns}\nspec: {clusterQueue: a, stopPolicy: Drain}\n"),
			want: []string{`LocalQueue "ns/main".spec.stopPolicy: unsupported value "Drain": must be one of None, Hold, HoldAndDrain`},
		},
		"a YAML syntax error names the document and the line in the input": {
			in:   queuestest.Stream(base, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata:\n  name: [gpu\n"),
			want: []string{`document[2]: yaml: line 12: did not find expected ',' or ']'`},
		},
		"a key given twice": {
			in:   queuestest.Stream(base, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nkind: ClusterQueue\nmetadata: {name: a}\n"),
			want: []string{`document[2]: yaml: unmarshal errors: line 11: key "kind" already set in map`},
		},
		"a document that is not an object": {
			in:   "- apiVersion: kueue.x-k8s.io/v1beta1\n",
			want: []string{`document[0]: a document must be an object with apiVersion, kind and metadata, not a list`},
		},
		"a field of the wrong type": {
			in:   queuestest.Stream(base, queuestest.ClusterQueue("a", "  resourceGroups:\n  - coveredResources: cpu\n")),
			want: []string{`ClusterQueue "a".spec.resourceGroups.coveredResources: must be a list, not a string`},
		},
		"an unquoted YAML boolean where a string belongs": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a}\nspec: {nodeLabels: {gpu: true}}\n",
			want: []string{`ResourceFlavor "a".spec.nodeLabels: must be a string, not a boolean; quote it`},
		},
		"a metadata field of the wrong type": {
			in:   "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a, uid: 12}\n",
			want: []string{`ResourceFlavor "a".metadata.uid: must be a string, not a number; quote it`},
		},
		"every error of every document is reported, in order": {
			in: queuestest.Stream(queuestest.Flavor("default"),
				queuestest.ClusterQueue("a", "  queueingStrategy: LIFO\n"+groups(group("[cpu]", "default: [{name: cpu, nominalQuota: -4}]", "gpu: "+cpu4))),
				"kind: Cohort\napiVersion: v1\n",
				`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: ns}
spec: {clusterQueue: b}
`),
			want: []string{
				`document[2].apiVersion: unsupported apiVersion "v1": must be one of tally.dev/v1, kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2`,
				`ClusterQueue "a".spec.queueingStrategy: unsupported value "LIFO": must be one of BestEffortFIFO, StrictFIFO`,
				`ClusterQueue "a".spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must not be negative, got -4`,
				`ClusterQueue "a".spec.resourceGroups[0].flavors[1].name: flavor "gpu" is not defined`,
				`document[2].metadata.name: is required`,
				`LocalQueue "ns/main".spec.clusterQueue: ClusterQueue "b" is not defined`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, errs := queues.Parse([]byte(tc.in))
			if diff := cmp.Diff(tc.want, queues.FormatErrors(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if (cfg == nil) != (len(tc.want) > 0) {
				t.Errorf("Config = %v with %d errors: want a Config exactly when there is no error", cfg, len(errs))
			}
		})
	}
}

func TestFormatErrors(t *testing.T) {
	errs := field.ErrorList{
		field.NotFound(field.NewPath(`ClusterQueue "a"`).Child("spec", "resourceGroups").Index(0).Child("flavors").Index(1).Child("name"), "x"),
		field.Invalid(field.NewPath("config"), "x", "is wrong"),
	}
	errs[0].Detail = `flavor "x" is not defined`
	want := []string{
		`ClusterQueue "a".spec.resourceGroups[0].flavors[1].name: flavor "x" is not defined`,
		`config: is wrong`,
	}
	if diff := cmp.Diff(want, queues.FormatErrors(errs)); diff != "" {
		t.Errorf("FormatErrors (-want +got):\n%s", diff)
	}
	noDetail := field.ErrorList{field.NotFound(field.NewPath("x"), "y")}
	if diff := cmp.Diff([]string{`x: Not found: "y"`}, queues.FormatErrors(noDetail)); diff != "" {
		t.Errorf("FormatErrors without a detail (-want +got):\n%s", diff)
	}
}

// Errors and warnings beyond 100 are counted, not listed.
func TestParseCapsErrors(t *testing.T) {
	var docs, wantErrs, wantWarnings []string
	for i := range 105 {
		docs = append(docs, fmt.Sprintf("apiVersion: tally.dev/v1\nkind: LocalQueue\nmetadata: {name: q%d, namespace: ns}\nspec: {clusterQueue: none, extra: 1}\n", i))
		if i < 100 {
			wantErrs = append(wantErrs, fmt.Sprintf(`LocalQueue "ns/q%d".spec.clusterQueue: ClusterQueue "none" is not defined`, i))
			wantWarnings = append(wantWarnings, fmt.Sprintf(`LocalQueue "ns/q%d".spec.extra: unknown field, ignored`, i))
		}
	}
	wantErrs = append(wantErrs, "config: 5 more errors not listed")
	wantWarnings = append(wantWarnings, "config: 5 more warnings not listed")
	_, warnings, errs := queues.Parse([]byte(queuestest.Stream(docs...)))
	if diff := cmp.Diff(wantErrs, queues.FormatErrors(errs)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantWarnings, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
