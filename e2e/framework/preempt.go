package framework

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons of a preemption.
const (
	ReasonPreempting = "Preempting"
	ReasonPreempted  = "Preempted"
)

// WaitClusterQueues waits until tally knows every ClusterQueue in names:
// a server-side dry-run of a Namespace bound to each one is accepted by
// the Namespace webhook, which denies bindings to unknown queues. It is
// how a test knows that a config it applied has been loaded.
func WaitClusterQueues(ctx context.Context, c client.Client, timeout time.Duration, names ...string) error {
	return Poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, string, error) {
		for _, q := range names {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:        "e2e-probe-" + q,
				Annotations: map[string]string{AnnotationQueue: q},
			}}
			if err := c.Create(ctx, ns, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, fmt.Sprintf("binding to %s: %v", q, err), nil
			}
		}
		return true, "", nil
	})
}

// JobPods lists the pods of Job j that still exist.
func JobPods(ctx context.Context, c client.Reader, j *batchv1.Job) ([]corev1.Pod, error) {
	var l corev1.PodList
	if err := c.List(ctx, &l, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.JobNameLabel: j.Name}); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// JobEvents lists the Events with reason on the Jobs of ns, by Job name.
func JobEvents(ctx context.Context, c client.Reader, ns, reason string) (map[string][]corev1.Event, error) {
	return WorkloadEvents(ctx, c, ns, "Job", reason)
}

// WorkloadEvents lists the Events with reason on the objects of kind in
// ns, by name, oldest first.
func WorkloadEvents(ctx context.Context, c client.Reader, ns, kind, reason string) (map[string][]corev1.Event, error) {
	var l corev1.EventList
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{"reason": reason, "involvedObject.kind": kind}); err != nil {
		return nil, err
	}
	out := map[string][]corev1.Event{}
	for _, e := range l.Items {
		out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e)
	}
	for _, es := range out {
		sort.SliceStable(es, func(i, j int) bool { return eventTime(&es[i]).Before(eventTime(&es[j])) })
	}
	return out, nil
}

