package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// pyTorchJobJSON is a PyTorchJob of one master and two workers; extra
// is spliced into its metadata, runPolicy (if not empty) becomes its
// spec.runPolicy, and workerAffinity the worker template's affinity.
func pyTorchJobJSON(extra, runPolicy, workerAffinity string) string {
	spec := `"pytorchReplicaSpecs": {
	  "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}},
	  "Worker": {"replicas": 2, "template": {"spec": {` + workerAffinity + `"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}`
	if runPolicy != "" {
		spec = `"runPolicy": ` + runPolicy + `, ` + spec
	}
	return `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p", "namespace": "team"` + extra + `}, "spec": {` + spec + `}}`
}

func pyTorchJobRequest(op admissionv1.Operation, raw, old string) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Namespace: "team", Name: "p",
		Kind:   metav1.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"},
		Object: runtime.RawExtension{Raw: []byte(raw)},
	}}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	return req
}

// mutatePyTorchJob runs the mutating webhook on a PyTorchJob and applies
// its patch to the JSON the API server holds.
func mutatePyTorchJob(t *testing.T, raw string) (*kinds.Object, admission.Response) {
	t.Helper()
	return mutateRaw(t, kinds.PyTorchJob, raw)
}

func TestPyTorchJobMutation(t *testing.T) {
	workerTerms := `"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}, `
	for _, tc := range []struct {
		name      string
		runPolicy string
	}{
		{"without runPolicy", ""},
		{"with runPolicy", `{"cleanPodPolicy": "Running"}`},
		{"created suspended", `{"suspend": true}`},
		{"created running", `{"suspend": false, "cleanPodPolicy": "None"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, resp := mutatePyTorchJob(t, pyTorchJobJSON("", tc.runPolicy, workerTerms))
			if o == nil {
				t.Fatalf("denied: %v", resp.Result)
			}
			if !o.Suspended || o.Meta.Labels[queues.LabelQueue] != "q" || o.Meta.Labels[queues.LabelState] != "pending" {
				t.Fatalf("suspended %v labels %v", o.Suspended, o.Meta.Labels)
			}
			u := o.Obj.(*unstructured.Unstructured)
			if strings.Contains(tc.runPolicy, "cleanPodPolicy") {
				if v, _, _ := unstructured.NestedString(u.Object, "spec", "runPolicy", "cleanPodPolicy"); v == "" {
					t.Error("the patch lost runPolicy.cleanPodPolicy")
				}
			}
			for _, ps := range o.PodSets {
				terms := queues.RequiredTerms(&ps.Template.Spec)
				// spot and on-demand, ANDed with the worker's own term.
				if len(terms) != 2 {
					t.Fatalf("pod set %s: %d required terms, want 2: %+v", ps.Name, len(terms), terms)
				}
				own := ps.Name == "worker"
				if got := len(terms[0].MatchExpressions) == 2; got != own {
					t.Errorf("pod set %s: own term kept %v, want %v: %+v", ps.Name, got, own, terms[0])
				}
				if len(ps.Template.Spec.Tolerations) != 1 || ps.Template.Spec.Tolerations[0].Key != "on-demand" {
					t.Errorf("pod set %s: tolerations %+v", ps.Name, ps.Template.Spec.Tolerations)
				}
			}
			want := `{"worker":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}`
			if got := o.Meta.Annotations[queues.AnnotationUserAffinity]; got != want {
				t.Errorf("user affinity %s, want %s", got, want)
			}
			// Idempotent: mutating the result changes nothing.
			again, err := json.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			m := newMutator(t, testConfig(t))
			if resp := m.Handle(context.Background(), pyTorchJobRequest(admissionv1.Create, string(again), "")); len(resp.Patch) != 0 {
				t.Errorf("second mutation patched %s", resp.Patch)
			}
		})
	}
}

func TestPyTorchJobMutationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"a replica without containers", `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"}, "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {}}}}}}`,
			"tally: decoding PyTorchJob: spec.pytorchReplicaSpecs.Worker.template.spec.containers: a PyTorchJob needs at least one container"},
		{"no replicas", `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"}, "spec": {}}`,
			"tally: decoding PyTorchJob: it has no pod template"},
		{"replicas not a number", `{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"}, "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": "3"}}}}`,
			"tally: decoding PyTorchJob: spec.pytorchReplicaSpecs.Worker.replicas: not a number"},
		{"a hostile quantity", pyTorchJobJSON("", "", `"overhead": {"cpu": "1e-999999999"}, `),
			"tally: decoding PyTorchJob: spec.pytorchReplicaSpecs[Worker].template.spec.overhead[cpu]: quantity \"1e-999999999\" has a decimal exponent beyond ±30"},
		{"another kind's JSON", `{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "p"}, "spec": {"template": {"spec": {"overhead": {"cpu": "1e-999999999"}}}}}`,
			`apiVersion "batch/v1" and kind "Job" are not kubeflow.org/v1 PyTorchJob`},
		{"an unknown queue-name", pyTorchJobJSON(`, "labels": {"kueue.x-k8s.io/queue-name": "nope"}`, "", ""),
			`LocalQueue "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := mutatePyTorchJob(t, tc.raw)
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("allowed %v, message %q; want a refusal with %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
}

func TestPyTorchJobGuard(t *testing.T) {
	o, _ := mutatePyTorchJob(t, pyTorchJobJSON("", "", ""))
	pending, err := json.Marshal(o.Obj.(*unstructured.Unstructured).Object)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(u *unstructured.Unstructured)) string {
		u := o.Obj.(*unstructured.Unstructured).DeepCopy()
		f(u)
		b, _ := json.Marshal(u.Object)
		return string(b)
	}
	running := edit(func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, false, "spec", "runPolicy", "suspend")
	})
	for _, tc := range []struct {
		name, old, cur, want string
	}{
		{"un-suspend", string(pending), running, "spec.runPolicy.suspend: only tally may un-suspend a PyTorchJob"},
		{"more workers while running", running, edit(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, false, "spec", "runPolicy", "suspend")
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "pytorchReplicaSpecs", "Worker", "replicas")
		}), "spec.pytorchReplicaSpecs.Worker.replicas: only tally may raise the pod count of a running PyTorchJob"},
		{"a worker's node selector", string(pending), edit(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"tier": "spot"}, "spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "nodeSelector")
		}), "spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector: only tally may change the nodeSelector of a PyTorchJob"},
		{"the queue label", string(pending), edit(func(u *unstructured.Unstructured) {
			l := u.GetLabels()
			l[queues.LabelQueue] = "other"
			u.SetLabels(l)
		}), "metadata.labels[tally.dev/cluster-queue]: only tally may change this label of a PyTorchJob"},
		{"more workers while suspended", string(pending), edit(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "pytorchReplicaSpecs", "Worker", "replicas")
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := pyTorchJobRequest(admissionv1.Update, tc.cur, tc.old)
			req.UserInfo = authenticationv1.UserInfo{Username: alice}
			resp := newGuard().Handle(context.Background(), req)
			if tc.want == "" {
				if !resp.Allowed {
					t.Errorf("denied: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("allowed %v, message %q; want a denial with %q", resp.Allowed, resp.Result.Message, tc.want)
			}
		})
	}
}

// BenchmarkPyTorchJobWebhook measures the handler on the GPU training
// example's shape of PyTorchJob (a master and workers), reporting the
// median and 99th percentile latency of single requests.
func BenchmarkPyTorchJobWebhook(b *testing.B) {
	benchWebhook(b, nil, pyTorchJobRequest(admissionv1.Create, pyTorchJobJSON(`, "labels": {"app": "train"}`, `{"cleanPodPolicy": "Running"}`, ""), ""))
}
