package ledger

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// podBook is the ledger's bookkeeping of pods, by workload UID (W is
// what the ledger keeps of a workload, its entry): which pods
// count for which workload, which of them are ready, which wait for their
// claim to check out, which tally's gate holds, which run beyond their
// workload's count, and the workloads that are deleted while their pods
// still run. It does no I/O and holds no lock: the ledger's lock covers it,
// and the ledger decides what a change means (pods.go, podsready.go,
// gated.go). Its invariants, which check verifies:
//
//   - counted: owner maps each counted pod to its workload, and live counts
//     them per workload; a workload with none has no live entry; no
//     counted pod is unverified.
//   - ready: readyOwner maps each pod that counts as ready to its workload,
//     and ready counts them per workload, with no zero entries.
//   - unverified: claimed maps each pod whose claim does not check out yet
//     to the workload it names, and unverified holds it under that
//     workload; no workload holds an empty set.
//   - gated: gatedOwner maps each pod tally's gate holds to the workload it
//     claims, and gated holds it under that workload; no empty sets.
//   - judging: regate holds only workloads that gating holds.
//
// parts maps each Job that is part of a workload holding quota to what it
// is part of (partNS its namespace, late.go); excess holds, by workload,
// its running pods beyond its count and since when; ghosts the deleted
// workloads whose pods still run; unready the admitted workloads that may
// still wait for their pods to be ready.
type podBook[W comparable] struct {
	live       map[types.UID]int
	owner      map[types.UID]types.UID
	ready      map[types.UID]int
	readyOwner map[types.UID]types.UID
	unverified map[types.UID]map[types.UID]podClaim
	claimed    map[types.UID]types.UID
	parts      map[types.UID]types.UID
	partNS     map[types.UID]string
	gated      map[types.UID]map[types.UID]bool
	gatedOwner map[types.UID]types.UID
	gating     map[types.UID]bool
	regate     map[types.UID]bool
	excess     map[types.UID]map[types.UID]time.Time
	ghosts     map[types.UID]W
	unready    map[W]struct{}
}

// podClaim is what a pod says of itself: the workload its LabelWorkload
// names, its namespace, and its controller owner.
type podClaim struct {
	owner, ctrl types.UID
	ns          string
	ctrlKind    string // "" when it has no controller owner
}

func newPodBook[W comparable]() podBook[W] {
	return podBook[W]{
		live: map[types.UID]int{}, owner: map[types.UID]types.UID{},
		ready: map[types.UID]int{}, readyOwner: map[types.UID]types.UID{},
		unverified: map[types.UID]map[types.UID]podClaim{}, claimed: map[types.UID]types.UID{},
		parts: map[types.UID]types.UID{}, partNS: map[types.UID]string{},
		gated: map[types.UID]map[types.UID]bool{}, gatedOwner: map[types.UID]types.UID{},
		gating: map[types.UID]bool{}, regate: map[types.UID]bool{},
		excess: map[types.UID]map[types.UID]time.Time{},
		ghosts: map[types.UID]W{}, unready: map[W]struct{}{},
	}
}

// liveOf is how many counted pods workload uid has.
func (b *podBook[W]) liveOf(uid types.UID) int { return b.live[uid] }

// ownerOf is the workload pod is counted for, if it is.
func (b *podBook[W]) ownerOf(pod types.UID) (types.UID, bool) {
	o, ok := b.owner[pod]
	return o, ok
}

// podMove is what setCounted changed: the workload a pod stopped
// counting for (left, "" for none) and whether that left it none
// (emptied), and the workload it started counting for (joined, "" for
// none) and whether it is that workload's only counted pod now (first).
type podMove struct {
	left, joined   types.UID
	emptied, first bool
}