// EventCount is how many times an Event was emitted, counting the repeats
// that the event recorder folded into one object.
func EventCount(e *corev1.Event) int {
	n := int(max(e.Count, 1))
	if e.Series != nil {
		n = max(n, int(e.Series.Count))
	}
	return n
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// Preempted is what a Preempted Event's message says.
type Preempted struct {
	// Preemptor is the preempting Job, as namespace/name.
	Preemptor string
	// PreemptorPriority and VictimPriority are the priorities quoted.
	PreemptorPriority, VictimPriority int32
	// Relation is the comparison quoted between them: ">", "=" or "<".
	Relation string
	// Reason is the rest: "within ClusterQueue q", "to reclaim quota lent
	// to cohort c" or "to borrow within cohort c".
	Reason string
}

var preemptedRE = regexp.MustCompile(`^Preempted by (\S+/\S+) \(priority (-?\d+) ([<>=]) (-?\d+)\) (.+)$`)

// combinedPrefix starts the message of an Event that the event recorder
// made from more than ten similar ones.
const combinedPrefix = "(combined from similar events): "

// ParsePreempted reads a Preempted Event's message, such as
// "Preempted by team-b/train (priority 1000 > 100) within ClusterQueue q".
func ParsePreempted(msg string) (Preempted, error) {
	msg = strings.TrimPrefix(msg, combinedPrefix)
	m := preemptedRE.FindStringSubmatch(msg)
	if m == nil {
		return Preempted{}, fmt.Errorf("not a Preempted message: %q", msg)
	}
	p, err1 := strconv.ParseInt(m[2], 10, 32)
	v, err2 := strconv.ParseInt(m[4], 10, 32)
	if err1 != nil || err2 != nil {
		return Preempted{}, fmt.Errorf("bad priorities in %q", msg)
	}
	return Preempted{Preemptor: m[1], PreemptorPriority: int32(p), Relation: m[3], VictimPriority: int32(v), Reason: m[5]}, nil
}

// PreemptedJob is one victim named by a Preempting Event.
type PreemptedJob struct {
	// Key is namespace/name.
	Key      string
	Priority int32
}

var (
	preemptingRE = regexp.MustCompile(`^Preempting (\d+) jobs? to fit: (.+)$`)
	victimRE     = regexp.MustCompile(`^(\S+/\S+) \(priority (-?\d+)\)$`)
)

// ParsePreempting reads a Preempting Event's message, such as
// "Preempting 2 jobs to fit: ns/a (priority 0), ns/b (priority 0)". The
// count it states must match the victims it lists.
func ParsePreempting(msg string) ([]PreemptedJob, error) {
	msg = strings.TrimPrefix(msg, combinedPrefix)
	m := preemptingRE.FindStringSubmatch(msg)
	if m == nil {
		return nil, fmt.Errorf("not a Preempting message: %q", msg)
	}
	var out []PreemptedJob
	for part := range strings.SplitSeq(m[2], ", ") {
		v := victimRE.FindStringSubmatch(part)
		if v == nil {
			return nil, fmt.Errorf("bad victim %q in %q", part, msg)
		}
		p, err := strconv.ParseInt(v[2], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad priority in %q", msg)
		}
		out = append(out, PreemptedJob{Key: v[1], Priority: int32(p)})
	}
	if n, _ := strconv.Atoi(m[1]); n != len(out) {
		return nil, fmt.Errorf("%q says %d jobs but lists %d", msg, n, len(out))
	}
	return out, nil
}

// UsageLimit bounds the summed usage of some ClusterQueues: one queue's
// nominal quota plus what it may borrow, or a cohort's total.
type UsageLimit struct {
	// Name says what is bounded, for messages ("ClusterQueue a").
	Name   string
	Queues []string
	Max    int64
}

// UsageReport is what a UsageWatch saw.
type UsageReport struct {
	// JobStates and PodStates count the states checked: one per change
	// the watches delivered.
	JobStates, PodStates int
	// MaxJobs and MaxPods are, per limit, the largest usage seen.
	MaxJobs, MaxPods map[string]int64
	// Violations describes the states that exceeded a limit (the first
	// few of them; ViolationCount counts all).
	Violations     []string
	ViolationCount int
	// Gaps counts re-lists after a watch fell too far behind; states in a
	// gap were not checked.
	Gaps int
	// Err is the first watch error, if any.
	Err error
}

// UsageWatch checks, at every change of the cluster's Jobs and of its
// pods, that the quota in use stays within limits. It counts usage in two
// ways, each from its own watch, so each checked state is one the API
// server really held:
//   - Jobs: the Jobs labelled tally.dev/state=admitted and not finished,
//     each at parallelism times its pod's request, charged to the
//     ClusterQueue of its tally.dev/cluster-queue label (what tally
//     reserved);
//   - pods: the pods that have not succeeded or failed, terminating ones
//     included, each at its request, charged to its namespace's
//     ClusterQueue (what really runs).
type UsageWatch struct {
	c        client.WithWatch
	resource corev1.ResourceName
	nsQueue  map[string]string
	limits   []UsageLimit
	sources  []*usageSource

	mu  sync.Mutex
	rep UsageReport
}

// maxViolations is how many violations a UsageReport describes.
const maxViolations = 20

// WatchUsage starts a UsageWatch of resource. nsQueue maps each namespace
// whose pods count to its ClusterQueue. It returns once both watches have
// their initial state; call Stop for the report.
func WatchUsage(ctx context.Context, c client.WithWatch, resource corev1.ResourceName, nsQueue map[string]string, limits []UsageLimit) (*UsageWatch, error) {
	u := &UsageWatch{c: c, resource: resource, nsQueue: nsQueue, limits: limits,
		rep: UsageReport{MaxJobs: map[string]int64{}, MaxPods: map[string]int64{}}}
	u.sources = []*usageSource{
		{kind: "jobs", newList: func() client.ObjectList { return &batchv1.JobList{} }, charge: u.jobCharge, max: u.rep.MaxJobs, states: &u.rep.JobStates},
		{kind: "pods", newList: func() client.ObjectList { return &corev1.PodList{} }, charge: u.podCharge, max: u.rep.MaxPods, states: &u.rep.PodStates},
	}
	for i, s := range u.sources {
		s.u, s.objs, s.totals = u, map[types.UID]charge{}, map[string]int64{}
		s.f = follower{c: c, newList: s.newList, onList: s.reset, onChange: s.change}
		if err := s.f.start(ctx); err != nil {
			for _, started := range u.sources[:i] {
				_ = started.f.stop()
			}
			return nil, fmt.Errorf("listing %s: %w", s.kind, err)
		}
	}
	return u, nil
}

// Stop ends the watches and returns the report.
func (u *UsageWatch) Stop() UsageReport {
	var errs []error
	for _, s := range u.sources {
		if err := s.f.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s watch: %w", s.kind, err))
		}
	}
	u.mu.Lock()
	if len(errs) > 0 && u.rep.Err == nil {
		u.rep.Err = errs[0]
	}
	u.mu.Unlock()
	return u.Report()
}

