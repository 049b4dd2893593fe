package kinds

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"tally.dev/tally/queues"
)

// acceptedSummary is what a test reads of an Accepted.
type acceptedSummary struct {
	Config   bool
	Kinds    []string // kind=resource
	Unserved []string
	Warnings []string
	Errs     []string
}

func summarize(acc Accepted) acceptedSummary {
	s := acceptedSummary{Config: acc.Config != nil, Warnings: acc.Warnings, Errs: queues.FormatErrors(acc.Errs)}
	for _, d := range acc.Kinds {
		s.Kinds = append(s.Kinds, d.GVK().Kind+"="+d.Resource())
	}
	for _, u := range acc.Unserved {
		s.Unserved = append(s.Unserved, u.Spec.Name)
	}
	if len(s.Errs) == 0 {
		s.Errs = nil
	}
	return s
}

func workloadKind(name, group, kind string) string {
	return "apiVersion: tally.dev/v1\nkind: WorkloadKind\nmetadata: {name: " + name + "}\nspec:\n  group: " + group + "\n  version: v1\n  kind: " + kind +
		"\n  suspendPath: .spec.suspend\n  podSets:\n  - name: worker\n    templatePath: .spec.worker.template\n    countPath: .spec.worker.replicas\n  finishedConditions: [Succeeded]\n"
}

// crd serves group/kind at version with the schema props under spec.
func crd(group, kind, version string, spec map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinition {
	c := apiextensionsv1.CustomResourceDefinition{}
	c.Spec.Group, c.Spec.Names.Kind = group, kind
	c.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: version, Schema: &apiextensionsv1.CustomResourceValidation{
		OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: spec}}}}}}
	return c
}

func crds(list ...apiextensionsv1.CustomResourceDefinition) func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
	return func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) { return list, nil }
}

func TestAccept(t *testing.T) {
	train := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "TrainJob"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(train, train.GroupVersion().WithResource("trainings"), train.GroupVersion().WithResource("training"), meta.RESTScopeNamespace)
	tpl := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
	fits := map[string]apiextensionsv1.JSONSchemaProps{"suspend": {Type: "boolean"},
		"worker": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}, "template": tpl}}}
	misfits := map[string]apiextensionsv1.JSONSchemaProps{"suspend": {Type: "string"}, "worker": tpl}
	trainJob := workloadKind("trainjobs.example.com", "example.com", "TrainJob")
	builtIn := workloadKind("mine", "kubeflow.org", "PyTorchJob")
	flavor := "apiVersion: tally.dev/v1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
	noCall := func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
		t.Error("CRDs listed for a config that declares no kind")
		return nil, nil
	}
	for _, tc := range []struct {
		name   string
		config string
		api    API
		want   acceptedSummary
	}{
		{"a config without kinds asks nothing", flavor, API{Mapper: mapper, CRDs: noCall}, acceptedSummary{Config: true}},
		{"a config that does not parse", "apiVersion: tally.dev/v1\nkind: Evil\nmetadata: {name: x}\n", API{},
			acceptedSummary{Errs: []string{`document[0].kind: unknown kind "Evil": must be one of ResourceFlavor, Topology, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, WorkloadKind`}}},
		{"offline, a kind's resource is its kind in lower case with an s", trainJob, API{},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainjobs"}}},
		{"the mapper names the resource", trainJob, API{Mapper: mapper},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainings"}}},
		{"a kind the mapper does not know is left out, the config stands", trainJob + "---\n" + workloadKind("others.example.com", "example.com", "Other"), API{Mapper: mapper},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainings"}, Unserved: []string{"others.example.com"}}},
		{"a built-in kind is refused", trainJob + "---\n" + builtIn, API{Mapper: mapper},
			acceptedSummary{Errs: []string{`WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`}}},
		{"paths that fit the CRD's schema", trainJob, API{CRDs: crds(crd("example.com", "TrainJob", "v1", fits))},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainjobs"}}},
		{"paths that do not fit the CRD's schema", trainJob, API{CRDs: crds(crd("example.com", "TrainJob", "v1", misfits))},
			acceptedSummary{Errs: []string{`WorkloadKind "trainjobs.example.com".spec.suspendPath: ".spec.suspend" is of type string in the CRD's schema, not boolean`}}},
		{"a version the CRD does not serve", trainJob, API{CRDs: crds(crd("example.com", "TrainJob", "v2", fits))},
			acceptedSummary{Errs: []string{`WorkloadKind "trainjobs.example.com".spec.version: Not found: "v1"`}}},
		{"no CRD for the kind", trainJob, API{CRDs: crds(crd("example.com", "Other", "v1", fits))},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainjobs"},
				Warnings: []string{`WorkloadKind "trainjobs.example.com": no CRD of the API server serves example.com TrainJob; its paths are checked for their syntax only`}}},
		{"the CRDs cannot be listed", trainJob, API{CRDs: func(context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
			return nil, errors.New("forbidden")
		}},
			acceptedSummary{Config: true, Kinds: []string{"TrainJob=trainjobs"},
				Warnings: []string{"WorkloadKind paths are checked for their syntax only, not against the CRDs: forbidden"}}},
		{"a built-in kind and a misfit are both reported", trainJob + "---\n" + builtIn, API{CRDs: crds(crd("example.com", "TrainJob", "v1", misfits))},
			acceptedSummary{Errs: []string{
				`WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`,
				`WorkloadKind "trainjobs.example.com".spec.suspendPath: ".spec.suspend" is of type string in the CRD's schema, not boolean`},
				Warnings: []string{`WorkloadKind "mine": no CRD of the API server serves kubeflow.org PyTorchJob; its paths are checked for their syntax only`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(Accept(context.Background(), Text(tc.config), tc.api))); diff != "" {
				t.Errorf("accepted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAcceptFiles: files are read as one config, each message starting
// with its file's name when there are several.
func TestAcceptFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(a, []byte(workloadKind("trainjobs.example.com", "example.com", "TrainJob")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(workloadKind("mine", "kubeflow.org", "PyTorchJob")), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := summarize(Accept(context.Background(), Files(a), API{})); !got.Config || len(got.Kinds) != 1 {
		t.Errorf("one file: %+v", got)
	}
	want := acceptedSummary{Errs: []string{`WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`}}
	if diff := cmp.Diff(want, summarize(Accept(context.Background(), Files(a, b), API{}))); diff != "" {
		t.Errorf("two files (-want +got):\n%s", diff)
	}
}
