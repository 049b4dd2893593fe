package inspect

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// The Event reasons Explain reads, as the ledger records them.
const (
	ReasonQueued    = "Queued"
	ReasonPreempted = "Preempted"
)

// ExplainInput is what Explain reads: the config, the managed workloads
// the caller can see, and the one to explain.
type ExplainInput struct {
	Config *queues.Config
	// Workloads are the managed workloads listed, in every namespace when
	// AllNamespaces, else in the target's only.
	Workloads     []*kinds.Object
	AllNamespaces bool
	// ClaimTemplates are the ResourceClaimTemplates the workloads' claims
	// are charged from.
	ClaimTemplates ClaimTemplates
	// Target is the workload explained; New says it is not submitted yet
	// (tally explain -f), so it is placed as if created at Now.
	Target *kinds.Object
	New    bool
	// Queue is the target's ClusterQueue when New (its route), and
	// LocalQueue the LocalQueue it names, if any.
	Queue, LocalQueue string
	// Events are the target's Events, newest last.
	Events []corev1.Event
	// PriorityClasses maps a PriorityClass name to its value, and "" to
	// the globalDefault one's (queues.PodPriorities).
	PriorityClasses map[string]int32
	Now             time.Time
	// Unhostable are the flavors no Ready node can host and no NodePool
	// can make (ReadUnhostable).
	Unhostable []UnhostableFlavor
	// Nodes are the cluster's nodes, for the topologies' domains; nil
	// when they could not be read, and then a workload is judged by
	// quota alone.
	Nodes []corev1.Node
	// BoundPods are the pods bound to nodes that have not ended
	// (ReadBoundPods), for what they use of their nodes; nil when they
	// could not be read, and then the domains count only what the running
	// workloads' placements hold.
	BoundPods []corev1.Pod
	// Devices are the ResourceSlices, DeviceClasses and ResourceClaims
	// whose devices count in the topologies' domains (ReadDevices); nil
	// when they could not be read, or the config maps no DeviceClass.
	Devices *Devices
	// NodePools are Karpenter's NodePools (NodePools): for which
	// topology levels they can make, and the room they can still make
	// for a flavor placed at the node level.
	NodePools []queues.NodePool
}

