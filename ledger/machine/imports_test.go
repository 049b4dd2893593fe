package machine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoClientLibrary: the state machine is pure. Neither it nor anything
// it imports reaches client-go, controller-runtime or prometheus.
func TestNoClientLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "github.com/prometheus/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the state machine imports %s", dep)
			}
		}
	}
}
