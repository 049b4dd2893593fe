package queues_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tally.dev/tally/queues"
)

// TestKueueSamples: Kueue's own sample manifests of ResourceFlavors,
// ClusterQueues, LocalQueues and the rest (testdata/kueue, copied from
// Kueue's site/static/examples, each with its path in a first comment)
// either load, or are refused only for the fields and documents of
// docs/kueue-fields.md that tally does not run, each with why. want
// lists, per file, where each refusal is.
func TestKueueSamples(t *testing.T) {
	// site/static/examples/serving-workloads/sample-hami.yaml is left
	// out: it holds a Namespace and a Deployment too, not config.
	want := map[string][]string{
		"admin/concurrent-admission-setup.yaml":          {`ClusterQueue "team-cluster-queue".spec.concurrentAdmissionPolicy`},
		"admin/minimal-cq.yaml":                          {`ClusterQueue "cluster-queue-2".spec.admissionChecksStrategy`},
		"admin/resource-flavor-empty.yaml":               nil,
		"admin/resource-flavor-taints.yaml":              nil,
		"admin/resource-flavor-tolerations.yaml":         nil,
		"admin/shared-quota-setup.yaml":                  nil,
		"admin/single-clusterqueue-setup.yaml":           nil,
		"admission-fs/admission-fair-sharing-setup.yaml": {`ClusterQueue "cluster-queue".spec.admissionScope`, `LocalQueue "default/lq-a".spec.fairSharing`, `LocalQueue "default/lq-b".spec.fairSharing`},
		"cohort/concepts-cohort-fair-sharing.yaml":       nil,
		"cohort/concepts-cohort-quota.yaml":              nil,
		"cohort/kueueviz-cohorts.yaml":                   nil,
		"dra/sample-dra-capacity-queues.yaml":            nil,
		"dra/sample-dra-counter-queues.yaml":             nil,
		"dra/sample-dra-queues.yaml":                     nil,
		"getting-started/quick-start-setup.yaml":         nil,
		"multikueue/multikueue-setup.yaml":               {`ClusterQueue "cluster-queue".spec.admissionChecksStrategy`, `AdmissionCheck "sample-multikueue"`, `MultiKueueConfig "multikueue-test"`, `MultiKueueCluster "multikueue-test-worker1"`},
		"multikueue/tas/manager-setup.yaml":              {`MultiKueueConfig "multikueue-config"`, `AdmissionCheck "multikueue-ac"`, `MultiKueueCluster "worker1"`, `MultiKueueCluster "worker2"`, `ClusterQueue "cluster-queue".spec.admissionChecksStrategy`},
		"multikueue/tas/worker-setup.yaml":               nil,
		"provisioning/provisioning-setup.yaml":           {`ClusterQueue "cluster-queue".spec.admissionChecksStrategy`, `AdmissionCheck "sample-prov"`, `ProvisioningRequestConfig "prov-test-config"`},
		"tas/sample-gpu-queues.yaml":                     nil,
		"tas/sample-queues.yaml":                         nil,
		"sample-admission-check.yaml":                    {`AdmissionCheck "prov-test"`, `ProvisioningRequestConfig "prov-test-config"`},
	}
	var files []string
	err := filepath.WalkDir("testdata/kueue", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) != len(want) {
		t.Fatalf("%d sample files (%v), want %d", len(files), err, len(want))
	}
	for _, path := range files {
		name := filepath.ToSlash(strings.TrimPrefix(path, "testdata/kueue/"))
		t.Run(name, func(t *testing.T) {
			exp, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			cfg, warnings, errs := queues.ParseFiles(path)
			if len(warnings) > 0 {
				t.Errorf("warnings: %q", warnings)
			}
			var at []string
			for _, msg := range queues.FormatErrors(errs) {
				where, why, _ := strings.Cut(msg, ": ")
				if !strings.HasPrefix(why, "tally does not ") || !strings.Contains(why, "; remove the ") {
					t.Errorf("error %q is not a refusal of a field or document tally does not run", msg)
				}
				at = append(at, where)
			}
			if diff := cmp.Diff(exp, at); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
			if (cfg == nil) != (len(exp) > 0) {
				t.Errorf("config %v with %d refusals", cfg, len(exp))
			}
		})
	}
}
