package ledger

import (
	"time"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// entry is the ledger's record of one managed workload: its place in the
// state machine (machine.Entry), and beside it what the ledger keeps of
// its object for its writes, and its own bookkeeping of Events and
// metrics.
type entry struct {
	machine.Entry
	rv string
	// generation is the object's metadata.generation, which changes
	// with its spec; defaultsGen the ledger's count of changes to pod
	// defaults when W was built (podInputs.gen).
	generation  int64
	defaultsGen uint64
	// refs are the objects its pod sets were read from (kinds.Object.Refs),
	// refsVersion their versions then.
	refs        []kinds.ObjectRef
	refsVersion string
	// paths are the JSON paths of the pod templates, by pod set in
	// W.PodSets order, and suspend that of the suspend field.
	paths   [][]string
	suspend []string
	// src is the object's content, for the patches of a kind whose pod
	// templates sit in lists (see kinds.MergePatch.SetIn); nil for a Job.
	src map[string]any
	// candidate describes it to a pass as a preemption candidate while it
	// is admitted (admittedLocked).
	candidate queues.Admitted
	// held says it is in the holding set of queue heldIn (holdLocked).
	held   bool
	heldIn string

	userAffinity string // the tally.dev/user-affinity annotation
	// placed is where its pod sets go in its flavor's topology while it
	// is charged quota (domains.follow); topologyAnn is its
	// tally.dev/topology annotation, which says so after a restart.
	placed      *placement
	topologyAnn string
	overhead    string // the tally.dev/pod-overhead annotation
	// resume is the suspend field's value that lets it run
	// (kinds.Object.SuspendValue).
	resume any
	prio   priorityRef
	// requeuedAt is when it last went back to its queue after it ran
	// (an eviction, or a late capture that suspended it), in Unix
	// nanoseconds; its admission wait counts from then, else from its
	// creation.
	requeuedAt int64
	// seen is its last view, folded again when its count of live pods
	// changes.
	seen machine.Observed
	// requeues is its tally.dev/requeues annotation; podsReady says
	// whether all its pods were ready when last counted, and
	// readyDeadline is when it is evicted unless they are
	// (waitForPodsReady, podsready.go).
	requeues      int32
	podsReady     bool
	readyDeadline time.Time

	// metrics is what the metrics keep of it.
	metrics metrics.Workload
	// labelSent is the state label the label worker last wrote, until a
	// view shows the label change: asked again before then, it does not
	// write the same label twice.
	labelSent string
	queued    bool   // the Queued event was written
	lastCode  string // the reason of the last machine.Pending/machine.Inadmissible event
}

// forgetEnded drops what e keeps for its decisions and writes once it
// has finished and holds nothing, with no pod left: none of it is read
// again, and of all the workloads a cluster keeps, most have finished.
// Its Workload keeps who it is (queues.Workload.Ended).
func (e *entry) forgetEnded() {
	if e.Phase() != machine.Finished || e.Charged != nil || e.Claim != nil || e.seen.Pods > 0 || len(e.W.PodSets) == 0 {
		return
	}
	e.W, e.generation = e.W.Ended(), 0 // built again if it is ever seen again
	e.seen.W = e.W
	e.candidate = queues.Admitted{}
	e.refs, e.src, e.placed = nil, nil, nil
}

// priorityRef is what a Job's priority is derived from: its
// WorkloadPriorityClass label, else its pod templates' PriorityClass.
type priorityRef struct {
	workloadClass string
	podClass      string
}

func lessEntry(a, b *entry) bool { return queues.Before(a.W, b.W) }

// write is one decided write, an admission or a preemption, with what it
// needs copied out from under the lock.
type write struct {
	e            *entry
	w            *queues.Workload
	rv           string
	a            queues.Assignment
	userAffinity string
	combos       [][]*flavors.Flavor
	// paths and suspend are the entry's pod template and suspend field
	// paths, and resume the suspend field's value that lets it run (see
	// entry).
	paths   [][]string
	suspend []string
	resume  any
	// src is the object's content where a pod template path crosses a
	// list (see kinds.MergePatch.SetIn).
	src map[string]any
	// preemptor is set for a preemption: the Job that waits for this one.
	preemptor *entry
	// late is set for the capture of an unrecorded running Job.
	late bool
	// stop is set for the eviction of a workload its stopped queue
	// drains (evict.go).
	stop queues.Stop
	// moved, for a preemption, is the victim's quota its preemptor's
	// claim took over.
	moved   queues.Usage
	message string
	// cause, for a preemption, is why the victim was chosen
	// (queues.Victim.Cause).
	cause string
	// waitingSince is when the admitted workload started waiting: its
	// creation, or its last return to its queue after it ran.
	waitingSince time.Time
}

// awaitedVersion is an admission write whose version the watch has yet to bring:
// that version, and when the write's answer came.
type awaitedVersion struct {
	rv uint64
	at time.Time
}
