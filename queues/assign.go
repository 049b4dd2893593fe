package queues

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// Assignment is where a Workload fits: one flavor per resource group it
// uses, and the quota that takes.
type Assignment struct {
	// Flavors lists the chosen flavors, in resource-group order.
	Flavors []string
	Usage   Usage
	// Borrowing is true when the Workload takes quota beyond its
	// ClusterQueue's nominal quota in some cell.
	Borrowing bool
	// Topology is, per pod set, where in the topology of its flavor
	// (the first chosen that has one) its pods go; nil for none.
	Topology []TopologyAssignment

	// topologyFlavor is the flavor Topology places in, and taken what
	// the pass took of its domains with it (see Snapshot.takeTopology).
	topologyFlavor string
	taken          Taken
}

// Annotation renders the assignment for the tally.dev/flavors annotation:
// each pod set with its flavor ("main=gpu"; "main=cpu+gpu" across groups).
func (a Assignment) Annotation(w *Workload) string {
	parts := make([]string, 0, len(w.PodSets))
	for _, ps := range w.PodSets {
		parts = append(parts, ps.Name+"="+strings.Join(a.Flavors, "+"))
	}
	return strings.Join(parts, ",")
}

// VerdictKind says whether a Workload fits now, later, or never.
type VerdictKind int

// The verdict kinds.
const (
	Fits VerdictKind = iota
	// Wait: the Workload could fit once quota frees.
	Wait
	// Never: the Workload cannot fit under this config.
	Never
	// Preempting: the Workload's quota is reserved while others are
	// preempted to make room.
	Preempting
)

// Verdict explains a decision. Code identifies the reason without the
// numbers, so a change of reason can be told from a change of usage;
// Message says what, why, and the numbers behind it.
type Verdict struct {
	Kind    VerdictKind
	Code    string
	message string
	// quota holds the numbers of a wait for quota, which Message formats
	// only when asked: a pass gives every waiting workload a verdict, and
	// nearly all of them repeat their workload's last one, which is not
	// told again.
	quota *quotaWait
}

// quotaWait is what a wait for quota reports: the numbers as they were
// when it was decided.
type quotaWait struct {
	fr                         FlavorResource
	queue, cohort              string
	need, used, nominal, lends flavors.Amount
}

// Message says what the verdict decided, why, and the numbers behind it.
func (v Verdict) Message() string {
	if w := v.quota; w != nil {
		r := w.fr.Resource
		msg := fmt.Sprintf("Waiting for quota: needs %s=%s in flavor %s; ClusterQueue %s uses %s of %s",
			r, w.need.Format(r), w.fr.Flavor, w.queue, w.used.Format(r), w.nominal.Format(r))
		if w.cohort != "" {
			msg += fmt.Sprintf(", cohort %s can lend %s", w.cohort, w.lends.Format(r))
		}
		return msg
	}
	return v.message
}

func waitf(code, format string, args ...any) Verdict {
	return Verdict{Kind: Wait, Code: intern(code), message: fmt.Sprintf(format, args...)}
}

func neverf(code, format string, args ...any) Verdict {
	return Verdict{Kind: Never, Code: code, message: "Can never fit: " + fmt.Sprintf(format, args...)}
}

// Eligible says whether w may queue in its ClusterQueue at all: its pod
// sets could be read, the queue exists and its namespaceSelector selects
// w's namespace.
func (s *Snapshot) Eligible(w *Workload) (*ClusterQueue, Verdict) {
	if w.Unresolved != "" {
		return nil, Verdict{Kind: Never, Code: "unresolved", message: w.Unresolved}
	}
	cq := s.Config.ClusterQueues[w.Queue]
	if cq == nil {
		return nil, Verdict{Kind: Never, Code: "unknown-queue",
			message: fmt.Sprintf("ClusterQueue %q does not exist; known: %s", w.Queue, strings.Join(s.Config.QueueNames, ", "))}
	}
	if !cq.NamespaceSelector.Matches(s.Namespaces[w.Namespace]) {
		return nil, Verdict{Kind: Never, Code: "namespace-not-selected",
			message: fmt.Sprintf("ClusterQueue %s does not admit namespace %s: its namespaceSelector %q does not select it", cq.Name, w.Namespace, cq.NamespaceSelector.String())}
	}
	return cq, Verdict{Kind: Fits}
}

