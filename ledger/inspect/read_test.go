package inspect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// configMapReader holds one config ConfigMap, or none.
type configMapReader struct {
	client.Reader
	cm *corev1.ConfigMap
}

func (r configMapReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.cm == nil || key.Name != r.cm.Name || key.Namespace != r.cm.Namespace {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	r.cm.DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

func workloadKind(name, group, kind string) string {
	return "apiVersion: tally.dev/v1\nkind: WorkloadKind\nmetadata: {name: " + name + "}\nspec:\n  group: " + group + "\n  version: v1\n  kind: " + kind +
		"\n  suspendPath: .spec.suspend\n  podSets:\n  - name: worker\n    templatePath: .spec.worker.template\n  finishedConditions: [Succeeded]\n"
}

// TestLoadConfig: the config comes from the ConfigMap, or from a file, and
// is refused as the webhook and the ledger refuse it; its kinds are
// declared for the reads that follow.
func TestLoadConfig(t *testing.T) {
	cm := func(config string) configMapReader {
		c := &corev1.ConfigMap{Data: map[string]string{queues.ConfigKey: config}}
		c.Namespace, c.Name = "tally-system", queues.ConfigName
		return configMapReader{cm: c}
	}
	file := filepath.Join(t.TempDir(), "queues.yaml")
	if err := os.WriteFile(file, []byte(workloadKind("mine", "kubeflow.org", "PyTorchJob")), 0o600); err != nil {
		t.Fatal(err)
	}
	train := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "TrainJob"}

	cfg, ks, err := LoadConfig(context.Background(), cm(workloadKind("trainjobs.example.com", "example.com", "TrainJob")), "tally-system", "")
	if err != nil || len(cfg.WorkloadKinds) != 1 || ks.For(train) == nil {
		t.Errorf("from the ConfigMap: config %v, error %v, TrainJob declared %v", cfg, err, ks.For(train) != nil)
	}
	for _, tc := range []struct {
		name string
		r    client.Reader
		file string
		err  string
	}{
		{"no ConfigMap", configMapReader{}, "", "reading the config: "},
		{"a built-in kind in the ConfigMap", cm(workloadKind("mine", "kubeflow.org", "PyTorchJob")), "",
			`the config does not validate (tally keeps its last good one in force, which this command cannot see): WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`},
		{"a built-in kind in the file", configMapReader{}, file,
			`the config does not validate (tally keeps its last good one in force, which this command cannot see): WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := LoadConfig(context.Background(), tc.r, "tally-system", tc.file); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("error %v, want %s", err, tc.err)
			}
		})
	}
}
