package perf

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// heapProfile is a heap profile whose samples have inuse_space values.
func heapProfile(t *testing.T, values ...int64) []byte {
	t.Helper()
	fn := &profile.Function{ID: 1, Name: "f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "inuse_space", Unit: "bytes"}},
		Function:   []*profile.Function{fn},
		Location:   []*profile.Location{loc},
	}
	for _, v := range values {
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{10 * v, v}})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The heap profile kept is the one with the most in use, whichever chunk
// it came after.
func TestKeepsTheLargestHeap(t *testing.T) {
	heaps := [][]byte{heapProfile(t, 10, 5), heapProfile(t, 30, 1), heapProfile(t, 20)}
	cpu := heapProfile(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	fetch := func(_ context.Context, path string, w io.Writer) error {
		switch {
		case strings.HasPrefix(path, "/debug/pprof/heap"):
			_, err := w.Write(heaps[n])
			if n++; n == len(heaps) {
				cancel()
			}
			return err
		case strings.HasPrefix(path, "/debug/pprof/profile"), path == "/debug/pprof/allocs":
			_, err := w.Write(cpu)
			return err
		}
		return fmt.Errorf("unexpected path %s", path)
	}
	prefix := filepath.Join(t.TempDir(), "tally")
	if _, err := CPUProfiles(ctx, fetch, 1, prefix); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prefix + ".heap.pprof")
	if err != nil {
		t.Fatal(err)
	}
	got, err := InUse(b)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(heaps) || got != 31 {
		t.Errorf("kept a heap of %d in use after %d heap profiles, want 31 (the second of 3)", got, n)
	}
}

func TestInUseRefusesOtherProfiles(t *testing.T) {
	if _, err := InUse([]byte("not a profile")); err == nil {
		t.Error("InUse read garbage as a profile")
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := InUse(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "inuse_space") {
		t.Errorf("InUse of a CPU profile: %v, want an error naming inuse_space", err)
	}
}