// Assign finds flavors for w in its ClusterQueue, all or nothing: every
// resource of every pod set must fit, or nothing is assigned. Flavors are
// tried in the order the ClusterQueue lists them, skipping those w's
// nodeSelector, required node affinity or tolerations rule out.
func (s *Snapshot) Assign(w *Workload) (Assignment, Verdict) {
	cq, v := s.Eligible(w)
	if cq == nil {
		return Assignment{}, v
	}
	return s.assignIn(cq, w)
}

func (s *Snapshot) assignIn(cq *ClusterQueue, w *Workload) (Assignment, Verdict) {
	a, v, _ := s.assignOrPreempt(cq, w, false)
	return a, v
}

// assignOrPreempt assigns like Assign; with preempt, a Workload that
// would wait may instead get victims whose removal makes it fit. Across
// resource groups, each group's victims are chosen with those of the
// groups before it already gone, so together they make every group fit.
func (s *Snapshot) assignOrPreempt(cq *ClusterQueue, w *Workload, preempt bool) (Assignment, Verdict, []Victim) {
	total := w.Total()
	byGroup := make([][]corev1.ResourceName, len(cq.ResourceGroups))
	for _, r := range w.resourceNames() {
		gi := cq.GroupFor(r)
		if gi < 0 {
			return Assignment{}, neverf("not-covered", "requests %s=%s, which ClusterQueue %s does not cover", r, total[r].Format(r), cq.Name), nil
		}
		byGroup[gi] = append(byGroup[gi], r)
	}
	groups := 0
	for _, res := range byGroup {
		if len(res) > 0 {
			groups++
		}
	}
	var a Assignment
	var victims []Victim
	// sim is s with the victims chosen so far gone.
	sim := s
	for gi, res := range byGroup {
		if len(res) == 0 {
			continue
		}
		f, borrowing, v, vs := sim.pickFlavor(cq, w, &cq.ResourceGroups[gi], res, total, preempt)
		if v.Kind != Fits {
			return Assignment{}, v, nil
		}
		if len(vs) > 0 && groups > 1 {
			if sim == s {
				sim = s.cloneFor(cq)
				sim.Admitted = make(map[string][]*Admitted, len(s.Admitted))
				for q, list := range s.Admitted {
					sim.Admitted[q] = list
				}
				sim.AdmittedIn = s.AdmittedIn
			}
			for _, vic := range vs {
				sim.Charge(vic.W.Queue, vic.Usage, -1)
			}
			sim.removeAdmitted(vs)
		}
		victims = append(victims, vs...)
		if fl := s.Config.Flavors[f]; fl.TopologyName != "" && a.topologyFlavor == "" && s.Domains != nil {
			if len(vs) == 0 {
				placed, taken, err := s.place(fl, w)
				if err != nil {
					return Assignment{}, topologyVerdict(cq, fl, w, err), nil
				}
				a.Topology, a.topologyFlavor, a.taken = placed, f, taken
			} else if placed, _, err := s.placeReleased(f, w, placementsOf(vs)); err == nil {
				// Where it goes once its victims are gone: the room its
				// claim holds while they end. Nothing of it is taken in
				// this pass, where the victims' room still counts.
				a.Topology, a.topologyFlavor = placed, f
			}
		}
		a.Flavors = append(a.Flavors, f)
		a.Borrowing = a.Borrowing || borrowing
		if a.Usage == nil {
			a.Usage = make(Usage, len(total))
		}
		for _, r := range res {
			a.Usage[FlavorResource{f, r}] = total[r]
		}
	}
	if a.Usage == nil {
		a.Usage = Usage{}
	}
	return a, Verdict{Kind: Fits}, victims
}

