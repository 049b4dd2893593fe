package ledger

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// recountSettle is how long a difference between the informer's Jobs and
// the ledger must last before a recount repairs it. The informer's store is
// updated before the ledger's handlers run, so for a moment the store may
// be ahead of the ledger with the event still on its way.
const recountSettle = 10 * time.Second

// The kinds of missed event a recount repairs, the kind label of
// tally_recount_repairs_total.
const (
	// missedAdmission: the Job runs, the ledger does not have it admitted.
	missedAdmission = "missed-admission"
	// missedFinish: the Job finished, the ledger does not have it finished.
	missedFinish = "missed-finish"
	// missedDelete: the ledger has an entry for a Job that is gone.
	missedDelete = "missed-delete"
	// missedUpdate: any other version the ledger has not seen: a waiting
	// Job it does not know, a change to one it does, a suspension.
	missedUpdate = "missed-update"
)

// suspect is a difference the first look of a recount found.
type suspect struct {
	// e is the ledger's entry, nil if it had none, and seen its
	// resourceVersion.
	e    *entry
	seen string
	// rv is the informer's resourceVersion of the Job; gone says the
	// informer did not hold it.
	rv   string
	gone bool
}

// recount repairs what the ledger missed of the informer's Jobs, then
// rebuilds usage from the Jobs' own charges (recountUsage). It costs one
// pass over the informer's Jobs and the ledger's entries.
//
// A Job differs when the ledger has not folded in the informer's version of
// it (no entry, or another resourceVersion), or when the ledger has an
// entry for a Job the informer no longer holds. The informer's store is
// updated before the handlers run, so a difference may be an event still
// in flight: this first look only notes suspects. A second look
// recountSettle later, from a goroutine so that neither the lock nor the
// pass loop waits, confirms the suspects whose Job has not changed (same
// resourceVersion, or still gone) and for which the ledger has had no event
// since, and replays each through onJob or onJobDelete. The repair thus
// takes the path the event would have, and the event, should it come after
// all, changes nothing: those handlers fold in the same object twice
// without effect. Each repair is logged and counted by kind. An event
// handled in the instant between the second look's check and its replay is
// overtaken by the older replayed version; the next recount repairs that.
//
// Not compared: Jobs without the tally.dev/state label, which late.go looks
// after (but an entry whose Job is gone counts as a missed delete whatever
// it is), and Jobs whose admission write is in flight (assumed, and still
// suspended in the informer), which the write's outcome settles.
//
// It returns a channel closed once the second look is done, nil if there
// is none.
func (l *Ledger) recount(ctx context.Context) <-chan struct{} {
	var suspects map[types.UID]suspect
	if jobs, err := l.watches.list(ctx); err != nil {
		l.log.Error(err, "listing Jobs for the recount")
	} else {
		l.mu.Lock()
		suspects = l.suspectsLocked(jobs)
		l.mu.Unlock()
	}
	l.recountUsage()
	if len(suspects) == 0 {
		return nil
	}
	done := make(chan struct{})
	t := l.opts.Clock.NewTimer(recountSettle)
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
			l.repair(ctx, suspects)
		}
	}()
	return done
}

// suspectsLocked compares the informer's Jobs with the ledger's entries.
func (l *Ledger) suspectsLocked(jobs []*kinds.Object) map[types.UID]suspect {
	out := map[types.UID]suspect{}
	known := 0
	for _, job := range jobs {
		e := l.jobs[job.Meta.UID]
		if e != nil {
			known++
		}
		if unseen(e, job) {
			s := suspect{e: e, rv: job.Meta.ResourceVersion}
			if e != nil {
				s.seen = e.rv
			}
			out[job.Meta.UID] = s
		}
	}
	if known == len(l.jobs) {
		return out
	}
	listed := make(map[types.UID]bool, len(jobs))
	for _, job := range jobs {
		listed[job.Meta.UID] = true
	}
	for uid, e := range l.jobs {
		if !listed[uid] {
			out[uid] = suspect{e: e, seen: e.rv, gone: true}
		}
	}
	return out
}