// setCounted counts pod for workload owner when live, and stops counting
// it when not: a pod counted for another workload stops counting for it
// first (a pod's labels may change), and a pod not live stops counting
// for whichever it counted for. A pod counted no longer waits for its
// claim to check out (unverify).
func (b *podBook[W]) setCounted(pod, owner types.UID, live bool) (m podMove) {
	was, seen := b.owner[pod]
	if seen && (!live || owner != "" && was != owner) {
		delete(b.owner, pod)
		m.left, seen = was, false
		if b.live[was]--; b.live[was] <= 0 {
			delete(b.live, was)
			m.emptied = true
		}
	}
	if live && !seen {
		b.unverify(pod)
		b.owner[pod] = owner
		b.live[owner]++
		m.joined, m.first = owner, b.live[owner] == 1
	}
	return m
}

// readyOf is how many of workload uid's counted pods are ready.
func (b *podBook[W]) readyOf(uid types.UID) int { return b.ready[uid] }

// readyFor says whether pod counts as ready for workload owner.
func (b *podBook[W]) readyFor(pod, owner types.UID) bool {
	o, ok := b.readyOwner[pod]
	return ok && o == owner
}

// setReady records whether pod, of workload owner, counts as ready. It
// returns the workloads whose count of ready pods changed: lost one that
// lost it, gained one that gained it ("" for none).
func (b *podBook[W]) setReady(pod, owner types.UID, ready bool) (lost, gained types.UID) {
	was, seen := b.readyOwner[pod]
	if seen && (!ready || was != owner) {
		delete(b.readyOwner, pod)
		if b.ready[was]--; b.ready[was] <= 0 {
			delete(b.ready, was)
		}
		lost = was
	}
	if ready && (!seen || was != owner) {
		b.readyOwner[pod] = owner
		b.ready[owner]++
		gained = owner
	}
	return lost, gained
}

// doubt notes pod's claim c, which does not check out yet.
func (b *podBook[W]) doubt(pod types.UID, c podClaim) {
	if b.unverified[c.owner] == nil {
		b.unverified[c.owner] = map[types.UID]podClaim{}
	}
	b.unverified[c.owner][pod] = c
	b.claimed[pod] = c.owner
}

// unverify forgets pod's unverified claim, if it has one.
func (b *podBook[W]) unverify(pod types.UID) {
	if owner, ok := b.claimed[pod]; ok {
		delete(b.claimed, pod)
		if delete(b.unverified[owner], pod); len(b.unverified[owner]) == 0 {
			delete(b.unverified, owner)
		}
	}
}

// doubted is the unverified claims to workload owner, by pod; the caller
// may count them (setCounted) as it ranges over it.
func (b *podBook[W]) doubted(owner types.UID) map[types.UID]podClaim { return b.unverified[owner] }

// link records that Job uid, of namespace ns, is part of workload of,
// or, for of "", that it is part of nothing. When that is new and of is
// not "", it returns the workload that holds the quota of the chain from
// of (rootOf), "" otherwise.
func (b *podBook[W]) link(uid, of types.UID, ns string, known func(types.UID) bool) (root types.UID) {
	if of == "" {
		delete(b.parts, uid)
		delete(b.partNS, uid)
		return ""
	}
	if was, ok := b.parts[uid]; ok && was == of {
		return ""
	}
	b.parts[uid], b.partNS[uid] = of, ns
	return b.rootOf(of, known)
}

// partOf is what Job uid is part of, and its namespace.
func (b *podBook[W]) partOf(uid types.UID) (of types.UID, ns string, ok bool) {
	of, ok = b.parts[uid]
	return of, b.partNS[uid], ok
}

// maxPartDepth bounds the chains of parts the ledger follows: a Job of a
// JobSet of a TrainJob is two parts deep.
const maxPartDepth = 4

// rootOf follows parts from uid to the workload that holds their quota
// (one known says it knows), "" when the chain ends elsewhere or runs too
// deep.
func (b *podBook[W]) rootOf(uid types.UID, known func(types.UID) bool) types.UID {
	for range maxPartDepth {
		if known(uid) {
			return uid
		}
		next, ok := b.parts[uid]
		if !ok {
			return ""
		}
		uid = next
	}
	return ""
}

