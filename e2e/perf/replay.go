package perf

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"tally.dev/tally/e2e/perf/ideal"
	"tally.dev/tally/e2e/perf/scenario"
	"tally.dev/tally/queues"
)

// The replay reference is a measured run (control plane, runner, tally's
// webhook, arrivals) in which
// tally's ledger never leads, and a replay of the ideal scheduler admits
// the Jobs instead, one patch per Job, sent the moment the scheduler first
// admits it. The scheduler is fed each Job when its create returns, so it
// decides on the arrivals as they actually happened. Its evictions and
// re-admissions are not replayed: they cost nothing in the ideal (which
// evicts about once per Job on the baseline), and here they would cost
// the very writes the replay leaves out. So its writes per Job are the
// create, one admission and the runner's completion; and since a Job the
// ideal evicts runs on to completion, its usage may pass 100%. It is a
// reference, not a lower bound: it admits into quota the ideal frees at
// the end of a runtime, before the completion is written, and a
// scheduler that keeps to quota (the held replay) has been faster.
//
// The held replay (Options.HeldReplay) replays, the same way, a scheduler
// that keeps to the quota the API server's Jobs hold: the ideal scheduler
// without preemption, which holds each Job's quota until the runner's
// completion write for it returns (the earliest anything can know of it),
// not for its runtime. Its usage never passes 100%, and it pays, as any
// scheduler does, for the time between a Job's admission and the runner
// seeing it, and for the completion write; it pays no watch delay for
// that completion, nor anything for deciding.

// replayHolder holds tally's leader lease through a replay run, so that
// tally serves its webhooks but its ledger never runs.
const replayHolder = "tally-bench-replay"

// holdLease takes tally's ledger lease for the whole run: tally, started
// with --leader-elect after it, waits for a lease that does not expire.
func holdLease(ctx context.Context, cs kubernetes.Interface, ns string) error {
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledgerLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(replayHolder),
			LeaseDurationSeconds: ptr.To[int32](7 * 24 * 3600),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{})
	return err
}

// replay writes the ideal scheduler's decisions as tally's user, with
// tally's field managers, so the audit log counts them as tally's writes.
type replay struct {
	cs    kubernetes.Interface
	plan  *scenario.Plan
	start time.Time

	mu     sync.Mutex
	online *ideal.Online
	// admitted marks the Jobs whose admission was handed out.
	admitted []bool
	wake     chan struct{}
	// failed counts decisions whose write failed for good.
	failed int
}

func newReplay(kubeconfig string, p *scenario.Plan, start time.Time, held bool) (*replay, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "tally-bench-replay"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	online := ideal.NewOnline(p)
	if held {
		online = ideal.NewHeldOnline(p)
	}
	return &replay{cs: cs, plan: p, start: start, online: online, admitted: make([]bool, len(p.Jobs)), wake: make(chan struct{}, 1)}, nil
}

// arrived tells the scheduler that Job i exists from now on.
func (r *replay) arrived(i int) { r.tell(i, (*ideal.Online).Arrive) }

// finished tells the held scheduler that Job i's run completed now.
func (r *replay) finished(i int) { r.tell(i, (*ideal.Online).Finish) }

// tell hands the scheduler news of Job i as of now, and wakes run.
func (r *replay) tell(i int, news func(o *ideal.Online, i int, at time.Duration)) {
	r.mu.Lock()
	news(r.online, i, time.Since(r.start))
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run advances the scheduler every millisecond and at every arrival, and
// hands each Job's first admission to a worker.
func (r *replay) run(ctx context.Context, workers int) {
	lanes := make([]chan ideal.Decision, workers)
	var wg sync.WaitGroup
	for w := range lanes {
		lanes[w] = make(chan ideal.Decision, 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range lanes[w] {
				r.write(ctx, d)
			}
		}()
	}
	defer func() {
		for _, q := range lanes {
			close(q)
		}
		wg.Wait()
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.wake:
		}
		r.mu.Lock()
		decided := r.online.Advance(time.Since(r.start))
		r.mu.Unlock()
		for _, d := range decided {
			if !d.Admit || r.admitted[d.Job] {
				continue
			}
			r.admitted[d.Job] = true
			select {
			case lanes[d.Job%workers] <- d:
			case <-ctx.Done():
				return
			}
		}
	}
}

// write admits a Job with one merge patch, as tally's admission does: it
// un-suspends it and labels it admitted. A failed write is retried a few
// times, then counted.
func (r *replay) write(ctx context.Context, d ideal.Decision) {
	j := r.plan.Jobs[d.Job]
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}},"spec":{"suspend":false}}`, labelState, stateAdmitted)
	for attempt := 0; ; attempt++ {
		_, err := r.cs.BatchV1().Jobs(j.Namespace).Patch(ctx, j.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: queues.FieldManagerAdmission})
		if err == nil || ctx.Err() != nil {
			return
		}
		if attempt == 5 {
			r.mu.Lock()
			r.failed++
			r.mu.Unlock()
			return
		}
		sleepCtx(ctx, backoff(attempt))
	}
}
