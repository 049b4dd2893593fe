package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tally.dev/tally/e2e/perf"
	"tally.dev/tally/e2e/perf/scenario"
)

// Kueue's runs are judged by the rangespec.yaml of the config the
// scenario names, and only when the scenario is that config's work.
func TestKueueRangeSpec(t *testing.T) {
	sc, err := scenario.Load(filepath.Join("..", "..", "..", "..", "bench", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := perf.KueueGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	other := *sc
	other.Classes = append([]scenario.Class(nil), sc.Classes...)
	other.Classes[0].Count++
	otherGen, err := perf.KueueGenerator(&other)
	if err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	dir := filepath.Join(tools, "configs", sc.KueueConfig)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("generator.yaml", gen)
	write("rangespec.yaml", []byte("cmd: {maxWallMs: 1_416_000}\nwlClassesMaxAvgTimeToAdmissionMs: {small: 841_000}\n"))

	spec, err := kueueRangeSpec(sc, gen, "gen.yaml", tools, "v0")
	if err != nil || spec == nil || spec.Cmd.MaxWallMs != 1416000 || spec.WlClassesMaxAvgTimeToAdmissionMs["small"] != 841000 {
		t.Errorf("the same work: %+v, %v; want the range spec", spec, err)
	}
	if spec, err := kueueRangeSpec(&other, otherGen, "gen.yaml", tools, "v0"); spec != nil || err != nil {
		t.Errorf("other work: %+v, %v; want no range spec", spec, err)
	}
	other.KueueConfig = "absent"
	if spec, err := kueueRangeSpec(&other, gen, "gen.yaml", tools, "v0"); spec != nil || err != nil {
		t.Errorf("a config Kueue lacks: %+v, %v; want no range spec", spec, err)
	}
	other.KueueConfig = ""
	if spec, err := kueueRangeSpec(&other, gen, "gen.yaml", tools, "v0"); spec != nil || err != nil {
		t.Errorf("no config named: %+v, %v; want no range spec", spec, err)
	}
}

func TestPick(t *testing.T) {
	all := []*perf.Contender{{Name: "tally"}, {Name: "tally+pods"}, {Name: "tally 50/100"}, {Name: "kueue"}, {Name: "kueue 500/1000"}}
	for _, tc := range []struct {
		only    string
		want    []string
		wantErr string
	}{
		{only: "", want: []string{"tally", "tally+pods", "tally 50/100", "kueue", "kueue 500/1000"}},
		{only: "kueue, tally", want: []string{"tally", "kueue"}},
		{only: "tally 50/100", want: []string{"tally 50/100"}},
		{only: "tally,minimalkueue", wantErr: `no contender named ["minimalkueue"]`},
	} {
		keep, err := pick(all, tc.only)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.only, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.only, err)
		}
		var got []string
		for _, i := range keep {
			got = append(got, all[i].Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: kept %q, want %q", tc.only, got, tc.want)
		}
	}
}
