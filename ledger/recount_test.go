package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// recountFixture is a synced ledger over benchConfig's cq-0 whose recount
// lists the informer's Jobs from informer, on a fake clock.
type recountFixture struct {
	l        *Ledger
	clock    *clocktesting.FakeClock
	informer map[types.UID]*batchv1.Job
}

func newRecountFixture(t *testing.T, rec record.EventRecorder) *recountFixture {
	f := &recountFixture{clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), informer: map[types.UID]*batchv1.Job{}}
	f.l = New(nil, nil, queues.NewStore(nil), rec, logr.Discard(), Options{Clock: f.clock})
	f.l.cfg = benchConfig(t, 1)
	f.l.synced = true
	f.l.namespaces["ns-cq-0"] = &nsInfo{}
	f.l.watches.list = func(context.Context) ([]*kinds.Object, error) {
		out := make([]batchv1.Job, 0, len(f.informer))
		for _, j := range f.informer {
			out = append(out, *j)
		}
		return objects(out), nil
	}
	return f
}

// objects describes Jobs as the seam's objects.
func objects(jobs []batchv1.Job) []*kinds.Object {
	out := make([]*kinds.Object, len(jobs))
	for i := range jobs {
		out[i], _ = kinds.NewRegistry().Of(&jobs[i])
	}
	return out
}

// seen puts a version of a Job in the informer and delivers it.
func (f *recountFixture) seen(job *batchv1.Job) {
	f.informer[job.UID] = job
	f.l.onJob(job)
}

// recount runs a recount's first look and returns the channel of its
// second look, which waits for the clock.
func (f *recountFixture) recount(t *testing.T) <-chan struct{} {
	t.Helper()
	done := f.l.recount(context.Background())
	if done == nil {
		t.Fatal("the recount found nothing to confirm")
	}
	return done
}

// settle moves the clock past the settle time and waits for the second
// look of a recount to finish.
func (f *recountFixture) settle(t *testing.T, done <-chan struct{}) {
	t.Helper()
	f.clock.Step(recountSettle)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the recount's second look did not run")
	}
}

// jobAt returns a copy of job at resourceVersion rv, changed by change.
func jobAt(job *batchv1.Job, rv string, change func(*batchv1.Job)) *batchv1.Job {
	j := job.DeepCopy()
	j.ResourceVersion = rv
	if change != nil {
		change(j)
	}
	if !equality.Semantic.DeepEqual(j.Spec, job.Spec) {
		j.Generation++ // as the API server does
	}
	return j
}

// markAdmitted makes a Job what an admission write makes of it.
func markAdmitted(j *batchv1.Job) {
	j.Spec.Suspend = ptr.To(false)
	j.Labels[queues.LabelState] = string(queues.StateAdmitted)
	j.Annotations[queues.AnnotationFlavors] = "main=default"
}

// markFinished makes a Job complete.
func markFinished(j *batchv1.Job) {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
}

var repairKinds = []string{missedAdmission, missedFinish, missedDelete, missedUpdate}

// repairCounts reads tally_recount_repairs_total, which every Ledger of
// the test binary shares (controller-runtime's registry): tests compare
// two readings.
func repairCounts(t *testing.T, _ *Ledger) map[string]float64 {
	got := gather(t, ctrlmetrics.Registry)
	out := map[string]float64{}
	for _, k := range repairKinds {
		out[k] = got[fmt.Sprintf("tally_recount_repairs_total{kind=%q}", k)]
	}
	return out
}

func checkRepairs(t *testing.T, l *Ledger, before map[string]float64, want map[string]float64) {
	t.Helper()
	after := repairCounts(t, l)
	for _, k := range repairKinds {
		if got := after[k] - before[k]; got != want[k] {
			t.Errorf("%s repairs: %v, want %v", k, got, want[k])
		}
	}
}

// cpuMem is n Jobs' worth of benchJob's requests in flavor default.
func cpuMem(n int64) queues.Usage {
	return queues.Usage{
		{Flavor: "default", Resource: corev1.ResourceCPU}:    flavors.Amount(n * 1000),
		{Flavor: "default", Resource: corev1.ResourceMemory}: flavors.Amount(n << 30),
	}
}

func checkUsage(t *testing.T, l *Ledger, want queues.Usage) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := l.books.usage["cq-0"]; !got.Equal(want) {
		t.Errorf("cq-0 uses %q, want %q", got.Describe(), want.Describe())
	}
}

