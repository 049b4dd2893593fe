package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitted fails when a committed manifest differs from what `make
// manifests` writes, naming the first line that differs.
func TestCommitted(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths() {
		got, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		if line, ok := firstDifference(string(got), string(files[p])); !ok {
			t.Errorf("%s differs from what make manifests writes, from line %d on: run make manifests", p, line)
		}
	}
}

// firstDifference returns the first line (from 1) where a and b differ,
// and whether they are equal.
func firstDifference(a, b string) (int, bool) {
	if a == b {
		return 0, true
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1, false
		}
	}
	return min(len(al), len(bl)) + 1, false
}

// TestHelmTemplates checks what the chart's templates get besides the
// base's content: the release namespace everywhere the base has its own,
// and the chart's labels on every object.
func TestHelmTemplates(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for base, helm := range map[string]string{baseWebhooks: helmWebhooks, baseRBAC: helmRBAC} {
		b, h := string(files[base]), string(files[helm])
		if strings.Contains(h, helmNamespace) {
			t.Errorf("%s keeps the namespace placeholder", helm)
		}
		if n, m := strings.Count(b, baseNamespace), strings.Count(h, releaseNamespace); n != m || n == 0 {
			t.Errorf("%s names %s %d times, %s names the release namespace %d times", base, baseNamespace, n, helm, m)
		}
		if n, m := strings.Count(h, "\nkind: "), strings.Count(h, `include "tally.labels"`); n != m {
			t.Errorf("%s: %d objects, %d with the chart's labels", helm, n, m)
		}
	}
	if n := strings.Count(string(files[helmWebhooks]), `include "tally.webhookAnnotations"`); n != 2 {
		t.Errorf("%s: cert-manager's annotation on %d configurations, want 2", helmWebhooks, n)
	}
}