// gate notes that tally's gate holds pod, which claims workload owner.
func (b *podBook[W]) gate(pod, owner types.UID) {
	if b.gated[owner] == nil {
		b.gated[owner] = map[types.UID]bool{}
	}
	b.gated[owner][pod] = true
	b.gatedOwner[pod] = owner
}

// ungate forgets pod as gated.
func (b *podBook[W]) ungate(pod types.UID) {
	owner, ok := b.gatedOwner[pod]
	if !ok {
		return
	}
	delete(b.gatedOwner, pod)
	if delete(b.gated[owner], pod); len(b.gated[owner]) == 0 {
		delete(b.gated, owner)
	}
}

// startJudging marks the pods of workload uid, admitted for count pods,
// as being judged, and says whether a judgement starts: there is one to
// make (the gate holds some of its pods, more than count of them are
// counted, or some ran beyond its count when last judged) and none is
// under way. One under way is asked to judge again after (judged).
func (b *podBook[W]) startJudging(uid types.UID, count int64) bool {
	if len(b.gated[uid]) == 0 && int64(b.live[uid]) <= count && len(b.excess[uid]) == 0 {
		return false
	}
	if b.gating[uid] {
		b.regate[uid] = true
		return false
	}
	b.gating[uid] = true
	return true
}

// judged ends a judgement of workload uid's pods; again says another was
// asked for meanwhile, and the judgement goes on.
func (b *podBook[W]) judged(uid types.UID) (again bool) {
	again = b.regate[uid]
	delete(b.regate, uid)
	if !again {
		delete(b.gating, uid)
	}
	return again
}

// forgetExcess forgets workload uid's pods beyond its count.
func (b *podBook[W]) forgetExcess(uid types.UID) { delete(b.excess, uid) }

// noteExcess replaces workload uid's pods beyond its count with beyond
// (none forgets them), each noted since it was first found beyond, or
// since now, and returns those times; the map must not be modified.
func (b *podBook[W]) noteExcess(uid types.UID, beyond []types.UID, now time.Time) map[types.UID]time.Time {
	if len(beyond) == 0 {
		b.forgetExcess(uid)
		return nil
	}
	was := b.excess[uid]
	since := make(map[types.UID]time.Time, len(beyond))
	for _, p := range beyond {
		t, ok := was[p]
		if !ok {
			t = now
		}
		since[p] = t
	}
	b.excess[uid] = since
	return since
}

// ghost is deleted workload uid, whose pods still run; the zero W if
// none.
func (b *podBook[W]) ghost(uid types.UID) W { return b.ghosts[uid] }

// haunt keeps e, of deleted workload uid, until its pods are gone.
func (b *podBook[W]) haunt(uid types.UID, e W) { b.ghosts[uid] = e }

// lay says whether uid is a deleted workload whose pods ran (ok), and,
// once none of them is counted, forgets it and returns it (g; the zero W
// while some still run).
func (b *podBook[W]) lay(uid types.UID) (g W, ok bool) {
	g, ok = b.ghosts[uid]
	if !ok || b.live[uid] > 0 {
		var none W
		return none, ok
	}
	delete(b.ghosts, uid)
	return g, true
}

// awaitReady notes admitted workload e as one that may wait for its pods
// to be ready; doneWaiting forgets it.
func (b *podBook[W]) awaitReady(e W)  { b.unready[e] = struct{}{} }
func (b *podBook[W]) doneWaiting(e W) { delete(b.unready, e) }

// forget drops what the book keeps of deleted workload uid (e, the zero
// W if unknown) as a workload: what it is part of, and its wait for ready
// pods. Its pods are counted on until they are gone.
func (b *podBook[W]) forget(uid types.UID, e W) {
	b.link(uid, "", "", nil)
	var none W
	if e != none {
		b.doneWaiting(e)
	}
}