// TestRecountRepairsMissedEvents: a recount finds, in the informer's Jobs,
// the events the ledger never got, repairs its books through the event
// handlers and counts each by kind, once the difference has outlasted the
// settle time. A difference that an event in flight resolves before then,
// and a Job without a tally.dev/state label, are not counted.
func TestRecountRepairsMissedEvents(t *testing.T) {
	f := newRecountFixture(t, &record.FakeRecorder{})
	l := f.l
	job := func(i int) *batchv1.Job { return StripJobOrDie(benchJob(i, 1, true)) }

	finishHidden := jobAt(job(0), "2", markAdmitted)
	f.seen(finishHidden)
	f.informer[finishHidden.UID] = jobAt(finishHidden, "3", markFinished)

	admissionHidden := job(1)
	f.seen(admissionHidden)
	f.informer[admissionHidden.UID] = jobAt(admissionHidden, "2", markAdmitted)

	deleteHidden := jobAt(job(2), "2", markAdmitted)
	f.seen(deleteHidden)
	delete(f.informer, deleteHidden.UID)

	updateHidden := job(3)
	f.seen(updateHidden)
	f.informer[updateHidden.UID] = jobAt(updateHidden, "2", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })

	neverSeen := job(4)
	f.informer[neverSeen.UID] = neverSeen

	inFlight := job(5)
	f.seen(inFlight)
	inFlightAdmitted := jobAt(inFlight, "2", markAdmitted)
	f.informer[inFlight.UID] = inFlightAdmitted

	unchanged := jobAt(job(6), "2", markAdmitted)
	f.seen(unchanged)

	unrecorded := jobAt(job(7), "1", func(j *batchv1.Job) {
		j.Spec.Suspend = ptr.To(false)
		delete(j.Labels, queues.LabelState)
	})
	f.informer[unrecorded.UID] = unrecorded

	checkUsage(t, l, cpuMem(3)) // finishHidden, deleteHidden, unchanged
	before := repairCounts(t, l)
	done := f.recount(t)
	// The first look repairs nothing yet.
	checkUsage(t, l, cpuMem(3))
	checkRepairs(t, l, before, nil)
	// The event in flight arrives before the second look.
	l.onJob(inFlightAdmitted)
	f.settle(t, done)

	checkRepairs(t, l, before, map[string]float64{missedFinish: 1, missedAdmission: 1, missedDelete: 1, missedUpdate: 2})
	// admissionHidden, inFlight, unchanged
	checkUsage(t, l, cpuMem(3))
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.jobs[finishHidden.UID]; e.Phase() != machine.Finished || e.Charged != nil || e.rv != "3" {
		t.Errorf("finishHidden: %s, charged %v, version %s; want finished, uncharged, 3", e.Phase(), e.Charged, e.rv)
	}
	if e := l.jobs[admissionHidden.UID]; e.Phase() != machine.Admitted || e.InTree || e.rv != "2" {
		t.Errorf("admissionHidden: %s, queued %v, version %s; want admitted, not queued, 2", e.Phase(), e.InTree, e.rv)
	}
	if e := l.jobs[deleteHidden.UID]; e != nil {
		t.Errorf("deleteHidden still has an entry: %+v", e)
	}
	if e := l.jobs[updateHidden.UID]; e.rv != "2" || e.W.Total()[corev1.ResourceCPU] != 2000 || !e.InTree {
		t.Errorf("updateHidden: version %s, cpu %v, queued %v; want 2, 2000m, queued", e.rv, e.W.Total()[corev1.ResourceCPU], e.InTree)
	}
	if e := l.jobs[neverSeen.UID]; e == nil || !e.InTree || e.Phase() != machine.Pending {
		t.Errorf("neverSeen: entry %+v, want pending in its queue", e)
	}
	if e := l.jobs[unrecorded.UID]; e != nil {
		t.Errorf("a Job without a state label was folded in: %+v", e)
	}
}

