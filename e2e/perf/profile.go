package perf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
)

// CPUProfiles takes back-to-back CPU profiles of chunk seconds each from
// the pprof endpoint at baseURL (a process serving net/http/pprof) until
// ctx ends, and writes them as <prefix>.cpu.<n>.pprof. The chunk running when
// ctx ends is lost. It returns the files written; `go tool pprof` merges
// them when given all at once. After each chunk it also writes the
// allocations since the process started to <prefix>.allocs.pprof, so
// the last one written covers the run up to its last chunk.
func CPUProfiles(ctx context.Context, baseURL string, chunk int, prefix string) ([]string, error) {
	var files []string
	for n := 0; ctx.Err() == nil; n++ {
		path := fmt.Sprintf("%s.cpu.%d.pprof", prefix, n)
		err := profile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", baseURL, chunk), path)
		if ctx.Err() != nil {
			_ = os.Remove(path)
			break
		}
		if err == nil {
			err = profile(ctx, baseURL+"/debug/pprof/allocs", prefix+".allocs.pprof")
		}
		if err != nil && ctx.Err() == nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

func profile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile: %w", err)
	}
	return f.Close()
}
