package inspect

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoLedgerRuntime: the read side stands below the ledger. Neither it
// nor anything it imports reaches the ledger's runtime.
func TestNoLedgerRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "tally.dev/tally/ledger" {
			t.Errorf("inspect imports %s", dep)
		}
	}
}