// TestRecountConfirmsOnlySettledDifferences: a difference is repaired and
// counted only if the informer's Job is the same at the second look and
// the ledger has had no event for it since the first look. A Job that
// changed in between waits for the next recount; one whose change reaches
// the ledger just after the second look listed it is not set back to the
// listed version; a Job whose admission write is in flight is left to the
// write; a delete in flight is not counted.
func TestRecountConfirmsOnlySettledDifferences(t *testing.T) {
	f := newRecountFixture(t, &record.FakeRecorder{})
	l := f.l

	// Decided by a pass: its admission write is in flight. A change
	// meanwhile does not reach the ledger.
	writing := StripJobOrDie(benchJob(0, 1, true))
	f.seen(writing)
	if writes := l.decide(); len(writes) != 1 || writes[0].e != l.jobs[writing.UID] {
		t.Fatalf("the pass decided %+v, want the admission of writing", writes)
	}
	f.informer[writing.UID] = jobAt(writing, "2", func(j *batchv1.Job) { j.Annotations["example.com/note"] = "x" })

	// Changed between the looks, and neither change delivered.
	moving := StripJobOrDie(benchJob(1, 1, true))
	f.seen(moving)
	f.informer[moving.UID] = jobAt(moving, "2", markAdmitted)

	// Changed, and changed again right after the second look listed it,
	// that change delivered before the second look takes the lock.
	racing := StripJobOrDie(benchJob(2, 1, true))
	f.seen(racing)
	f.informer[racing.UID] = jobAt(racing, "2", func(j *batchv1.Job) { j.Annotations["example.com/note"] = "x" })
	racingAdmitted := jobAt(racing, "3", markAdmitted)
	list, lists := l.watches.list, 0
	l.watches.list = func(ctx context.Context) ([]*kinds.Object, error) {
		jobs, err := list(ctx)
		if lists++; lists == 2 {
			f.seen(racingAdmitted)
		}
		return jobs, err
	}

	// Deleted, the delete event in flight.
	deleting := jobAt(StripJobOrDie(benchJob(3, 1, true)), "2", markAdmitted)
	f.seen(deleting)
	delete(f.informer, deleting.UID)

	before := repairCounts(t, l)
	done := f.recount(t)
	f.informer[moving.UID] = jobAt(moving, "3", markAdmitted)
	l.onJobDelete(deleting)
	f.settle(t, done)
	checkRepairs(t, l, before, nil)
	checkUsage(t, l, cpuMem(2)) // writing, assumed; racing

	// The next recount: moving has settled; the write is still in flight.
	done = f.recount(t)
	f.settle(t, done)
	checkRepairs(t, l, before, map[string]float64{missedAdmission: 1})
	checkUsage(t, l, cpuMem(3))
	l.mu.Lock()
	for name, uid := range map[string]types.UID{"moving": moving.UID, "racing": racing.UID} {
		if e := l.jobs[uid]; e.Phase() != machine.Admitted || e.rv != "3" {
			t.Errorf("%s: %s, version %s; want admitted, 3", name, e.Phase(), e.rv)
		}
	}
	if e := l.jobs[writing.UID]; e.Phase() != machine.Assumed || e.rv != "1" {
		t.Errorf("writing: %s, version %s; want assumed (its write still in flight) on version 1", e.Phase(), e.rv)
	}
	l.mu.Unlock()
}

// TestRecountReplayIsIdempotent: the event a recount replayed may still
// arrive; folded in twice it changes nothing: one QuotaReleased Event, no
// double release or charge.
func TestRecountReplayIsIdempotent(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	f := newRecountFixture(t, rec)
	l := f.l

	a := jobAt(StripJobOrDie(benchJob(0, 1, true)), "2", markAdmitted)
	f.seen(a)
	aFinished := jobAt(a, "3", markFinished)
	f.informer[a.UID] = aFinished

	b := StripJobOrDie(benchJob(1, 1, true))
	f.seen(b)
	bAdmitted := jobAt(b, "2", markAdmitted)
	f.informer[b.UID] = bAdmitted

	c := jobAt(StripJobOrDie(benchJob(2, 1, true)), "2", markAdmitted)
	f.seen(c)
	delete(f.informer, c.UID)

	before := repairCounts(t, l)
	f.settle(t, f.recount(t))
	checkRepairs(t, l, before, map[string]float64{missedFinish: 1, missedAdmission: 1, missedDelete: 1})
	checkUsage(t, l, cpuMem(1))

	// The events arrive after all, and once more.
	for range 2 {
		l.onJob(aFinished)
		l.onJob(bAdmitted)
		l.onJobDelete(c)
	}
	checkUsage(t, l, cpuMem(1))
	l.mu.Lock()
	if e := l.jobs[b.UID]; !e.Charged.Equal(cpuMem(1)) {
		t.Errorf("b holds %q, want one Job's worth", e.Charged.Describe())
	}
	l.mu.Unlock()
	released := 0
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, ReasonQuotaReleased) {
			released++
		}
	}
	if released != 1 {
		t.Errorf("%d QuotaReleased Events, want 1", released)
	}
	// Nothing is left to repair.
	if done := l.recount(context.Background()); done != nil {
		t.Error("a recount after the events found differences")
	}
}
