package perf

import "testing"

// TestLabelsFinished: the run waits for finished labels unless tally's
// arguments turn them off, in either flag form; the last one counts.
func TestLabelsFinished(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--pprof-bind-address", "127.0.0.1:0"}, true},
		{[]string{"--finished-label=off"}, false},
		{[]string{"-finished-label", "off"}, false},
		{[]string{"--finished-label=lazy"}, true},
		{[]string{"--finished-label=off", "--finished-label=eager"}, true},
	} {
		if got := labelsFinished(tc.args); got != tc.want {
			t.Errorf("labelsFinished(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
