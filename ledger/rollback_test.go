package ledger

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// TestRollbackAfterConflict: a Job whose admission write conflicted is not
// decided again on the version the write saw, only on a newer one; any
// other failure puts it back in its queue at once. The quota is given back
// in every case.
func TestRollbackAfterConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "job-0", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name   string
		err    error
		newer  bool // the informer delivered a newer version during the write
		queued bool
		// the version the next admission is decided on
		rv string
	}{
		{"conflict, nothing newer seen yet", conflict, false, false, "2"},
		{"conflict, a newer version already seen", conflict, true, true, "2"},
		{"other error", errors.New("connection refused"), false, true, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{})
			l.cfg = benchConfig(t, 1)
			l.synced = true
			l.namespaces["ns-cq-0"] = &nsInfo{}
			job := StripJobOrDie(benchJob(0, 1, true))
			l.onJob(job)

			writes := l.decide()
			if len(writes) != 1 || writes[0].rv != "1" {
				t.Fatalf("decided %d writes (%+v), want one admission on version 1", len(writes), writes)
			}
			e := writes[0].e
			if tc.newer {
				newer := job.DeepCopy()
				newer.ResourceVersion = "2"
				l.onJob(newer)
			}
			l.rollback(writes[0], tc.err)

			if e.Phase() != machine.Pending || e.Charged != nil {
				t.Errorf("after the rollback: %s, charged %v; want pending, uncharged", e.Phase(), e.Charged)
			}
			for fr, q := range l.books.usage["cq-0"] {
				if q != 0 {
					t.Errorf("after the rollback cq-0 still uses %v of %v", q, fr)
				}
			}
			if e.InTree != tc.queued {
				t.Fatalf("queued again = %v, want %v", e.InTree, tc.queued)
			}
			if !tc.queued {
				if again := l.decide(); len(again) != 0 {
					t.Fatalf("decided %d writes on the version that conflicted", len(again))
				}
				newer := job.DeepCopy()
				newer.ResourceVersion = "2"
				l.onJob(newer)
			}
			again := l.decide()
			if len(again) != 1 || again[0].e != e || again[0].rv != tc.rv {
				t.Fatalf("next pass: %d writes (%+v), want one admission of the same Job on version %s", len(again), again, tc.rv)
			}
		})
	}
}
