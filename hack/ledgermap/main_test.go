package main

import (
	"flag"
	"go/types"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const fixtureDir = "testdata/fixture"

func loadFixture(t *testing.T) *pkgInfo {
	t.Helper()
	p, err := load(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range p.typeErrors {
		t.Errorf("type error in the fixture: %v", err)
	}
	return p
}

func TestFixtureReport(t *testing.T) {
	p := loadFixture(t)
	r, err := measure(p, "Box", []string{"Start", "helperC", "finish", "pull"})
	if err != nil {
		t.Fatal(err)
	}
	if r.files != 4 {
		t.Errorf("files = %d, want 4 (a_test.go and the build-constrained other.go are ignored)", r.files)
	}
	if r.fields != 5 {
		t.Errorf("fields = %d, want 5 (a, b, c, name, Inner)", r.fields)
	}
	if r.methods != 4 {
		t.Errorf("methods = %d, want 4 (Start, step, Name, finish)", r.methods)
	}
	if r.largest != 3 {
		t.Errorf("largest SCC = %d, want 3", r.largest)
	}
	if want := [][]string{{"a.go", "b.go", "c.go"}}; !reflect.DeepEqual(r.sccs, want) {
		t.Errorf("sccs = %v, want %v", r.sccs, want)
	}
	want := []walk{
		{from: "Start", stops: 9, files: 4, returns: 3},
		{from: "helperC", stops: 1, files: 2, returns: 0},
		{from: "finish", stops: 4, files: 4, returns: 1},
		{from: "pull", stops: 2, files: 2, returns: 1},
	}
	if !reflect.DeepEqual(r.walks, want) {
		t.Errorf("walks = %+v, want %+v", r.walks, want)
	}

	var out strings.Builder
	r.write(&out)
	wantOut := `package fixture: 4 files (tests excluded)
type Box: 5 fields, 4 methods
largest strongly connected component: 3 files
scc 3: a.go b.go c.go
walk from Start: 9 stops, 4 files, 3 returns to a file already left
walk from helperC: 1 stops, 2 files, 0 returns to a file already left
walk from finish: 4 stops, 4 files, 1 returns to a file already left
walk from pull: 2 stops, 2 files, 1 returns to a file already left
`
	if out.String() != wantOut {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), wantOut)
	}
}

func TestFixtureFileGraph(t *testing.T) {
	p := loadFixture(t)
	got := map[string][]string{}
	for from, tos := range p.fileGraph() {
		names := []string{}
		for to := range tos {
			names = append(names, p.names[to])
		}
		sort.Strings(names)
		got[p.names[from]] = names
	}
	want := map[string][]string{
		"a.go": {"b.go", "c.go", "d.go"}, // helperB, finish, Inner
		"b.go": {"a.go", "c.go"},         // Box, step; helperC
		"c.go": {"a.go", "b.go", "d.go"}, // Box, b, step; helperB; Inner's Touch, Runner
		"d.go": {},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("file graph = %v, want %v", got, want)
	}
}

func TestSCCs(t *testing.T) {
	// 0 -> 1 -> 2 -> 0 is a cycle, 2 -> 3 -> 4 -> 3 another, 5 stands alone.
	edges := [][2]int{{0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 4}, {4, 3}}
	graph := make([]map[int]bool, 6)
	for i := range graph {
		graph[i] = map[int]bool{}
	}
	for _, e := range edges {
		graph[e[0]][e[1]] = true
	}
	var got [][]int
	for _, c := range sccs(6, graph) {
		sort.Ints(c)
		got = append(got, c)
	}
	sort.Slice(got, func(i, j int) bool { return got[i][0] < got[j][0] })
	want := [][]int{{0, 1, 2}, {3, 4}, {5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sccs = %v, want %v", got, want)
	}
}

func TestFromFlag(t *testing.T) {
	var froms fromList
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Var(&froms, "from", "")
	if err := fs.Parse([]string{"-from", "onJob,apply", "-from", "admit"}); err != nil {
		t.Fatal(err)
	}
	if want := (fromList{"onJob", "apply", "admit"}); !reflect.DeepEqual(froms, want) {
		t.Errorf("froms = %v, want %v", froms, want)
	}
}

func TestUnknownStart(t *testing.T) {
	p := loadFixture(t)
	if _, err := measure(p, "Box", []string{"nosuch"}); err == nil {
		t.Error("a walk from an unknown function succeeded")
	}
	if _, err := measure(p, "Nosuch", nil); err == nil {
		t.Error("measuring an unknown type succeeded")
	}
}

// TestLedger holds the real ledger package to its bounds: a Ledger of at
// most 30 fields, and no strongly connected component of more than 10
// files.
func TestLedger(t *testing.T) {
	p, err := load("../../ledger")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.typeErrors) > 0 {
		t.Fatalf("ledger has %d type errors; first: %v", len(p.typeErrors), p.typeErrors[0])
	}
	r, err := measure(p, "Ledger", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The ledger's structure stays in rooms: a small Ledger, and no
	// tangle of files that all use each other.
	if r.fields <= 0 || r.fields > 30 {
		t.Errorf("Ledger has %d fields, want 1 to 30: put state that shares a lifecycle in a type of its own", r.fields)
	}
	if r.largest > 10 {
		t.Errorf("the ledger's largest strongly connected component of files is %d files, want at most 10: %v", r.largest, r.sccs)
	}
}

// TestSyncWalk: with syncOnly, the walk leaves out the body of finish's
// function literal, and with it the only call it follows (helperB, and
// the three calls under it).
func TestSyncWalk(t *testing.T) {
	p := loadFixture(t)
	syncOnly = true
	defer func() { syncOnly = false }()
	w, err := p.walk(p.pkg.Scope().Lookup("Box").Type().(*types.Named), "finish")
	if err != nil {
		t.Fatal(err)
	}
	if want := (walk{from: "finish", stops: 0, files: 1, returns: 0}); w != want {
		t.Errorf("walk = %+v, want %+v", w, want)
	}
}

// TestLedgerBounds holds the ledger to the bounds its rooms were built
// for: a Ledger of at most 30 fields, no strongly
// connected component of more than 10 files, and walks of one Job event
// that return to a file already left no more often than they do now.
// Lower a walk's bound when a change shortens it.
func TestLedgerBounds(t *testing.T) {
	p, err := load("../../ledger")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range p.typeErrors {
		t.Errorf("type error in the ledger: %v", err)
	}
	r, err := measure(p, "Ledger", []string{"onJob", "apply"})
	if err != nil {
		t.Fatal(err)
	}
	if r.fields > 30 {
		t.Errorf("Ledger has %d fields, more than 30: give a group of them a room", r.fields)
	}
	if r.largest > 10 {
		t.Errorf("the largest strongly connected component of the ledger's files has %d files, more than 10: %v", r.largest, r.sccs[0])
	}
	bounds := map[string]int{"onJob": 75, "apply": 43}
	for _, w := range r.walks {
		if w.returns > bounds[w.from] {
			t.Errorf("the walk from %s returns %d times to a file already left, more than %d (go run ./hack/ledgermap -from %s -trace)", w.from, w.returns, bounds[w.from], w.from)
		}
	}
}
