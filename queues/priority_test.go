package queues_test

import (
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"tally.dev/tally/queues"
)

// TestPriority: as Kueue chooses a workload's priority: its
// WorkloadPriorityClass, else its pods' PriorityClass, else the
// globalDefault PriorityClass (the lowest of several), else 0.
func TestPriority(t *testing.T) {
	cfg, _, errs := queues.Parse([]byte("apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	pc := func(name string, v int32, global bool) schedulingv1.PriorityClass {
		return schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v, GlobalDefault: global}
	}
	withDefault := queues.PodPriorities([]schedulingv1.PriorityClass{pc("batch", 10, false), pc("cluster-default", 7, true), pc("racing-default", 5, true)})
	plain := queues.PodPriorities([]schedulingv1.PriorityClass{pc("batch", 10, false)})
	for _, tc := range []struct {
		name                    string
		cfg                     *queues.Config
		workloadClass, podClass string
		pods                    map[string]int32
		want                    int32
	}{
		{"the WorkloadPriorityClass wins", cfg, "high", "batch", withDefault, 1000},
		{"an unknown WorkloadPriorityClass falls through to the pods'", cfg, "nope", "batch", withDefault, 10},
		{"the pods' PriorityClass", cfg, "", "batch", withDefault, 10},
		{"no class: the lowest globalDefault", cfg, "", "", withDefault, 5},
		{"no class and no globalDefault: 0", cfg, "", "", plain, 0},
		{"an unknown PriorityClass: 0", cfg, "", "gone", withDefault, 0},
		{"no config yet", nil, "high", "", withDefault, 5},
	} {
		if got := tc.cfg.Priority(tc.workloadClass, tc.podClass, tc.pods); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
