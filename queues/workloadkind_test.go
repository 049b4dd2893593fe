package queues

import (
	"slices"
	"strings"
	"testing"
)

const trainJobKind = `apiVersion: tally.dev/v1
kind: WorkloadKind
metadata: {name: trainjobs.example.com}
spec:
  group: example.com
  version: v1
  kind: TrainJob
  suspendPath: .spec.suspend
  podSets:
  - name: worker
    templatePath: .spec.worker.template
    countPath: .spec.worker.replicas
  - name: launcher
    templatePath: .spec.roles[0].template
  finishedConditions: [Succeeded, Failed]
`

func TestParseWorkloadKind(t *testing.T) {
	cfg, _, errs := Parse([]byte(trainJobKind))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(cfg.WorkloadKinds) != 1 {
		t.Fatalf("%d kinds", len(cfg.WorkloadKinds))
	}
	k := cfg.WorkloadKinds[0]
	if k.Group != "example.com" || k.Version != "v1" || k.Kind != "TrainJob" || !slices.Equal(k.SuspendPath, []string{"spec", "suspend"}) {
		t.Errorf("%+v", k)
	}
	if !slices.Equal(k.PodSets[1].TemplatePath, []string{"spec", "roles", "0", "template"}) || k.PodSets[1].CountPath != nil {
		t.Errorf("launcher %+v", k.PodSets[1])
	}
	if !slices.Equal(k.PodSets[0].CountPath, []string{"spec", "worker", "replicas"}) || !slices.Equal(k.FinishedConditions, []string{"Succeeded", "Failed"}) {
		t.Errorf("worker %+v, finished %v", k.PodSets[0], k.FinishedConditions)
	}
}

func TestValidateWorkloadKind(t *testing.T) {
	root := `WorkloadKind "trainjobs.example.com".`
	for name, tc := range map[string]struct {
		from, to string
		want     []string
	}{
		"a Kueue apiVersion": {"tally.dev/v1", "kueue.x-k8s.io/v1beta1",
			[]string{root + `apiVersion: kind WorkloadKind is tally's own: its apiVersion is tally.dev/v1`}},
		"no group": {"  group: example.com\n", "", []string{root + "spec.group: is required"}},
		"a path without a dot": {".spec.suspend", "spec.suspend",
			[]string{root + `spec.suspendPath: "spec.suspend" must start with a dot, as in .spec.suspend`}},
		"an empty segment": {".spec.worker.template", ".spec..template",
			[]string{root + `spec.podSets[0].templatePath: ".spec..template" has an empty field name`}},
		"a bad index": {".spec.roles[0]", ".spec.roles[x]",
			[]string{root + `spec.podSets[1].templatePath: ".spec.roles[x].template" has an index "x" that is not a number`}},
		"a repeated pod set": {"name: launcher", "name: worker", []string{root + `spec.podSets[1].name: Duplicate value: "worker"`}},
		"no finished conditions": {"  finishedConditions: [Succeeded, Failed]\n", "",
			[]string{root + "spec.finishedConditions: lists the condition types that mean finished, such as Succeeded and Failed"}},
		"declared twice": {"", "---\n" + strings.Replace(trainJobKind, "name: trainjobs.example.com", "name: again", 1),
			[]string{`WorkloadKind "again".spec.kind: example.com/v1/TrainJob is declared twice: in document[0] and document[1]`}},
	} {
		t.Run(name, func(t *testing.T) {
			in := strings.Replace(trainJobKind, tc.from, tc.to, 1)
			if tc.from == "" {
				in = trainJobKind + tc.to
			}
			_, _, errs := Parse([]byte(in))
			if got := FormatErrors(errs); !slices.Equal(got, tc.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	for in, want := range map[string]string{
		".spec.suspend":          "spec/suspend",
		".spec.a[0][12].b":       "spec/a/0/12/b",
		".spec.roles[3]":         "spec/roles/3",
		"spec":                   "error: must start with a dot, as in .spec.suspend",
		".":                      "error: has an empty field name",
		".a.[0]":                 "error: has an empty field name",
		".a[]":                   `error: has an index "" that is not a number`,
		".a[0]b":                 `error: has "b" after an index`,
		".a[1":                   `error: has an index "[1" without its ]`,
		".metadata.labels[-1].x": `error: has an index "-1" that is not a number`,
	} {
		got, err := ParsePath(in)
		s := strings.Join(got, "/")
		if err != nil {
			s = "error: " + err.Error()
		}
		if s != want {
			t.Errorf("ParsePath(%q) = %s, want %s", in, s, want)
		}
	}
}
