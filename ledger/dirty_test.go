package ledger

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPassScope: a change in one queue has the next pass decide its whole
// cohort and nothing else; a pass after no change decides nothing; a
// namespace's new labels have it decide every queue.
func TestPassScope(t *testing.T) {
	// cq-N is in cohort-(N mod 10): cq-3 and cq-13 share cohort-3.
	l := newBenchLedger(t, 20, 200, 100)
	scope := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		in := l.passScopeLocked()
		var out []string
		for _, q := range l.cfg.QueueNames {
			if _, ok := in[q]; ok || in == nil {
				out = append(out, q)
			}
		}
		return out
	}
	l.decide()
	if got := scope(); len(got) != 0 {
		t.Errorf("after a pass and no change, the next pass decides %v, want nothing", got)
	}
	// A pending Job of cq-3 is updated.
	j := StripJobOrDie(benchJob(200+3, 20, true))
	j.ResourceVersion = "2"
	l.onJob(j)
	if got := fmt.Sprint(scope()); got != "[cq-13 cq-3]" {
		t.Errorf("after a change in cq-3, the pass decides %s, want cohort-3: [cq-13 cq-3]", got)
	}
	// A running Job of cq-14 finishes: cohort-4 is decided, its pending
	// Jobs then fit.
	done := StripJobOrDie(benchJob(14, 20, false))
	done.Labels["tally.dev/state"] = "admitted"
	done.ResourceVersion = "2"
	done.Status.Conditions = append(done.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	l.onJob(done)
	if got := fmt.Sprint(scope()); got != "[cq-14 cq-4]" {
		t.Errorf("after a Job of cq-14 finished, the pass decides %s, want cohort-4: [cq-14 cq-4]", got)
	}
	l.onNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-cq-0", Labels: map[string]string{"team": "a"}}})
	if got := len(scope()); got != 20 {
		t.Errorf("after a namespace's labels changed, the pass decides %d queues, want all 20", got)
	}
}