// Report returns what was seen so far.
func (u *UsageWatch) Report() UsageReport {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.rep
	for _, s := range u.sources {
		r.Gaps += s.f.Gaps()
	}
	r.Violations = slices.Clone(u.rep.Violations)
	r.MaxJobs, r.MaxPods = maps.Clone(u.rep.MaxJobs), maps.Clone(u.rep.MaxPods)
	return r
}

// charge is what one object uses: its queue ("" for nothing) and amount.
type charge struct {
	name   string
	queue  string
	amount int64
}

func (u *UsageWatch) jobCharge(obj runtime.Object) charge {
	j, ok := obj.(*batchv1.Job)
	if !ok || j.Labels[LabelState] != StateAdmitted || Finished(j) {
		return charge{}
	}
	n := PodRequest(&j.Spec.Template.Spec, u.resource) * int64(ptrOr(j.Spec.Parallelism, 1))
	return charge{name: j.Namespace + "/" + j.Name, queue: j.Labels[LabelQueue], amount: n}
}

func (u *UsageWatch) podCharge(obj runtime.Object) charge {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return charge{}
	}
	q := u.nsQueue[p.Namespace]
	if q == "" {
		return charge{}
	}
	name := p.Namespace + "/" + p.Name
	if p.DeletionTimestamp != nil {
		name += "(terminating)"
	}
	return charge{name: name, queue: q, amount: PodRequest(&p.Spec, u.resource)}
}

// usageSource mirrors one kind of object from a list and a watch, and
// checks the limits after each change.
type usageSource struct {
	kind    string
	newList func() client.ObjectList
	charge  func(runtime.Object) charge
	max     map[string]int64
	states  *int
	u       *UsageWatch
	f       follower

	objs   map[types.UID]charge
	totals map[string]int64
}

// reset starts over from a full list.
func (s *usageSource) reset(items []runtime.Object) {
	clear(s.objs)
	clear(s.totals)
	for _, o := range items {
		if m, err := meta.Accessor(o); err == nil {
			s.set(m.GetUID(), s.charge(o))
		}
	}
	s.check()
}

// change takes one change from the watch.
func (s *usageSource) change(o runtime.Object, deleted bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	ch := charge{}
	if !deleted {
		ch = s.charge(o)
	}
	s.set(m.GetUID(), ch)
	s.check()
}

func (s *usageSource) set(uid types.UID, ch charge) {
	old := s.objs[uid]
	if old.queue != "" {
		s.totals[old.queue] -= old.amount
	}
	if ch.queue == "" || ch.amount == 0 {
		delete(s.objs, uid)
		return
	}
	s.objs[uid] = ch
	s.totals[ch.queue] += ch.amount
}

// check tests the current state against every limit.
func (s *usageSource) check() {
	u := s.u
	u.mu.Lock()
	defer u.mu.Unlock()
	*s.states++
	for _, l := range u.limits {
		var sum int64
		for _, q := range l.Queues {
			sum += s.totals[q]
		}
		s.max[l.Name] = max(s.max[l.Name], sum)
		if sum <= l.Max {
			continue
		}
		u.rep.ViolationCount++
		if len(u.rep.Violations) >= maxViolations {
			continue
		}
		var holders []string
		for _, ch := range s.objs {
			for _, q := range l.Queues {
				if ch.queue == q {
					holders = append(holders, fmt.Sprintf("%s=%d", ch.name, ch.amount))
				}
			}
		}
		sort.Strings(holders)
		u.rep.Violations = append(u.rep.Violations, fmt.Sprintf("%s: %s use %d %s > %d by %s: %s",
			time.Now().Format("15:04:05.000"), l.Name, sum, u.resource, l.Max, s.kind, strings.Join(holders, " ")))
	}
}

