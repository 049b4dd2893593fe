package ledger

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"tally.dev/tally/queues"
)

// TestGlobalDefaultPriorityClass: a workload whose pods name no
// PriorityClass has the value of the cluster's globalDefault one, as the
// ledger's informer shows it come, change and go.
func TestGlobalDefaultPriorityClass(t *testing.T) {
	l := New(nil, nil, queues.NewStore(nil), record.NewFakeRecorder(10), logr.Discard(), Options{Registry: prometheus.NewRegistry()})
	pc := func(v int32, global bool) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "cluster-default"}, Value: v, GlobalDefault: global}
	}
	for _, step := range []struct {
		name string
		do   func()
		want int32
	}{
		{"none yet", func() {}, 0},
		{"a globalDefault class", func() { l.onPriorityClass(pc(7, true)) }, 7},
		{"its value changes", func() { l.onPriorityClass(pc(9, true)) }, 9},
		{"it is no longer the default", func() { l.onPriorityClass(pc(9, false)) }, 0},
		{"the default again, then deleted", func() { l.onPriorityClass(pc(9, true)); l.onPriorityClassDelete(pc(9, true)) }, 0},
	} {
		step.do()
		if got := l.priorityOf(priorityRef{}); got != step.want {
			t.Errorf("%s: priority %d, want %d", step.name, got, step.want)
		}
	}
	if got := l.priorityOf(priorityRef{podClass: "cluster-default"}); got != 0 {
		t.Errorf("a deleted class: priority %d, want 0", got)
	}
}
