package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestConfigValidatorWorkloadKinds: the webhook refuses what the ledger
// would refuse, a WorkloadKind that names a built-in kind among them.
func TestConfigValidatorWorkloadKinds(t *testing.T) {
	kind := func(name, group, kind string) string {
		return "apiVersion: tally.dev/v1\nkind: WorkloadKind\nmetadata: {name: " + name + "}\nspec:\n  group: " + group + "\n  version: v1\n  kind: " + kind +
			"\n  suspendPath: .spec.suspend\n  podSets:\n  - name: worker\n    templatePath: .spec.worker.template\n  finishedConditions: [Succeeded]\n"
	}
	v := &ConfigValidator{Namespace: "tally-system", Name: "tally-config", Decoder: hostileDecoder()}
	for _, tc := range []struct {
		name, config string
		allowed      bool
		msg          string
	}{
		{"a kind tally does not know passes", kind("trainjobs.example.com", "example.com", "TrainJob"), true, ""},
		{"a built-in kind is refused", kind("mine", "kubeflow.org", "PyTorchJob"), false,
			`data[queues.yaml]: invalid config: WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "tally-system", Name: "tally-config",
				Object: runtime.RawExtension{Raw: []byte(configMap(tc.config))},
			}})
			if resp.Allowed != tc.allowed || resp.Result.Message != tc.msg {
				t.Errorf("allowed %v, message %q; want %v, %q", resp.Allowed, resp.Result.Message, tc.allowed, tc.msg)
			}
		})
	}
}
