package ledger

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// TestConfigLoaderKinds: the loader declares the kinds the API server
// serves, reports the others and loads the config all the same, and keeps
// the last good config when one declares a built-in kind.
func TestConfigLoaderKinds(t *testing.T) {
	kind := func(name, group, kind string) string {
		return "apiVersion: tally.dev/v1\nkind: WorkloadKind\nmetadata: {name: " + name + "}\nspec:\n  group: " + group + "\n  version: v1\n  kind: " + kind +
			"\n  suspendPath: .spec.suspend\n  podSets:\n  - name: worker\n    templatePath: .spec.worker.template\n  finishedConditions: [Succeeded]\n"
	}
	train := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "TrainJob"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(train, train.GroupVersion().WithResource("trainings"), train.GroupVersion().WithResource("training"), meta.RESTScopeNamespace)
	rec := record.NewFakeRecorder(10)
	c := &ConfigLoader{Store: queues.NewStore(nil), Recorder: rec, Namespace: "tally-system", Log: logr.Discard(), Mapper: mapper, Kinds: kinds.NewRegistry()}
	load := func(config string) []string {
		c.load(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tally-system", Name: queues.ConfigName}, Data: map[string]string{queues.ConfigKey: config}})
		var events []string
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		return events
	}

	events := load(kind("trainjobs.example.com", "example.com", "TrainJob") + "---\n" + kind("other.example.com", "example.com", "Other"))
	if len(events) != 2 || !strings.HasPrefix(events[0], "Warning "+ReasonConfigInvalid+" WorkloadKind other.example.com: example.com/v1 Other is not served by the API server") ||
		events[1] != "Normal "+ReasonConfigLoaded+" Loaded 0 ClusterQueues, 0 ResourceFlavors" {
		t.Errorf("events %q", events)
	}
	good := c.Store.Load()
	if k := c.Kinds.For(train); good == nil || k == nil || k.Resource() != "trainings" || len(good.WorkloadKinds) != 2 {
		t.Fatalf("config %v, kind %v: TrainJob not declared as trainings", good, k)
	}

	events = load(kind("mine", "kubeflow.org", "PyTorchJob"))
	want := "Warning " + ReasonConfigInvalid + ` Config rejected, the last good config stays in force: WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`
	if len(events) != 1 || events[0] != want {
		t.Errorf("events %q, want %q", events, want)
	}
	if c.Store.Load() != good || c.Kinds.For(train) == nil {
		t.Error("a refused config replaced the last good one")
	}

	// A ClusterQueue that asks for an admission check never comes into
	// force: tally would admit its workloads past the check.
	events = load(queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", "  admissionChecks: [prov]\n"+queuestest.OneGroup),
		"apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: kueue.x-k8s.io/provisioning-request}\n"))
	want = "Warning " + ReasonConfigInvalid + ` Config rejected, the last good config stays in force: ClusterQueue "a".spec.admissionChecks: tally does not run admission checks; remove the field (tally admits as soon as quota allows)` +
		`; AdmissionCheck "prov": tally does not run admission checks or ProvisioningRequests; remove the document`
	if len(events) != 1 || events[0] != want {
		t.Errorf("events %q, want %q", events, want)
	}
	if c.Store.Load() != good {
		t.Error("a config with admission checks replaced the last good one")
	}
}
