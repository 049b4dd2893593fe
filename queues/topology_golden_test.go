package queues

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"tally.dev/tally/flavors"
)

var rewriteTopology = flag.Bool("rewrite", false, "rewrite the golden files of the topology scenarios (testdata/topology/*.out)")

// TestTopologyScenarios places the pod sets of each
// testdata/topology/*.txt on its nodes and compares where they go, drawn
// on the tree, with the .out beside it (regenerate with go test ./queues
// -run TestTopologyScenarios -rewrite, and review the diff). A scenario
// is lines of:
//
//	levels block rack kubernetes.io/hostname
//	node b1/r1/n1 nvidia.com/gpu=8 pods=110
//	podset NAME COUNT REQUESTS... [required=LEVEL|preferred=LEVEL|unconstrained] [slice=SIZE@LEVEL] [group=NAME]
//
// and # comments, which the .out repeats.
func TestTopologyScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/topology/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := runTopologyScenario(t, string(in))
			golden := strings.TrimSuffix(file, ".txt") + ".out"
			if *rewriteTopology {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to make it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file; got:\n%s", golden, got)
			}
		})
	}
}

func runTopologyScenario(t *testing.T, in string) string {
	t.Helper()
	var out strings.Builder
	topo := &Topology{Name: "scenario"}
	var ls []TopologyLeaf
	var sets []TopologyPodSet
	for n, line := range strings.Split(in, "\n") {
		if strings.HasPrefix(line, "#") {
			fmt.Fprintln(&out, line)
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(err any) { t.Fatalf("line %d %q: %v", n+1, line, err) }
		switch f[0] {
		case "levels":
			topo.Levels = f[1:]
		case "node":
			if len(f) < 2 {
				bad("node PATH RESOURCE=QUANTITY...")
			}
			ls = append(ls, TopologyLeaf{Values: strings.Split(f[1], "/"), Free: scenarioResources(t, f[2:])})
		case "podset":
			if len(f) < 3 {
				bad("podset NAME COUNT ...")
			}
			ps := TopologyPodSet{Name: f[1], Request: TopologyRequest{Mode: TopologyUnconstrained}}
			if _, err := fmt.Sscan(f[2], &ps.Count); err != nil {
				bad(err)
			}
			var reqs []string
			for _, a := range f[3:] {
				k, v, _ := strings.Cut(a, "=")
				switch k {
				case "required":
					ps.Request.Mode, ps.Request.Level = TopologyRequired, v
				case "preferred":
					ps.Request.Mode, ps.Request.Level = TopologyPreferred, v
				case "unconstrained":
					ps.Request.Mode = TopologyUnconstrained
				case "slice":
					size, level, _ := strings.Cut(v, "@")
					if _, err := fmt.Sscan(size, &ps.Request.SliceSize); err != nil {
						bad(err)
					}
					ps.Request.SliceLevel = level
				case "group":
					ps.Group = v
				default:
					reqs = append(reqs, a)
				}
			}
			ps.PerPod = scenarioResources(t, reqs)
			sets = append(sets, ps)
		default:
			bad("unknown line")
		}
	}
	got, err := NewDomains(topo, ls).PlaceAll(sets)
	var nf *NoFit
	switch {
	case errors.As(err, &nf):
		fmt.Fprintf(&out, "waits: %v\n", err)
	case err != nil:
		t.Fatal(err)
	}
	// The tree, each node with what it has free and the pods it is given.
	given := map[string][]string{}
	for i, a := range got {
		for _, d := range a.Domains {
			k := strings.Join(d.Values, "/")
			given[k] = append(given[k], fmt.Sprintf("%s×%d", sets[i].Name, d.Count))
		}
	}
	// Leaves of the same values are one, their capacity summed.
	merged := map[string]*TopologyLeaf{}
	for _, l := range ls {
		k := strings.Join(l.Values, "/")
		if m := merged[k]; m != nil {
			for r, a := range l.Free {
				m.Free[r] = m.Free[r].Add(a)
			}
			continue
		}
		merged[k] = &TopologyLeaf{Values: l.Values, Free: maps.Clone(l.Free)}
	}
	var prev []string
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		l := merged[k]
		for level, v := range l.Values {
			if level < len(prev) && prev[level] == v && slices.Equal(prev[:level], l.Values[:level]) {
				continue
			}
			line := strings.Repeat("  ", level) + v
			if level == len(l.Values)-1 {
				line = fmt.Sprintf("%-24s %-28s %s", line, describeFree(l.Free), strings.Join(given[strings.Join(l.Values, "/")], " "))
			}
			fmt.Fprintln(&out, strings.TrimRight(line, " "))
		}
		prev = l.Values
	}
	return out.String()
}

// scenarioResources reads NAME=QUANTITY fields.
func scenarioResources(t *testing.T, fields []string) flavors.Resources {
	t.Helper()
	out := flavors.Resources{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		q, err := resource.ParseQuantity(v)
		if !ok || err != nil {
			t.Fatalf("resource %q: want NAME=QUANTITY", f)
		}
		name := corev1.ResourceName(k)
		if name == corev1.ResourceCPU {
			out[name] = flavors.Amount(q.MilliValue())
		} else {
			out[name] = flavors.Amount(q.Value())
		}
	}
	return out
}

// describeFree writes a node's free resources, pods left out.
func describeFree(r flavors.Resources) string {
	var s []string
	for _, name := range r.Names() {
		if name != corev1.ResourcePods {
			s = append(s, fmt.Sprintf("%s=%s", name, r[name].Format(name)))
		}
	}
	return strings.Join(s, " ")
}