// Explanation is what `tally explain` says of one workload.
type Explanation struct {
	Workload     string `json:"workload"`
	State        string `json:"state"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	Cohort       string `json:"cohort,omitempty"`
	LocalQueue   string `json:"localQueue,omitempty"`
	Priority     int32  `json:"priority"`
	// Position is 1-based among the pending workloads of the ClusterQueue,
	// in admission order; NamespacePosition among those of its namespace
	// in that queue.
	Position          *Place `json:"position,omitempty"`
	NamespacePosition *Place `json:"namespacePosition,omitempty"`
	Needs             string `json:"needs,omitempty"`
	// Flavors is where it runs (admitted) or would run if admitted now.
	Flavors string `json:"flavors,omitempty"`
	// Topology is where in its flavor's topology its pod sets run
	// (admitted) or would run if admitted now: each pod set's domains
	// and pod counts.
	Topology []PodSetDomains `json:"topology,omitempty"`
	// Room is, for a workload that waits for room in a topology, level
	// by level, the domains that hold the most pods of its first pod
	// set, and how many each holds.
	Room []queues.LevelRoom `json:"room,omitempty"`
	// Reason is the admission decision now, as its Events word it.
	Reason string `json:"reason,omitempty"`
	// Free is, per flavor and resource of its queue, what it needs
	// against what is free.
	Free []FreeCell `json:"free,omitempty"`
	// Ahead are the workloads admitted before it; AheadHidden counts
	// those in namespaces the caller cannot see, when it cannot.
	Ahead       []WorkloadRef `json:"ahead,omitempty"`
	AheadHidden int           `json:"aheadHidden,omitempty"`
	// MustFinish are the running workloads whose end the estimate waits
	// for.
	MustFinish   []WorkloadRef `json:"mustFinish,omitempty"`
	WouldPreempt []WorkloadRef `json:"wouldPreempt,omitempty"`
	PreemptedBy  []string      `json:"preemptedBy,omitempty"`
	Estimate     *Estimate     `json:"estimate,omitempty"`
	Notes        []string      `json:"notes,omitempty"`
}

// PodSetDomains is where a pod set's pods go in a topology.
type PodSetDomains struct {
	PodSet  string               `json:"podSet"`
	Domains []queues.DomainCount `json:"domains"`
}

// podSetDomains is sets, assigned to w's pod sets, as Explanation has them.
func podSetDomains(w *queues.Workload, sets []queues.TopologyAssignment) []PodSetDomains {
	var out []PodSetDomains
	for i, ta := range sets {
		if i < len(w.PodSets) && len(ta.Domains) > 0 {
			out = append(out, PodSetDomains{PodSet: w.PodSets[i].Name, Domains: ta.Domains})
		}
	}
	return out
}

// Place is a 1-based position among Of.
type Place struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// FreeCell is one flavor and resource of a ClusterQueue.
type FreeCell struct {
	Flavor   string `json:"flavor"`
	Resource string `json:"resource"`
	Needs    string `json:"needs"`
	Used     string `json:"used"`
	Nominal  string `json:"nominal"`
	// Available is what the queue may still take: up to its nominal
	// quota plus what its cohort lends, within its borrowing limit.
	Available string `json:"available"`
}

// WorkloadRef names a workload.
type WorkloadRef struct {
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	// EndsAt is, for a running workload, when the estimate expects it to
	// end.
	EndsAt *time.Time `json:"endsAt,omitempty"`
}

// Estimate is when the workload is expected to start, and how that was
// reckoned.
type Estimate struct {
	Start  time.Time `json:"start"`
	In     string    `json:"in"`
	Method string    `json:"method"`
}

// explained is one workload as Explain sees it.
type explained struct {
	o  *kinds.Object
	w  *queues.Workload
	e  machine.Entry
	at time.Time // admitted at
}

// maxSimulated bounds the steps of the start-time simulation.
const maxSimulated = 20000

// Explain rebuilds, with the ledger's own rules, where a workload stands:
// its state and queue, its position among the pending workloads of its
// ClusterQueue and namespace, what it needs against what is free, who is
// ahead of it, whom it would preempt or who preempted it, and when it is
// expected to start. The estimate replays admission passes (queues.Decide)
// forward in time: each running workload ends at its admission plus the
// median run time of the finished workloads of its queue, and each
// workload admitted on the way runs that long too. It ignores preemption
// and workloads not submitted yet.
func Explain(in ExplainInput) Explanation {
	cfg := permissive(in.Config)
	prio := func(o *kinds.Object) int32 {
		return cfg.Priority(cmp.Or(o.Meta.Labels[queues.LabelPriorityClass], o.Meta.Labels[queues.LabelKueuePriorityClass]), o.PriorityClassName(), in.PriorityClasses)
	}
	var all []*explained
	var target *explained
	for _, o := range in.Workloads {
		if in.Target != nil && !in.New && o.Meta.UID == in.Target.Meta.UID {
			continue
		}
		if q := o.Meta.Labels[queues.LabelQueue]; q != "" && o.Meta.Labels[queues.LabelState] != "" {
			all = append(all, read(cfg, o, q, prio(o), in.ClaimTemplates))
		}
	}
	out := Explanation{Workload: in.Target.Describe(), Priority: prio(in.Target), LocalQueue: in.LocalQueue}
	q := in.Queue
	if !in.New {
		q = in.Target.Meta.Labels[queues.LabelQueue]
		if q == "" || in.Target.Meta.Labels[queues.LabelState] == "" {
			out.State = "unmanaged"
			out.Notes = append(out.Notes, "tally does not queue it: it has no "+queues.LabelQueue+" label (created outside a managed namespace, or part of another workload)")
			return out
		}
	}
	target = read(cfg, in.Target, q, out.Priority, in.ClaimTemplates)
	if in.New {
		// Ordered as if created now (read made it a copy of its own,
		// sealed again for the order Before reads).
		target.w.Created, target.w.Evicted = in.Now, time.Time{}
		target.w.Seal()
		// Not submitted yet: it would wait, holding nothing.
		target.e = machine.FromLabels(target.w, queues.StatePending, "", nil)
	}
	all = append(all, target)
	out.ClusterQueue = q
	cq := cfg.ClusterQueues[q]
	if cq != nil {
		out.Cohort = cq.Cohort
	}
	out.State = string(target.e.Phase().Label())
	if target.e.Phase() == machine.Evicting {
		out.State = "evicting (preempted or suspended; its pods are going)"
	}
	out.Notes = append(out.Notes, podsReadyNotes(cfg, target.w, in.Target.Meta.Annotations, in.Now)...)
	out.Notes = append(out.Notes, unhostableNotes(cfg.ClusterQueues[q], in.Unhostable)...)
	out.Notes = append(out.Notes, unmadeLevelNotes(cfg, cfg.ClusterQueues[q], in.NodePools)...)
	out.Needs = target.w.Total().String()
	if f := in.Target.Meta.Annotations[queues.AnnotationFlavors]; f != "" && target.e.Phase() == machine.Admitted {
		out.Flavors = f
		if _, sets, err := queues.ParseTopologyAnnotation(cfg, target.w, in.Target.Meta.Annotations[queues.AnnotationTopology]); err == nil {
			out.Topology = podSetDomains(target.w, sets)
		}
	}
	for _, ev := range in.Events {
		if ev.Reason == ReasonPreempted {
			out.PreemptedBy = append(out.PreemptedBy, ev.Message)
		}
	}

	// The books as the ledger keeps them.
	usage := map[string]queues.Usage{}
	lists := map[string][]*queues.Workload{}
	admittedByQueue := map[string][]*queues.Admitted{}
	var running []*explained
	for _, x := range all {
		if x.e.Charged != nil {
			u := usage[x.e.ChargedQueue]
			if u == nil {
				u = queues.Usage{}
				usage[x.e.ChargedQueue] = u
			}
			u.Add(x.e.Charged)
			running = append(running, x)
			if x.e.Phase() == machine.Admitted {
				admittedByQueue[x.e.ChargedQueue] = append(admittedByQueue[x.e.ChargedQueue], &queues.Admitted{W: x.w, Usage: x.e.Charged, AdmittedAt: x.at})
			}
		}
		if x.e.Phase() == machine.Pending {
			lists[x.w.Queue] = append(lists[x.w.Queue], x.w)
		}
	}
	domains, placements, problems := topologyDomains(cfg, in.Nodes, in.NodePools, in.BoundPods, in.Devices, running)
	for _, p := range problems {
		if _, needs := target.w.Total()[p.Resource]; needs {
			out.Notes = append(out.Notes, "Warning: "+p.Message())
		}
	}
	for _, list := range admittedByQueue {
		for _, a := range list {
			a.Placement = placements[a.W]
		}
	}
	for _, l := range lists {
		slices.SortFunc(l, func(a, b *queues.Workload) int {
			if queues.Before(a, b) {
				return -1
			}
			return 1
		})
	}
	if cq == nil {
		out.Notes = append(out.Notes, fmt.Sprintf("ClusterQueue %q is not in the config in force", q))
		return out
	}
	if target.e.Phase() != machine.Pending {
		if target.e.Phase() == machine.Inadmissible {
			_, v := queues.NewSnapshot(cfg, nil, nil).Assign(target.w)
			out.Reason = v.Message()
		}
		return out
	}

	// Position, and who is ahead.
	list := lists[q]
	i := slices.Index(list, target.w)
	out.Position = &Place{Index: i + 1, Of: len(list)}
	ns, nsIndex, nsCount := in.Target.Meta.Namespace, 0, 0
	for j, w := range list {
		if w.Namespace != ns {
			if j < i && !in.AllNamespaces {
				out.AheadHidden++
			}
			continue
		}
		nsCount++
		if j <= i {
			nsIndex = nsCount
		}
	}
	out.NamespacePosition = &Place{Index: nsIndex, Of: nsCount}
	for _, w := range list[:i] {
		out.Ahead = append(out.Ahead, WorkloadRef{Name: w.Key(), Priority: w.Priority})
	}
	if !in.AllNamespaces {
		out.Position = nil
		out.Notes = append(out.Notes, "you cannot list workloads in other namespaces: the position, the workloads ahead and the estimate count only those of namespace "+ns)
		if m := lastEvent(in.Events, ReasonQueued); m != "" {
			out.Notes = append(out.Notes, "tally's last Queued Event says: "+m)
		}
	}

	if st := cfg.StopOf(target.w); st.Stopped() {
		out.Reason = st.Held().Message()
		out.Notes = append(out.Notes, "held: nothing is admitted from its queue until its stopPolicy is None, so there is no estimate")
		return out
	}

	// What it needs against what is free, and the decision now.
	snap := queues.NewSnapshot(cfg, queues.CloneUsages(usage), nil)
	snap.Domains = domains
	a, v := snap.Assign(target.w)
	out.Reason = v.Message()
	if v.Kind == queues.Fits {
		out.Reason = "fits now: the next admission pass admits it unless a workload ahead of it takes the room"
		out.Flavors = a.Annotation(target.w)
		out.Topology = podSetDomains(target.w, a.Topology)
	}
	out.Room = topologyRoom(cfg, cq, domains, target.w, v)
	out.Free = freeCells(snap, cq, target.w)
	if v.Kind == queues.Never {
		return out
	}
	dry := queues.NewSnapshot(cfg, queues.CloneUsages(usage), nil)
	dry.Admitted, dry.Domains = admittedByQueue, domains
	for _, p := range queues.Decide(dry, cloneLists(lists), ignore).Preemptions {
		if p.Preemptor == target.w {
			for _, victim := range p.Victims {
				out.WouldPreempt = append(out.WouldPreempt, WorkloadRef{Name: victim.W.Key(), Priority: victim.W.Priority})
			}
		}
	}

	// The start, replayed forward.
	runtimes, method := runTimes(all)
	if runtimes == nil {
		out.Notes = append(out.Notes, "no estimate: no finished workload with an admission time and an end was seen")
		return out
	}
	var overdue int
	out.Estimate, out.MustFinish, overdue = simulate(cfg, usage, lists, running, target.w, runtimes, in.Now)
	if out.Estimate != nil {
		out.Estimate.Method = method
		if overdue > 0 {
			out.Estimate.Method += fmt.Sprintf("; %d running workload(s) have run longer than that already and are taken to end now, so the start may well be later", overdue)
		}
	}
	return out
}

// topologyDomains are the topologies' domains of cfg's flavors, from
// nodes, less what the pods bound to them use, with the placements the
// running workloads hold (their AnnotationTopology, returned by
// Workload), and the mapped DeviceClasses whose devices they do not all
// count; nil without nodes (they could not be read).
func topologyDomains(cfg *queues.Config, nodes []corev1.Node, pools []queues.NodePool, pods []corev1.Pod, devices *Devices, running []*explained) (map[string]*queues.Domains, map[*queues.Workload]*queues.Placement, []queues.DeviceClassProblem) {
	if nodes == nil {
		return nil, nil, nil
	}
	placements := map[*queues.Workload]*queues.Placement{}
	f := queues.NewFlavorDomains()
	for i := range nodes {
		f.SetNode(&nodes[i])
	}
	for _, p := range pools {
		f.SetNodePool(p)
	}
	f.Configure(cfg)
	devices.tell(f)
	for _, x := range running {
		fl, sets, err := queues.ParseTopologyAnnotation(cfg, x.w, x.o.Meta.Annotations[queues.AnnotationTopology])
		if err != nil {
			continue
		}
		p := queues.Placement{Flavor: fl, Sets: sets}
		for _, ps := range x.w.PodSets {
			p.PerPod = append(p.PerPod, ps.Requests)
		}
		f.Hold(queues.Owner{Namespace: x.w.Namespace, UID: string(x.w.UID)}, &p)
		placements[x.w] = &p
	}
	for i := range pods {
		if key, node, requests, owner := queues.BoundPod(&pods[i]); node != "" {
			f.SetPod(key, node, requests, owner)
		}
	}
	return f.Trees, placements, f.DeviceClassProblems()
}

// topologyRoom is, for w waiting for room in the topology of a flavor
// of cq (verdict v), level by level, the domains of that flavor that
// hold the most pods of its first pod set.
func topologyRoom(cfg *queues.Config, cq *queues.ClusterQueue, domains map[string]*queues.Domains, w *queues.Workload, v queues.Verdict) []queues.LevelRoom {
	if domains == nil || !strings.HasPrefix(v.Code, "topology/") || len(w.PodSets) == 0 {
		return nil
	}
	d := domains[strings.TrimPrefix(v.Code, "topology/")]
	if d == nil {
		return nil
	}
	return d.Room(w.PodSets[0].Requests, 3)
}

// read folds o, of queue q and priority p, its claims charged from t,
// as the ledger would.
func read(cfg *queues.Config, o *kinds.Object, q string, p int32, t ClaimTemplates) *explained {
	e := statusEntry(cfg, o, q, t.defaults(cfg, o.Meta.Namespace))
	w := *e.W
	w.Priority = p
	e.W = &w
	x := &explained{o: o, w: e.W, e: e}
	x.at, _ = time.Parse(time.RFC3339, o.Meta.Annotations[queues.AnnotationAdmittedAt])
	return x
}

// permissive is cfg with every ClusterQueue selecting every namespace:
// the workloads it reads were queued already, so their namespaces were
// selected, and the caller may not be able to read namespace labels.
func permissive(cfg *queues.Config) *queues.Config {
	out := &queues.Config{Flavors: cfg.Flavors, ClusterQueues: map[string]*queues.ClusterQueue{}, QueueNames: cfg.QueueNames,
		Cohorts: cfg.Cohorts, CohortSpecs: cfg.CohortSpecs, LocalQueues: cfg.LocalQueues, LocalQueueStops: cfg.LocalQueueStops, PriorityClasses: cfg.PriorityClasses, WorkloadKinds: cfg.WorkloadKinds,
		PodsReady: cfg.PodsReady, DeviceClasses: cfg.DeviceClasses, Topologies: cfg.Topologies}
	for name, cq := range cfg.ClusterQueues {
		c := *cq
		c.NamespaceSelector = labels.Everything()
		out.ClusterQueues[name] = &c
	}
	return out
}

func cloneLists(lists map[string][]*queues.Workload) map[string][]*queues.Workload {
	out := make(map[string][]*queues.Workload, len(lists))
	for q, l := range lists {
		out[q] = slices.Clone(l)
	}
	return out
}

// freeCells lists, for each flavor and resource of cq that w needs, what
// it needs, what the queue uses, its nominal quota and what it may take.
func freeCells(s *queues.Snapshot, cq *queues.ClusterQueue, w *queues.Workload) []FreeCell {
	total := w.Total()
	var out []FreeCell
	for _, g := range cq.ResourceGroups {
		for _, f := range g.Flavors {
			for _, r := range g.Covered {
				need, ok := total[r]
				if !ok {
					continue
				}
				fr := queues.FlavorResource{Flavor: f.Name, Resource: r}
				q, _ := s.Config.QuotaOf(cq.Name, fr)
				out = append(out, FreeCell{Flavor: f.Name, Resource: string(r), Needs: need.Format(r),
					Used: s.Usage[cq.Name][fr].Format(r), Nominal: q.Nominal.Format(r), Available: s.Available(cq, fr).Format(r)})
			}
		}
	}
	return out
}

// runTimes returns, per ClusterQueue, the median run time of its
// finished workloads (admission to end), with "" for the median over all
// queues, and says how; nil when none is known.
func runTimes(all []*explained) (map[string]time.Duration, string) {
	byQueue := map[string][]time.Duration{}
	var every []time.Duration
	for _, x := range all {
		if x.e.Phase() != machine.Finished || x.at.IsZero() || x.o.FinishedAt.IsZero() || !x.o.FinishedAt.After(x.at) {
			continue
		}
		d := x.o.FinishedAt.Sub(x.at)
		byQueue[x.w.Queue] = append(byQueue[x.w.Queue], d)
		every = append(every, d)
	}
	if len(every) == 0 {
		return nil, ""
	}
	out := map[string]time.Duration{"": median(every)}
	var parts []string
	for _, q := range queues.SortedKeys(byQueue) {
		out[q] = median(byQueue[q])
		parts = append(parts, fmt.Sprintf("%s %s (%d)", q, out[q].Round(time.Second), len(byQueue[q])))
	}
	return out, "admission passes replayed forward in time; every workload runs the median run time of the finished workloads of its ClusterQueue (" +
		strings.Join(parts, ", ") + "; elsewhere " + out[""].Round(time.Second).String() + "), from its admission for those running; preemption and workloads not yet submitted are left out"
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// simulate replays admission passes from now: running workloads end at
// their admission plus their queue's run time (now, if that is past), and
// each admission runs that long from its start. It returns when target
// starts, the running workloads that end before then, and how many
// running workloads had already run longer than their run time.
func simulate(cfg *queues.Config, usage map[string]queues.Usage, lists map[string][]*queues.Workload, running []*explained,
	target *queues.Workload, runtimes map[string]time.Duration, now time.Time) (*Estimate, []WorkloadRef, int) {
	type end struct {
		at    time.Time
		queue string
		usage queues.Usage
		ref   *WorkloadRef
	}
	runtime := func(q string) time.Duration { return cmp.Or(runtimes[q], runtimes[""]) }
	var ends []end
	overdue := 0
	for _, x := range running {
		at := x.at.Add(runtime(x.w.Queue))
		if x.at.IsZero() || at.Before(now) {
			at = now
			overdue++
		}
		t := at
		ends = append(ends, end{at: at, queue: x.e.ChargedQueue, usage: x.e.Charged,
			ref: &WorkloadRef{Name: x.w.Key(), Priority: x.w.Priority, EndsAt: &t}})
	}
	snap := queues.NewSnapshot(cfg, queues.CloneUsages(usage), nil)
	lists = cloneLists(lists)
	var mustFinish []WorkloadRef
	t := now
	for range maxSimulated {
		d := queues.Decide(snap, lists, ignore)
		for _, adm := range d.Admissions {
			if adm.Workload == target {
				return &Estimate{Start: t, In: t.Sub(now).Round(time.Second).String()}, mustFinish, overdue
			}
			l := lists[adm.Workload.Queue]
			lists[adm.Workload.Queue] = slices.DeleteFunc(l, func(w *queues.Workload) bool { return w == adm.Workload })
			ends = append(ends, end{at: t.Add(runtime(adm.Workload.Queue)), queue: adm.Workload.Queue, usage: adm.Assignment.Usage})
		}
		if len(ends) == 0 {
			return nil, mustFinish, overdue
		}
		slices.SortFunc(ends, func(a, b end) int { return a.at.Compare(b.at) })
		next := ends[0]
		ends = ends[1:]
		t = next.at
		snap.Charge(next.queue, next.usage, -1)
		if next.ref != nil {
			mustFinish = append(mustFinish, *next.ref)
		}
	}
	return nil, mustFinish, overdue
}

// ignore is an Observer that looks at nothing.
func ignore(*queues.Workload, queues.Verdict, int) {}

func lastEvent(events []corev1.Event, reason string) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Reason == reason {
			return events[i].Message
		}
	}
	return ""
}

// WriteExplanation prints x for a person.
func WriteExplanation(out io.Writer, x Explanation) error {
	var b strings.Builder
	line := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-14s%s\n", k+":", fmt.Sprintf(format, args...)) }
	fmt.Fprintln(&b, x.Workload)
	line("State", "%s", x.State)
	if x.ClusterQueue != "" {
		q := x.ClusterQueue
		if x.Cohort != "" {
			q += " (cohort " + x.Cohort + ")"
		}
		if x.LocalQueue != "" {
			q += ", through LocalQueue " + x.LocalQueue
		}
		line("ClusterQueue", "%s", q)
	}
	line("Priority", "%d", x.Priority)
	if x.Needs != "" {
		line("Needs", "%s", x.Needs)
	}
	if x.Flavors != "" {
		line("Flavors", "%s", x.Flavors)
	}
	if x.Position != nil {
		line("Position", "%d of %d in ClusterQueue %s", x.Position.Index, x.Position.Of, x.ClusterQueue)
	}
	if x.NamespacePosition != nil {
		line("In namespace", "%d of %d", x.NamespacePosition.Index, x.NamespacePosition.Of)
	}
	if x.Reason != "" {
		line("Why", "%s", x.Reason)
	}
	for _, ps := range x.Topology {
		var ds []string
		for _, d := range ps.Domains {
			ds = append(ds, fmt.Sprintf("%s (%d)", strings.Join(d.Values, "/"), d.Count))
		}
		line("Placed", "pod set %s in %s", ps.PodSet, strings.Join(ds, ", "))
	}
	for _, lr := range x.Room {
		var ds []string
		for _, d := range lr.Domains {
			ds = append(ds, fmt.Sprintf("%s holds %d", strings.Join(d.Values, "/"), d.Count))
		}
		if len(ds) == 0 {
			ds = []string{"no domain"}
		}
		line("Room", "%s: %s", lr.Level, strings.Join(ds, ", "))
	}
	if len(x.Free) > 0 {
		fmt.Fprintln(&b, "Quota:")
		for _, c := range x.Free {
			fmt.Fprintf(&b, "  %s in flavor %s: needs %s; ClusterQueue uses %s of nominal %s, may still take %s\n", c.Resource, c.Flavor, c.Needs, c.Used, c.Nominal, c.Available)
		}
	}
	if len(x.Ahead) > 0 || x.AheadHidden > 0 {
		names := refs(x.Ahead, false)
		if x.AheadHidden > 0 {
			names = append(names, fmt.Sprintf("%d in namespaces you cannot see", x.AheadHidden))
		}
		line("Ahead", "%s", strings.Join(names, ", "))
	}
	if len(x.WouldPreempt) > 0 {
		line("Would preempt", "%s", strings.Join(refs(x.WouldPreempt, false), ", "))
	}
	for _, p := range x.PreemptedBy {
		line("Preempted", "%s", p)
	}
	if len(x.MustFinish) > 0 {
		line("Must finish", "%s", strings.Join(refs(x.MustFinish, true), ", "))
	}
	if x.Estimate != nil {
		line("Estimate", "starts in about %s (%s)", x.Estimate.In, x.Estimate.Start.Format(time.RFC3339))
		line("How", "%s", x.Estimate.Method)
	}
	for _, n := range x.Notes {
		line("Note", "%s", n)
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func refs(rs []WorkloadRef, ends bool) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s (priority %d)", r.Name, r.Priority)
		if ends && r.EndsAt != nil {
			out[i] = fmt.Sprintf("%s (ends about %s)", r.Name, r.EndsAt.Format(time.RFC3339))
		}
	}
	return out
}

// podsReadyNotes says how often a workload was evicted because its pods
// were not ready in time (waitForPodsReady), when it may be admitted
// again, and, w being its Workload (nil: not said), which time its queue
// orders it by (requeuingStrategy.timestamp).
func podsReadyNotes(cfg *queues.Config, w *queues.Workload, ann map[string]string, now time.Time) []string {
	n := machine.Requeues(ann)
	if n == 0 {
		return nil
	}
	note := fmt.Sprintf("evicted %d time(s) because its pods were not all ready in time (PodsReadyTimeout)", n)
	if pr := cfg.PodsReady; pr != nil && pr.BackoffLimitCount != nil && n > *pr.BackoffLimitCount {
		return []string{note + fmt.Sprintf("; that is more than backoffLimitCount %d allows: it is set aside as inadmissible", *pr.BackoffLimitCount)}
	}
	if at, err := time.Parse(time.RFC3339, ann[queues.AnnotationRequeueAt]); err == nil && now.Before(at) {
		note += fmt.Sprintf("; backing off: not admitted again before %s (in %s)", at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second))
	}
	switch {
	case w == nil || w.Evicted.IsZero():
	case w.ByCreation:
		note += fmt.Sprintf("; queued by its creation all the same (requeuingStrategy.timestamp %s)", queues.CreationTimestamp)
	default:
		note += fmt.Sprintf("; queued by the time of that eviction, %s, not by its creation (requeuingStrategy.timestamp %s)",
			w.Evicted.UTC().Format(time.RFC3339), queues.EvictionTimestamp)
	}
	return []string{note}
}

// unmadeLevelNotes says, for each flavor of cq with a topology that a
// NodePool can make nodes of, the levels whose domains it cannot make
// nodes into (flavors.NodeTemplate.SetsLabel): a workload that asks for
// such a domain waits for room on the nodes there are. Of one that can
// make nodes into each level, it says the levels above the node where
// its template names no one domain (flavors.NodeTemplate.Value): its
// room counts in none of them.
func unmadeLevelNotes(cfg *queues.Config, cq *queues.ClusterQueue, pools []queues.NodePool) []string {
	if cq == nil {
		return nil
	}
	var out []string
	for gi := range cq.ResourceGroups {
		for _, fq := range cq.ResourceGroups[gi].Flavors {
			f := cfg.Flavors[fq.Name]
			if f == nil || cfg.Topologies[f.TopologyName] == nil {
				continue
			}
			for _, p := range pools {
				t := p.Template
				if f.MadeBy(t) == flavors.CannotMake {
					continue
				}
				levels := cfg.Topologies[f.TopologyName].Levels
				var unmade, open []string
				for i, level := range levels {
					if !t.SetsLabel(level) {
						unmade = append(unmade, level)
					} else if _, one := t.Value(level); !one && i < len(levels)-1 {
						open = append(open, level)
					}
				}
				switch {
				case len(unmade) > 0:
					out = append(out, fmt.Sprintf("NodePool %s can make nodes of flavor %s, but not into its domains of %s: their nodes do not carry those labels, so a workload that asks for one such domain waits for room on the nodes there are, and Karpenter is not asked for nodes it would put elsewhere",
						t.Name, f.Name, strings.Join(unmade, ", ")))
				case len(open) > 0 && levels[len(levels)-1] == corev1.LabelHostname:
					out = append(out, fmt.Sprintf("NodePool %s can make nodes of flavor %s in several domains of %s: its room counts in none of them, so a workload waits for room on the nodes there are (a NodePool whose template names one domain of each level counts its room there)",
						t.Name, f.Name, strings.Join(open, ", ")))
				}
			}
		}
	}
	return out
}

// unhostableNotes warns about the flavors of queue cq (those its
// workloads wait on, and were admitted or evicted in) that nothing can
// host, and notes those tally cannot tell of.
func unhostableNotes(cq *queues.ClusterQueue, bad []UnhostableFlavor) []string {
	if cq == nil {
		return nil
	}
	var out []string
	for _, u := range bad {
		for gi := range cq.ResourceGroups {
			if slices.ContainsFunc(cq.ResourceGroups[gi].Flavors, func(f queues.FlavorQuotas) bool { return f.Name == u.Flavor }) {
				out = append(out, u.Severity()+": "+u.Message())
				break
			}
		}
	}
	return out
}