// pickFlavor chooses the flavor of one resource group. With
// whenCanBorrow: TryNextFlavor, a later flavor that fits within nominal
// quota is preferred to an earlier one that would borrow. With preempt, a
// flavor where the group fits only after preempting is chosen if no flavor
// fits outright (whenCanPreempt: TryNextFlavor), or at once
// (whenCanPreempt: Preempt).
func (s *Snapshot) pickFlavor(cq *ClusterQueue, w *Workload, g *ResourceGroup, res []corev1.ResourceName, total flavors.Resources, preempt bool) (string, bool, Verdict, []Victim) {
	var wait, never *Verdict
	neverCeil := flavors.Amount(-1)
	// mismatch is the first flavor w's pods cannot run on; it is
	// explained only if no flavor is better reason to wait or give up.
	var mismatch *flavors.Flavor
	borrowPick := ""
	preemptPick, victims := "", []Victim(nil)
	for _, fq := range g.Flavors {
		fl := s.Config.Flavors[fq.Name]
		if fl == nil {
			continue
		}
		if !w.canRunOn(fl) {
			if mismatch == nil {
				mismatch = fl
			}
			continue
		}
		if fl.TopologyName == "" && w.asksTopology() {
			if never == nil {
				v := neverf("no-topology", "asks where in a topology its pods go (%s), and flavor %s of ClusterQueue %s has no topology (spec.topologyName)", AnnotationRequiredTopology+", "+AnnotationPreferredTopology+" or the like", fq.Name, cq.Name)
				never = &v
			}
			continue
		}
		// A flavor the group can never fit in is skipped before any that
		// must wait is considered, so a wait names a flavor that can help.
		ever := true
		for _, r := range res {
			fr := FlavorResource{fq.Name, r}
			need := total[r]
			if ceil, nominal, borrow := s.Ceiling(cq, fr); need > ceil {
				ever = false
				// Name the flavor that comes closest.
				if never == nil || ceil > neverCeil {
					neverCeil = ceil
					v := neverf("exceeds-quota", "requests %s=%s, ClusterQueue %s allows at most %s in flavor %s (nominal %s + borrowing %s)",
						r, need.Format(r), cq.Name, ceil.Format(r), fq.Name, nominal.Format(r), borrow.Format(r))
					never = &v
				}
				break
			}
		}
		if !ever {
			continue
		}
		fits, borrowing := true, false
		for _, r := range res {
			fr := FlavorResource{fq.Name, r}
			need := total[r]
			if avail := s.Available(cq, fr); need > avail {
				fits = false
				if wait == nil {
					v := s.waitVerdict(cq, fr, need, avail)
					wait = &v
				}
				break
			}
			q, _ := s.Config.QuotaOf(cq.Name, fr)
			if s.Usage[cq.Name][fr].Add(need) > q.Nominal {
				borrowing = true
			}
		}
		if fits && fl.TopologyName != "" && s.Domains != nil {
			if _, _, err := s.place(fl, w); err != nil {
				fits = false
				v := topologyVerdict(cq, fl, w, err)
				if v.Kind == Never {
					if never == nil {
						never = &v
					}
					continue
				}
				if wait == nil {
					wait = &v
				}
			}
		}
		if !fits {
			if preempt && preemptPick == "" {
				if vs := s.findVictims(cq, w, fq.Name, res, total); len(vs) > 0 {
					if cq.FlavorFungibility.WhenCanPreempt == "Preempt" && borrowPick == "" {
						return fq.Name, false, Verdict{Kind: Fits}, vs
					}
					preemptPick, victims = fq.Name, vs
				}
			}
			continue
		}
		if !borrowing || cq.FlavorFungibility.WhenCanBorrow != "TryNextFlavor" {
			return fq.Name, borrowing, Verdict{Kind: Fits}, nil
		}
		if borrowPick == "" {
			borrowPick = fq.Name
		}
	}
	switch {
	case borrowPick != "":
		return borrowPick, true, Verdict{Kind: Fits}, nil
	case preemptPick != "":
		return preemptPick, false, Verdict{Kind: Fits}, victims
	case wait != nil:
		return "", false, *wait, nil
	case never != nil:
		return "", false, *never, nil
	case mismatch != nil:
		return "", false, neverf("no-matching-flavor", "no flavor of ClusterQueue %s can run the %s: %s", cq.Name, w.KindName(), w.whyNot(mismatch)), nil
	}
	return "", false, neverf("no-flavor", "ClusterQueue %s lists no defined flavor for %v", cq.Name, res), nil
}

// waitVerdict is the verdict of a Workload that needs need of fr in cq,
// where avail (s.Available) is left.
func (s *Snapshot) waitVerdict(cq *ClusterQueue, fr FlavorResource, need, avail flavors.Amount) Verdict {
	q, _ := s.Config.QuotaOf(cq.Name, fr)
	w := &quotaWait{fr: fr, queue: cq.Name, cohort: s.Config.CohortLabel(cq.Cohort), need: need, used: s.Usage[cq.Name][fr], nominal: q.Nominal}
	if cq.Cohort != "" {
		w.lends = flavors.Max(0, avail.Sub(flavors.Max(0, q.Nominal.Sub(w.used))))
	}
	code, ok := s.waitCodes[fr]
	if !ok {
		code = intern("quota/" + fr.Flavor + "/" + string(fr.Resource))
		if s.waitCodes == nil {
			s.waitCodes = map[FlavorResource]string{}
		}
		s.waitCodes[fr] = code
	}
	return Verdict{Kind: Wait, Code: code, quota: w}
}
