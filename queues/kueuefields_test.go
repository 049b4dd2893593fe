package queues_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"tally.dev/tally/queues"
)

// kueueField is one field of a Kueue kind, from the Go types of Kueue's
// apis/kueue/v1beta1 and v1beta2 (the union of both), with a value that
// is valid in Kueue.
type kueueField struct {
	kind, path string
	value      any
}

// kueueFields lists every spec field of Kueue's ResourceFlavor, Topology,
// ClusterQueue, Cohort, LocalQueue and WorkloadPriorityClass (apis/kueue/v1beta1
// and v1beta2, *_types.go), and the top-level fields every document has.
var kueueFields = []kueueField{
	{"ResourceFlavor", "spec.nodeLabels", map[string]any{"node-type": "gpu"}},
	{"ResourceFlavor", "spec.nodeTaints", []any{map[string]any{"key": "gpu", "value": "true", "effect": "NoSchedule"}}},
	{"ResourceFlavor", "spec.tolerations", []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}}},
	{"ResourceFlavor", "spec.topologyName", "default"},
	{"ResourceFlavor", "metadata.labels", map[string]any{"team": "a"}},

	{"Topology", "spec.levels[0].nodeLabel", "cloud.provider.com/topology-rack"},
	{"Topology", "metadata.labels", map[string]any{"team": "a"}},

	{"ClusterQueue", "spec.resourceGroups[0].coveredResources", []any{"cpu"}},
	{"ClusterQueue", "spec.resourceGroups[0].flavors[0].name", "default"},
	{"ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[0].name", "cpu"},
	{"ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "8"},
	{"ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "2"},
	{"ClusterQueue", "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "2"},
	{"ClusterQueue", "spec.cohort", "ml"},
	{"ClusterQueue", "spec.cohortName", "ml"},
	{"ClusterQueue", "spec.queueingStrategy", "StrictFIFO"},
	{"ClusterQueue", "spec.namespaceSelector", map[string]any{"matchLabels": map[string]any{"team": "a"}}},
	{"ClusterQueue", "spec.flavorFungibility.whenCanBorrow", "TryNextFlavor"},
	{"ClusterQueue", "spec.flavorFungibility.whenCanPreempt", "TryNextFlavor"},
	{"ClusterQueue", "spec.flavorFungibility.preference", "BorrowingOverPreemption"},
	{"ClusterQueue", "spec.preemption.reclaimWithinCohort", "LowerPriority"},
	{"ClusterQueue", "spec.preemption.withinClusterQueue", "LowerPriority"},
	{"ClusterQueue", "spec.preemption.borrowWithinCohort.policy", "LowerPriority"},
	{"ClusterQueue", "spec.preemption.borrowWithinCohort.maxPriorityThreshold", 100},
	{"ClusterQueue", "spec.admissionChecks", []any{"prov"}},
	{"ClusterQueue", "spec.admissionChecksStrategy.admissionChecks[0].name", "prov"},
	{"ClusterQueue", "spec.admissionChecksStrategy.admissionChecks[0].onFlavors", []any{"default"}},
	{"ClusterQueue", "spec.stopPolicy", "HoldAndDrain"},
	{"ClusterQueue", "spec.fairSharing.weight", "2"},
	{"ClusterQueue", "spec.admissionScope.admissionMode", "UsageBasedAdmissionFairSharing"},
	{"ClusterQueue", "spec.concurrentAdmissionPolicy.migration.mode", "TryPreferredFlavors"},
	{"ClusterQueue", "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName", "default"},
	{"ClusterQueue", "status", map[string]any{"pendingWorkloads": 3}},
	{"ClusterQueue", "metadata.labels", map[string]any{"team": "a"}},

	{"LocalQueue", "spec.clusterQueue", "a"},
	{"LocalQueue", "spec.stopPolicy", "HoldAndDrain"},
	{"LocalQueue", "spec.fairSharing.weight", "2"},
	{"LocalQueue", "status", map[string]any{"pendingWorkloads": 3}},
	{"LocalQueue", "metadata.labels", map[string]any{"team": "a"}},

	{"Cohort", "spec.parentName", "org"},
	{"Cohort", "spec.resourceGroups[0].coveredResources", []any{"cpu"}},
	{"Cohort", "spec.resourceGroups[0].flavors[0].name", "default"},
	{"Cohort", "spec.resourceGroups[0].flavors[0].resources[0].name", "cpu"},
	{"Cohort", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "8"},
	{"Cohort", "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "2"},
	{"Cohort", "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "2"},
	{"Cohort", "spec.fairSharing.weight", "2"},
	{"Cohort", "status", map[string]any{"fairSharing": map[string]any{"weightedShare": 0}}},
	{"Cohort", "metadata.labels", map[string]any{"team": "a"}},

	{"WorkloadPriorityClass", "value", 100},
	{"WorkloadPriorityClass", "description", "batch work"},
	{"WorkloadPriorityClass", "metadata.labels", map[string]any{"team": "a"}},
}

// kueueKinds are Kueue's other kinds (apis/kueue/v1beta1 and v1beta2),
// each refused as a whole.
var kueueKinds = []string{"AdmissionCheck", "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Workload"}

// kueueBase is a valid document of each kind, to which one field at a
// time is added.
var kueueBase = map[string]string{
	"ResourceFlavor": "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n",
	"Topology":       "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: default}\nspec: {levels: [{nodeLabel: kubernetes.io/hostname}]}\n",
	"ClusterQueue": `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  cohortName: ml
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
`,
	"Cohort": `apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: ml}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
`,
	"LocalQueue":            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: main, namespace: ns}\nspec: {clusterQueue: a}\n",
	"WorkloadPriorityClass": "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\n",
}

// TestKueueFieldsParsedOrRefused: every field of Kueue's kinds is either
// read by tally (no warning, no error), ignored on purpose (no warning)
// or refused with a field-path error that says tally does not run it;
// none falls through as a mere "unknown field" warning. And
// docs/kueue-fields.md says the same of each.
func TestKueueFieldsParsedOrRefused(t *testing.T) {
	docs := kueueFieldsDoc(t)
	for _, f := range kueueFields {
		t.Run(f.kind+"."+f.path, func(t *testing.T) {
			doc := map[string]any{}
			if err := yaml.Unmarshal([]byte(kueueBase[f.kind]), &doc); err != nil {
				t.Fatal(err)
			}
			set(t, doc, f.path, f.value)
			text, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			in := string(text)
			if f.kind != "ResourceFlavor" {
				in = kueueBase["ResourceFlavor"] + "---\n" + in
			}
			if f.kind != "Topology" {
				in = kueueBase["Topology"] + "---\n" + in
			}
			if f.kind == "LocalQueue" || f.kind == "WorkloadPriorityClass" {
				in = kueueBase["ClusterQueue"] + "---\n" + in
			}
			_, warnings, errs := queues.Parse([]byte(in))
			if len(warnings) > 0 {
				t.Errorf("warnings %q: the field falls through", warnings)
			}
			var refused []string
			for _, msg := range queues.FormatErrors(errs) {
				if strings.Contains(msg, ": tally does not run ") {
					refused = append(refused, msg)
				} else {
					t.Errorf("unexpected error %q", msg)
				}
			}
			status := "supported"
			switch {
			case len(refused) > 0:
				status = "refused"
				_, at, _ := strings.Cut(refused[0], `".`)
				at, _, _ = strings.Cut(at, ": ")
				if len(refused) != 1 || !strings.HasPrefix(refusedPath(f.path), at) {
					t.Errorf("refusals %q, want one at a prefix of %s", refused, f.path)
				}
			case strings.HasPrefix(f.path, "status") || strings.HasPrefix(f.path, "metadata."):
				status = "ignored"
			}
			if got := docs[f.kind+" "+f.path]; got != status {
				t.Errorf("docs/kueue-fields.md says %q, the code does %q", got, status)
			}
		})
	}
	for _, kind := range kueueKinds {
		_, _, errs := queues.Parse([]byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: " + kind + "\nmetadata: {name: x}\n"))
		msgs := queues.FormatErrors(errs)
		if len(msgs) != 1 || !strings.HasPrefix(msgs[0], kind+` "x": tally `) || !strings.HasSuffix(msgs[0], "remove the document") {
			t.Errorf("%s: errors %q, want it refused with why", kind, msgs)
		}
		if got := docs[kind+" (document)"]; got != "refused" {
			t.Errorf("docs/kueue-fields.md says %q of %s documents, the code refuses them", got, kind)
		}
	}
}

// refusedPath is path without its list indexes, as the errors of a
// refused subtree give it.
func refusedPath(path string) string {
	for {
		i := strings.Index(path, "[")
		if i < 0 {
			return path
		}
		path = path[:i] + path[strings.Index(path, "]")+1:]
	}
}

// set sets the field at a dotted path with list indexes in doc, making
// the objects and lists on the way.
func set(t *testing.T, doc map[string]any, path string, value any) {
	t.Helper()
	parts := strings.Split(path, ".")
	cur := doc
	for i, part := range parts {
		name, index, isList := strings.Cut(strings.TrimSuffix(part, "]"), "[")
		last := i == len(parts)-1
		if !isList {
			if last {
				cur[name] = value
				return
			}
			next, _ := cur[name].(map[string]any)
			if next == nil {
				next = map[string]any{}
				cur[name] = next
			}
			cur = next
			continue
		}
		n, err := strconv.Atoi(index)
		if err != nil || last {
			t.Fatalf("bad path %s", path)
		}
		list, _ := cur[name].([]any)
		for len(list) <= n {
			list = append(list, map[string]any{})
		}
		cur[name] = list
		cur = list[n].(map[string]any)
	}
}

// kueueFieldsDoc reads the table of docs/kueue-fields.md: "kind field"
// (or "kind (document)") to its status.
func kueueFieldsDoc(t *testing.T) map[string]string {
	data, err := os.ReadFile("../docs/kueue-fields.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(line, "| ") {
			continue
		}
		kind, fieldName, status := strings.TrimSpace(cells[1]), strings.Trim(strings.TrimSpace(cells[2]), "`"), strings.TrimSpace(cells[3])
		out[kind+" "+fieldName] = status
	}
	return out
}
