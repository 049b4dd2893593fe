package queues_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// FuzzParse feeds arbitrary bytes to Parse: it must not fail internally,
// and a Config it accepts must be consistent.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/*.yaml", "../examples/*/*.yaml"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(queuestest.Stream(queuestest.Flavor("default"), queuestest.ClusterQueue("a", "  cohort: ml\n"+queuestest.OneGroup))))
	f.Add([]byte("---\n...\n--- {a: 1}\n- x\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, errs := queues.Parse(data)
		for _, e := range errs {
			if e.Type == field.ErrorTypeInternal {
				t.Fatalf("internal error: %v", e)
			}
		}
		_ = queues.FormatErrors(errs)
		if len(errs) > 0 {
			if cfg != nil {
				t.Fatalf("a Config with %d errors", len(errs))
			}
			return
		}
		checkConsistent(t, cfg)
	})
}

// checkConsistent checks what the admission core relies on in a Config.
func checkConsistent(t *testing.T, cfg *queues.Config) {
	t.Helper()
	if len(cfg.QueueNames) != len(cfg.ClusterQueues) {
		t.Fatalf("QueueNames %v for %d ClusterQueues", cfg.QueueNames, len(cfg.ClusterQueues))
	}
	for name, cq := range cfg.ClusterQueues {
		if cq.NamespaceSelector == nil {
			t.Fatalf("ClusterQueue %q: nil namespaceSelector", name)
		}
		for _, f := range cq.FlavorNames() {
			if cfg.Flavors[f] == nil {
				t.Fatalf("ClusterQueue %q names flavor %q, which the Config lacks", name, f)
			}
		}
		for _, g := range cq.ResourceGroups {
			for _, fq := range g.Flavors {
				if len(fq.Quotas) != len(g.Covered) {
					t.Fatalf("ClusterQueue %q flavor %q: quotas for %d resources, group covers %d", name, fq.Name, len(fq.Quotas), len(g.Covered))
				}
			}
		}
	}
	for name, f := range cfg.Flavors {
		if f.TopologyName != "" && cfg.Topologies[f.TopologyName] == nil {
			t.Fatalf("flavor %q names Topology %q, which the Config lacks", name, f.TopologyName)
		}
	}
	for name, topo := range cfg.Topologies {
		if len(topo.Levels) == 0 {
			t.Fatalf("Topology %q has no levels", name)
		}
	}
	for lq, cq := range cfg.LocalQueues {
		if cfg.ClusterQueues[cq] == nil {
			t.Fatalf("LocalQueue %q names ClusterQueue %q, which the Config lacks", lq, cq)
		}
	}
}

func TestParseTestdata(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, p := range paths {
		cfg, warnings, errs := queues.ParseFiles(p)
		if len(errs) > 0 || len(warnings) > 0 {
			t.Errorf("%s: errors %v, warnings %v", p, queues.FormatErrors(errs), warnings)
			continue
		}
		checkConsistent(t, cfg)
	}
}
