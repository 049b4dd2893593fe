package inspect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKindAndName: KIND is a kind's name or resource in any case, Job
// when left out.
func TestKindAndName(t *testing.T) {
	for _, tc := range []struct{ in, kind, name, err string }{
		{"train", "Job", "train", ""},
		{"PyTorchJob/train", "PyTorchJob", "train", ""},
		{"jobsets/train", "JobSet", "train", ""},
		{"cronjob/train", "", "", `unknown kind "cronjob": tally queues job, `},
	} {
		k, name, err := kindAndName(nil, tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || k.GVK().Kind != tc.kind || name != tc.name {
			t.Errorf("%s: %v %s %v, want %s %s", tc.in, k, name, err, tc.kind, tc.name)
		}
	}
}

// TestReadWorkloadFile: a workload not submitted yet lands in the given
// namespace unless it names one.
func TestReadWorkloadFile(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers: [{name: c, resources: {requests: {cpu: 2}}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := readWorkloadFile(nil, job, "team")
	if err != nil || o.Meta.Namespace != "team" || o.Meta.CreationTimestamp.IsZero() || len(o.PodSets) != 1 {
		t.Fatalf("%+v, %v", o, err)
	}
	cm := filepath.Join(dir, "cm.yaml")
	if err := os.WriteFile(cm, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readWorkloadFile(nil, cm, ""); err == nil || !strings.Contains(err.Error(), "is not a kind tally queues") {
		t.Errorf("a ConfigMap: %v", err)
	}
}
