package ledger

import (
	"testing"
	"time"
)

func TestRestAfter(t *testing.T) {
	for _, tc := range []struct{ took, want time.Duration }{
		{0, 0},
		{time.Millisecond, 0},
		{2 * time.Millisecond, 2 * time.Millisecond},
		{40 * time.Millisecond, 40 * time.Millisecond},
		{5 * time.Second, time.Second},
	} {
		if got := restAfter(tc.took); got != tc.want {
			t.Errorf("restAfter(%s) = %s, want %s", tc.took, got, tc.want)
		}
	}
}