// EventRecord is one emission of an Event, as a watch delivered it.
type EventRecord struct {
	At      time.Time
	Object  string // the involved object's name
	Kind    string // the involved object's kind
	Type    string
	Reason  string
	Message string
}

// EventLog watches the Events of a namespace and keeps every emission in
// the order the watch delivered them: a new Event, or a repeat that the
// event recorder folded into an existing one (its count went up).
type EventLog struct {
	f follower

	mu     sync.Mutex
	counts map[types.UID]int
	recs   []EventRecord
}

// WatchEvents starts an EventLog of namespace ns. Events that exist
// already are recorded first. Call Stop when done.
func WatchEvents(ctx context.Context, c client.WithWatch, ns string) (*EventLog, error) {
	l := &EventLog{counts: map[types.UID]int{}}
	l.f = follower{c: c, newList: func() client.ObjectList { return &corev1.EventList{} }, opts: []client.ListOption{client.InNamespace(ns)},
		onList: func(items []runtime.Object) {
			var evs []*corev1.Event
			for _, o := range items {
				if e, ok := o.(*corev1.Event); ok {
					evs = append(evs, e)
				}
			}
			sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
			for _, e := range evs {
				l.observe(e)
			}
		},
		onChange: func(o runtime.Object, deleted bool) {
			if e, ok := o.(*corev1.Event); ok && !deleted {
				l.observe(e)
			}
		}}
	if err := l.f.start(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *EventLog) observe(e *corev1.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := EventCount(e)
	now := time.Now()
	for range n - l.counts[e.UID] {
		l.recs = append(l.recs, EventRecord{At: now, Object: e.InvolvedObject.Name, Kind: e.InvolvedObject.Kind, Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	l.counts[e.UID] = max(l.counts[e.UID], n)
}

// Records returns the emissions seen so far, in order.
func (l *EventLog) Records() []EventRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// Gaps says how many times the watch had to re-list.
func (l *EventLog) Gaps() int { return l.f.Gaps() }

// Stop ends the watch and returns its first error, if any.
func (l *EventLog) Stop() error { return l.f.stop() }

// Transition is a change of a Job's spec.suspend, as one watch of all
// namespaces delivered it. Seq orders transitions across namespaces as the
// API server committed them.
type Transition struct {
	Seq int
	At  time.Time
	// Job is namespace/name.
	Job  string
	Kind ObservationKind // Unsuspended or Resuspended
}

// TransitionLog watches the Jobs of some namespaces with one watch of the
// whole cluster, so that the order of its transitions is the order in
// which the API server made the changes, whatever their namespaces.
type TransitionLog struct {
	f  follower
	ns map[string]bool

	mu        sync.Mutex
	suspended map[types.UID]bool
	log       []Transition
}

// WatchTransitions starts a TransitionLog of the Jobs in namespaces. Call
// Stop when done.
func WatchTransitions(ctx context.Context, c client.WithWatch, namespaces ...string) (*TransitionLog, error) {
	l := &TransitionLog{ns: map[string]bool{}, suspended: map[types.UID]bool{}}
	for _, n := range namespaces {
		l.ns[n] = true
	}
	l.f = jobFollower(c, l.observe)
	if err := l.f.start(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *TransitionLog) observe(j *batchv1.Job) {
	if !l.ns[j.Namespace] {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	is := Suspended(j)
	was, seen := l.suspended[j.UID]
	l.suspended[j.UID] = is
	if !seen || was == is {
		return
	}
	kind := Unsuspended
	if is {
		kind = Resuspended
	}
	l.log = append(l.log, Transition{Seq: len(l.log), At: time.Now(), Job: j.Namespace + "/" + j.Name, Kind: kind})
}

// Transitions returns the transitions seen so far, in order.
func (l *TransitionLog) Transitions() []Transition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}

// Gaps says how many times the watch had to re-list.
func (l *TransitionLog) Gaps() int { return l.f.Gaps() }

// Stop ends the watch and returns its first error, if any.
func (l *TransitionLog) Stop() error { return l.f.stop() }
