package perf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestAPIServerProfiles takes one-second profiles of a real API server,
// as `bench -profile` does over a run: each is a gzipped profile (what
// pprof serves), and so are its allocations.
func TestAPIServerProfiles(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: no control plane to profile (make test sets it)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	prefix := filepath.Join(t.TempDir(), "apiserver")
	files, err := CPUProfiles(ctx, restFetch(cs.CoreV1().RESTClient()), 1, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no profile in 2.5 s of one-second chunks")
	}
	for _, f := range append(files, prefix+".allocs.pprof") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s is not a gzipped profile: %.40q", f, b)
		}
	}
	// The chunk that ctx cut short is not kept.
	if _, err := os.Stat(fmt.Sprintf("%s.cpu.%d.pprof", prefix, len(files))); !os.IsNotExist(err) {
		t.Errorf("the chunk cut short was kept: %v", err)
	}
}