// unseen says whether the ledger has yet to fold in job, a Job the
// informer holds, whose entry is e.
func unseen(e *entry, job *kinds.Object) bool {
	switch {
	case job.Meta.Labels[queues.LabelState] == "":
		return false
	case e == nil:
		return true
	case e.Phase().Writing() && job.Suspended:
		return false
	}
	return e.rv != job.Meta.ResourceVersion
}

// missedKind names what the ledger missed of job, whose entry is e.
func missedKind(e *entry, job *kinds.Object) string {
	switch {
	case job.Finished:
		if e == nil || e.Phase() != machine.Finished {
			return missedFinish
		}
	case !job.Suspended:
		if e == nil || e.Phase().Label() != queues.StateAdmitted {
			return missedAdmission
		}
	}
	return missedUpdate
}

// repair is the second look of a recount: it replays what the ledger still
// misses of the suspects.
func (l *Ledger) repair(ctx context.Context, suspects map[types.UID]suspect) {
	jobs, err := l.watches.list(ctx)
	if err != nil {
		l.log.Error(err, "listing Jobs for the recount")
		return
	}
	listed := make(map[types.UID]*kinds.Object, len(suspects))
	for _, job := range jobs {
		if _, ok := suspects[job.Meta.UID]; ok {
			listed[job.Meta.UID] = job
		}
	}
	type replay struct {
		kind string
		job  client.Object
	}
	var replays []replay
	l.mu.Lock()
	for uid, s := range suspects {
		job, e := listed[uid], l.jobs[uid]
		if e != s.e || (e != nil && e.rv != s.seen) {
			continue // an event for it came in since the first look
		}
		switch {
		case s.gone:
			if job == nil {
				replays = append(replays, replay{missedDelete, kinds.Ref(e.W)})
			}
		case job != nil && job.Meta.ResourceVersion == s.rv && unseen(e, job):
			replays = append(replays, replay{missedKind(e, job), job.Obj})
		}
	}
	l.mu.Unlock()
	for _, r := range replays {
		l.log.Info("missed workload event repaired", "kind", r.kind, "workload", r.job.GetNamespace()+"/"+r.job.GetName(),
			"workloadKind", r.job.GetObjectKind().GroupVersionKind().Kind, "resourceVersion", r.job.GetResourceVersion())
		if r.kind == missedDelete {
			l.onJobDelete(r.job)
		} else {
			l.onJob(r.job)
		}
		l.metrics.Repaired(r.kind)
	}
}

// recountUsage rebuilds usage from the Jobs' own charges and repairs any
// drift from the incrementally kept totals, logging what it found.
func (l *Ledger) recountUsage() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fresh := map[string]queues.Usage{}
	add := func(q string, c queues.Usage) {
		u := fresh[q]
		if u == nil {
			u = queues.Usage{}
			fresh[q] = u
		}
		u.Add(c)
	}
	for _, e := range l.pods.ghosts {
		add(e.ChargedQueue, e.Charged)
	}
	for _, e := range l.jobs {
		if e.Charged != nil {
			add(e.ChargedQueue, e.Charged)
		}
		if e.Claim != nil && e.Claim.Usage != nil {
			add(e.W.Queue, e.Claim.Usage)
		}
	}
	drift := 0
	for _, q := range queues.SortedKeys(queues.UnionKeys(fresh, l.books.usage)) {
		if !fresh[q].Equal(l.books.usage[q]) {
			drift++
			l.log.Info("usage drift repaired", "clusterQueue", q, "kept", l.books.usage[q].Describe(), "recounted", fresh[q].Describe())
		}
	}
	l.books.recounted(l.cfg, fresh)
	if l.cfg != nil {
		if shares := l.metrics.ObserveShares(queues.NewSnapshot(l.cfg, queues.CloneUsages(fresh), nil)); len(shares) > 0 {
			l.log.Info("fair shares", "shares", shares)
		}
	}
	if drift > 0 {
		l.metrics.Drifted(drift)
	}
}
