package ledger

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/queues"
	"tally.dev/tally/queues/queuestest"
)

// The ledger benchmarks drive the in-memory side of the ledger (event
// handling and the locked part of an admission pass) with no API server:
// the writes they would trigger are not made.

func benchConfig(b testing.TB, nQueues int) *queues.Config {
	c := queuestest.New().Flavor("default")
	for i := range nQueues {
		c.ClusterQueue(fmt.Sprintf("cq-%d", i), fmt.Sprintf("cohort: cohort-%d", i%10), "namespaceSelector: {}").
			Group("cpu", "memory").Quotas("default", "cpu=10", "memory=10Gi")
	}
	cfg, _, errs := queues.Parse(c.Bytes())
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return cfg
}

func benchJob(i, nQueues int, suspended bool) *batchv1.Job {
	q := fmt.Sprintf("cq-%d", i%nQueues)
	return kindstest.Job("ns-"+q, fmt.Sprintf("job-%d", i)).UID(fmt.Sprintf("uid-%d", i)).
		ResourceVersion("1").Generation(1).Created(time.Unix(int64(i), 0)).
		Label(queues.LabelState, "pending").Label(queues.LabelQueue, q).
		Annotation(queues.AnnotationUserAffinity, "").
		Suspend(suspended).
		Request(corev1.ResourceCPU, "1").Request(corev1.ResourceMemory, "1Gi").Obj()
}

// newBenchLedger returns a synced ledger with nAdmitted running Jobs
// (spread evenly, 10 fill a queue) and then nPending pending Jobs.
func newBenchLedger(b testing.TB, nQueues, nAdmitted, nPending int) *Ledger {
	l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{})
	l.cfg = benchConfig(b, nQueues)
	l.synced = true
	for q := range nQueues {
		l.namespaces[fmt.Sprintf("ns-cq-%d", q)] = &nsInfo{}
	}
	for i := range nAdmitted {
		j := benchJob(i, nQueues, false)
		j.Labels[queues.LabelState] = string(queues.StateAdmitted)
		l.onJob(StripJobOrDie(j))
	}
	for i := range nPending {
		l.onJob(StripJobOrDie(benchJob(nAdmitted+i, nQueues, true)))
	}
	return l
}

// StripJobOrDie applies the cache transform, as the informer would.
func StripJobOrDie(job *batchv1.Job) *batchv1.Job {
	out, _ := kinds.StripJob(job)
	return out.(*batchv1.Job)
}

// BenchmarkAdmissionPass is the locked part of one admission pass over
// 100,000 pending Jobs in 1,000 ClusterQueues (10 cohorts of 100), filled
// by 10,000 admitted Jobs: none is admitted. all-changed re-decides every
// queue, as after a config change; one-queue-changed follows an update of
// one pending Job, which re-decides its cohort (100 queues, 10,000 Jobs);
// nothing-changed follows no event at all.
func BenchmarkAdmissionPass(b *testing.B) {
	const nQueues = 1000
	for _, bc := range []struct {
		name   string
		change func(l *Ledger, i int)
	}{
		{"all-changed", func(l *Ledger, _ int) {
			l.mu.Lock()
			l.passCache.touchAll()
			l.mu.Unlock()
		}},
		{"one-queue-changed", func(l *Ledger, i int) {
			j := StripJobOrDie(benchJob(10*nQueues+i%nQueues, nQueues, true))
			j.ResourceVersion = strconv.Itoa(2 + i)
			l.onJob(j)
		}},
		{"nothing-changed", func(*Ledger, int) {}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newBenchLedger(b, nQueues, 10*nQueues, 100_000)
			l.decide() // the first pass writes the Queued and machine.Pending events
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				bc.change(l, i)
				i++
				if adms := l.decide(); len(adms) != 0 {
					b.Fatalf("admitted %d", len(adms))
				}
			}
		})
	}
}

// BenchmarkJobUpdate is the cost of handling one informer update of a
// pending Job among 100,000: of its spec (a new generation), or of its
// metadata or status only.
func BenchmarkJobUpdate(b *testing.B) {
	for _, bc := range []struct {
		name    string
		newSpec bool
	}{{"spec", true}, {"status", false}} {
		b.Run(bc.name, func(b *testing.B) {
			l := newBenchLedger(b, 1000, 10_000, 100_000)
			jobs := make([]*batchv1.Job, 1000)
			for i := range jobs {
				jobs[i] = StripJobOrDie(benchJob(10_000+i*97, 1000, true))
				jobs[i].ResourceVersion = "2"
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := jobs[i%len(jobs)]
				if bc.newSpec {
					j.Generation++
				}
				l.onJob(j)
				i++
			}
		})
	}
}

// BenchmarkMemoryPerPendingJob reports the ledger's own heap per pending
// Job (the informer's copy of the stripped Job is not included).
func BenchmarkMemoryPerPendingJob(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		jobs := make([]*batchv1.Job, n)
		for i := range jobs {
			jobs[i] = StripJobOrDie(benchJob(i, 1000, true))
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := New(nil, nil, queues.NewStore(nil), &record.FakeRecorder{}, logr.Discard(), Options{})
		l.cfg = benchConfig(b, 1000)
		for _, j := range jobs {
			l.onJob(j)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/pending-job")
		runtime.KeepAlive(l)
		runtime.KeepAlive(jobs)
	}
}

// BenchmarkPodEvent is the cost of handling one informer event of a pod
// of an admitted Job, among 100,000 admitted Jobs of 4 pods each, whose
// claims check out: a pod starts, then terminates.
func BenchmarkPodEvent(b *testing.B) {
	const n, nQueues = 100_000, 1000
	l := newBenchLedger(b, nQueues, 0, 0)
	for i := range n {
		// Each runs its 4 pods: no pod is one too many, to be judged.
		j := benchJob(i, nQueues, false)
		j.Spec.Parallelism = ptr.To(int32(4))
		j.Labels[queues.LabelState] = string(queues.StateAdmitted)
		l.onJob(StripJobOrDie(j))
	}
	pods := make([]*corev1.Pod, 0, 4*n)
	for i := range n {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		for k := range 4 {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-cq-%d", i%nQueues), Name: fmt.Sprintf("p-%d-%d", i, k),
				UID: types.UID(fmt.Sprintf("pod-%d-%d", i, k)), Labels: map[string]string{queues.LabelWorkload: string(uid)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: fmt.Sprintf("job-%d", i), UID: uid, Controller: ptr.To(true)}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
	}
	for _, p := range pods {
		l.onPod(p)
	}
	if got := l.pods.liveOf("uid-0"); got != 4 {
		b.Fatalf("uid-0 has %d live pods counted, want 4", got)
	}
	done := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		d := p.DeepCopy()
		d.Status.Phase = corev1.PodSucceeded
		done[i] = d
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := i % len(pods)
		if (i/len(pods))%2 == 0 {
			l.onPod(done[k])
		} else {
			l.onPod(pods[k])
		}
		i++
	}
}
