package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger"
)

// TestServeFlagsWriteModes: the write switches default to today's
// writes, take each of their values, and name the flag and its values on
// a bad one.
func TestServeFlagsWriteModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    ledger.Options
		content string
		err     string
	}{
		{"defaults", nil, ledger.Options{FinishedLabel: "eager", Events: "all", AdmissionPatch: "merge", FinishedLabelRate: 100, Workers: 128}, "protobuf", ""},
		{"every other value",
			[]string{"--finished-label=lazy", "--finished-label-rate=20", "--events=minimal", "--admission-patch=apply", "--api-content-type=json", "--max-concurrent-writes=16"},
			ledger.Options{FinishedLabel: "lazy", Events: "minimal", AdmissionPatch: "apply", FinishedLabelRate: 20, Workers: 16}, "json", ""},
		{"off and json", []string{"--finished-label", "off", "--admission-patch", "json"},
			ledger.Options{FinishedLabel: "off", Events: "all", AdmissionPatch: "json", FinishedLabelRate: 100, Workers: 128}, "protobuf", ""},
		{"bad label", []string{"--finished-label=never"}, ledger.Options{}, "", `--finished-label: "never" is not one of eager, lazy, off`},
		{"bad events", []string{"--events=some"}, ledger.Options{}, "", `--events: "some" is not one of all, minimal`},
		{"bad patch", []string{"--admission-patch=strategic"}, ledger.Options{}, "", `--admission-patch: "strategic" is not one of merge, json, apply`},
		{"bad content type", []string{"--api-content-type=yaml"}, ledger.Options{}, "", `--api-content-type: "yaml" is not one of protobuf, json`},
		{"bad rate", []string{"--finished-label-rate=-1"}, ledger.Options{}, "", `--finished-label-rate: -1 is not a positive number`},
		{"no writers", []string{"--max-concurrent-writes=0"}, ledger.Options{}, "", `--max-concurrent-writes: 0 is less than 1`},
		{"no qps", []string{"--kube-api-qps=0"}, ledger.Options{}, "", `--kube-api-qps 0, --kube-api-burst 1000: both must be positive`},
		{"no burst", []string{"--kube-api-burst=-5"}, ledger.Options{}, "", `--kube-api-qps 500, --kube-api-burst -5: both must be positive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseServeFlags(tc.args, io.Discard)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.ledger); diff != "" {
				t.Errorf("ledger options (-want +got):\n%s", diff)
			}
			if f.apiContentType != tc.content {
				t.Errorf("content type %s, want %s", f.apiContentType, tc.content)
			}
		})
	}
}

func TestServeFlagsClientLimits(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		qps   float64
		burst int
	}{
		{nil, 500, 1000},
		{[]string{"--kube-api-qps=50", "--kube-api-burst=100"}, 50, 100},
	} {
		f, err := parseServeFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if f.qps != tc.qps || f.burst != tc.burst {
			t.Errorf("%v: qps %v burst %d, want %v and %d", tc.args, f.qps, f.burst, tc.qps, tc.burst)
		}
	}
}

// TestLoadConfigFile: --config is accepted as the ConfigMap is, and a
// config the webhook would refuse stops tally.
func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	kind := func(name, group, kind string) string {
		return "apiVersion: tally.dev/v1\nkind: WorkloadKind\nmetadata: {name: " + name + "}\nspec:\n  group: " + group + "\n  version: v1\n  kind: " + kind +
			"\n  suspendPath: .spec.suspend\n  podSets:\n  - name: worker\n    templatePath: .spec.worker.template\n  finishedConditions: [Succeeded]\n"
	}
	train := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "TrainJob"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.AddSpecific(train, train.GroupVersion().WithResource("trainings"), train.GroupVersion().WithResource("training"), meta.RESTScopeNamespace)
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(kind("trainjobs.example.com", "example.com", "TrainJob")+"---\n"+kind("others.example.com", "example.com", "Other")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(kind("mine", "kubeflow.org", "PyTorchJob")), 0o600); err != nil {
		t.Fatal(err)
	}
	ks := kinds.NewRegistry()
	cfg, err := loadConfigFile(context.Background(), ks, good, mapper, logr.Discard())
	if k := ks.For(train); err != nil || cfg == nil || k == nil || k.Resource() != "trainings" {
		t.Errorf("good file: config %v, error %v, TrainJob declared as %v", cfg, err, k)
	}
	want := "--config " + bad + `: WorkloadKind "mine".spec.kind: kubeflow.org/v1, Kind=PyTorchJob is built into tally; declare only kinds it does not know`
	if _, err := loadConfigFile(context.Background(), kinds.NewRegistry(), bad, mapper, logr.Discard()); err == nil || err.Error() != want {
		t.Errorf("bad file: error %v, want %s", err, want)
	}
}
