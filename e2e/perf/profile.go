package perf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"
)

// Fetch reads a pprof endpoint's path and query (such as
// "/debug/pprof/profile?seconds=10") from a process into w.
type Fetch func(ctx context.Context, path string, w io.Writer) error

// HTTPFetch reads from a process serving net/http/pprof at baseURL.
func HTTPFetch(baseURL string) Fetch {
	return func(ctx context.Context, path string, w io.Writer) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", baseURL+path, resp.Status)
		}
		_, err = io.Copy(w, resp.Body)
		return err
	}
}

// restFetch reads from the API server c talks to: it serves the same
// profiles to a cluster admin.
func restFetch(c rest.Interface) Fetch {
	return func(ctx context.Context, path string, w io.Writer) error {
		body, err := c.Get().RequestURI(path).DoRaw(ctx)
		if err != nil {
			return err
		}
		_, err = w.Write(body)
		return err
	}
}

// CPUProfiles takes back-to-back CPU profiles of chunk seconds each from
// a process (fetch) until ctx ends, and writes them as
// <prefix>.cpu.<n>.pprof. The chunk running when ctx ends is lost. It
// returns the files written; `go tool pprof` merges them when given all at
// once. After each chunk it also writes the allocations since the process
// started to <prefix>.allocs.pprof, so the last one written covers the run
// up to its last chunk, and keeps in <prefix>.heap.pprof the heap profile
// with the most in use (as of the collection before it) of those taken
// after each chunk: what the memory held when it held the most.
func CPUProfiles(ctx context.Context, fetch Fetch, chunk int, prefix string) ([]string, error) {
	var files []string
	var most int64 = -1
	for n := 0; ctx.Err() == nil; n++ {
		path := fmt.Sprintf("%s.cpu.%d.pprof", prefix, n)
		err := save(ctx, fetch, fmt.Sprintf("/debug/pprof/profile?seconds=%d", chunk), path)
		if ctx.Err() != nil {
			_ = os.Remove(path)
			break
		}
		if err == nil {
			err = save(ctx, fetch, "/debug/pprof/allocs", prefix+".allocs.pprof")
		}
		if err == nil {
			most, err = keepLargest(ctx, fetch, prefix+".heap.pprof", most)
		}
		if err != nil && ctx.Err() == nil {
			return files, fmt.Errorf("profile: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// keepLargest reads the heap profile and writes it to path if more is in
// use in it than most; it returns the most in use so far.
func keepLargest(ctx context.Context, fetch Fetch, path string, most int64) (int64, error) {
	var buf bytes.Buffer
	if err := fetch(ctx, "/debug/pprof/heap", &buf); err != nil {
		return most, err
	}
	inuse, err := InUse(buf.Bytes())
	if err != nil || inuse <= most {
		return most, err
	}
	return inuse, os.WriteFile(path, buf.Bytes(), 0o644)
}

// InUse is the bytes in use that a heap profile counts: its samples'
// inuse_space.
func InUse(heap []byte) (int64, error) {
	p, err := profile.ParseData(heap)
	if err != nil {
		return 0, fmt.Errorf("heap profile: %w", err)
	}
	i := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "inuse_space" })
	if i < 0 {
		return 0, errors.New("heap profile: no inuse_space")
	}
	var sum int64
	for _, s := range p.Sample {
		sum += s.Value[i]
	}
	return sum, nil
}

func save(ctx context.Context, fetch Fetch, url, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fetch(ctx, url, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
