package kinds

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"tally.dev/tally/queues"
)

// trainJob is the kind that docs/kinds.md's example declares ("Declaring
// a kind"), with a second pod set in a list.
var trainJob = queues.WorkloadKind{
	Name: "trainjobs.example.com", Group: "example.com", Version: "v1", Kind: "TrainJob",
	SuspendPath: []string{"spec", "suspend"},
	PodSets: []queues.WorkloadKindPodSet{
		{Name: "worker", TemplatePath: []string{"spec", "worker", "template"}, CountPath: []string{"spec", "worker", "replicas"}},
		{Name: "launcher", TemplatePath: []string{"spec", "roles", "0", "template"}},
	},
	FinishedConditions: []string{"Succeeded", "Failed"},
}

const trainJobObject = `{"apiVersion": "example.com/v1", "kind": "TrainJob", "metadata": {"name": "t", "namespace": "n"},
  "spec": {"suspend": true,
    "worker": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "2"}}}]}}},
    "roles": [{"template": {"spec": {"containers": [{"name": "l", "resources": {"requests": {"cpu": "1"}}}]}}}]},
  "status": {"conditions": [{"type": "Suspended", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}`

func TestDeclaredRead(t *testing.T) {
	d := NewDeclared(trainJob, "trainjobs")
	r := NewRegistry()
	if _, ok := r.Of(decode(t, trainJobObject)); ok || r.For(d.GVK()) != nil {
		t.Fatal("known before it is declared")
	}
	r.Declare([]*Declared{d})
	if r.For(d.GVK()) != Kind(d) || r.All()[0].GVK().Kind != "Job" {
		t.Fatal("Declare: not registered after the built-in kinds")
	}
	o, ok := r.Of(decode(t, trainJobObject))
	if !ok {
		t.Fatal("not read")
	}
	if got := o.PodSetNames(); !slices.Equal(got, []string{"worker", "launcher"}) || o.PodSets[0].Count != 3 || o.PodSets[1].Count != 1 {
		t.Errorf("pod sets %v, counts %d %d", got, o.PodSets[0].Count, o.PodSets[1].Count)
	}
	if !o.Suspended || o.Finished || o.StoppedSince.IsZero() {
		t.Errorf("suspended %v finished %v stopped %v", o.Suspended, o.Finished, o.StoppedSince)
	}
	if p, v := o.SuspendOp(false); p != "/spec/suspend" || v != false {
		t.Errorf("suspend op %s %v", p, v)
	}
	if got := o.Workload("q", 0).Total().String(); got != "cpu=7" {
		t.Errorf("total %s, want cpu=7", got)
	}
	u := decode(t, strings.Replace(trainJobObject, `"Suspended"`, `"Failed"`, 1))
	if o, _ := r.Of(u); !o.Finished {
		t.Error("a Failed condition is declared finished")
	}
	u = decode(t, strings.Replace(trainJobObject, `"replicas": 3`, `"replicas": "3"`, 1))
	if _, err := d.Read(u); err == nil || err.Error() != "spec.worker.replicas: not a number" {
		t.Errorf("a count that is not a number: %v", err)
	}
	r.Declare(nil)
	if r.For(d.GVK()) != nil {
		t.Error("Declare(nil) leaves it declared")
	}
}

// TestDeclaredShape: the shape holds a pod template at each path, so the
// webhook checks the quantities there before anything decodes them.
func TestDeclaredShape(t *testing.T) {
	sh := NewDeclared(trainJob, "trainjobs").Shape()
	if err := json.Unmarshal([]byte(trainJobObject), sh); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(sh).Elem()
	b, _ := json.Marshal(v.Interface())
	for _, want := range []string{`"worker":{"template":{"metadata":`, `"roles":[{"template":`, `"cpu":"2"`, `"cpu":"1"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("shape %s lacks %s", b, want)
		}
	}
}

func TestCheckDeclared(t *testing.T) {
	pt := trainJob
	pt.Name, pt.Group, pt.Kind = "mine", "kubeflow.org", "PyTorchJob"
	errs := CheckDeclared([]queues.WorkloadKind{trainJob, pt})
	if got := queues.FormatErrors(errs); len(got) != 1 || got[0] != `WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know` {
		t.Errorf("errors %q", got)
	}
}

func TestCheckSchema(t *testing.T) {
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	tpl := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
	schema := obj(map[string]apiextensionsv1.JSONSchemaProps{"spec": obj(map[string]apiextensionsv1.JSONSchemaProps{
		"suspend": {Type: "boolean"},
		"worker":  obj(map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}, "template": tpl}),
		"roles":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"template": tpl}}}},
	})})
	if errs := CheckSchema(trainJob, &schema); len(errs) > 0 {
		t.Fatalf("the paths fit: %v", errs)
	}
	bad := trainJob
	bad.SuspendPath = []string{"spec", "worker", "replicas"}
	bad.PodSets = []queues.WorkloadKindPodSet{
		{Name: "a", TemplatePath: []string{"spec", "roles", "template"}},
		{Name: "b", TemplatePath: []string{"spec", "workers", "template"}, CountPath: []string{"spec", "suspend"}},
	}
	want := []string{
		`WorkloadKind "trainjobs.example.com".spec.suspendPath: ".spec.worker.replicas" is of type integer in the CRD's schema, not boolean`,
		`WorkloadKind "trainjobs.example.com".spec.podSets[0].templatePath: ".spec.roles.template": .spec.roles is a list in the CRD's schema: index it, as in .spec.roles[0]`,
		`WorkloadKind "trainjobs.example.com".spec.podSets[1].templatePath: ".spec.workers.template": the CRD's schema has no field workers in .spec`,
		`WorkloadKind "trainjobs.example.com".spec.podSets[1].countPath: ".spec.suspend" is of type boolean in the CRD's schema, not integer`,
	}
	if got := queues.FormatErrors(CheckSchema(bad, &schema)); !slices.Equal(got, want) {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}
}
