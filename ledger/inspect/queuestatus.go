package inspect

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/queues"
)

// QueueStatus is one ClusterQueue's books, as `tally status` shows them.
type QueueStatus struct {
	Name   string
	Cohort string
	// Known is false for a queue that Jobs name but the config lacks.
	Known                           bool
	Pending, Admitted, Inadmissible int
	// Usage is what the queue's running Jobs hold: admitted ones, and
	// suspended ones whose pods are still going away.
	Usage queues.Usage
	// Share is the weighted dominant-resource share (see
	// queues.Snapshot.Share); FairSharing says whether its cohort shares
	// by it.
	Share       int64
	FairSharing bool
}

// Status rebuilds every ClusterQueue's books from a list of Jobs (their
// claims charged from templates), folding
// each into its entry with react, as the ledger does (see statusEntry): a
// finished Job counts nowhere, an un-suspended one is admitted and holds
// what its tally.dev/flavors annotation says, a suspended one whose pods
// may still run is evicting, holds it too and counts as pending, and any
// other suspended one waits (or can never fit, by its state label). Queues
// come in config order, then queues the config does not know.
func Status(cfg *queues.Config, jobs []*kinds.Object, templates ClaimTemplates) []QueueStatus {
	byName := map[string]*QueueStatus{}
	var out []*QueueStatus
	get := func(name string) *QueueStatus {
		if s := byName[name]; s != nil {
			return s
		}
		s := &QueueStatus{Name: name, Usage: queues.Usage{}}
		if cq := cfg.ClusterQueues[name]; cq != nil {
			s.Known, s.Cohort, s.FairSharing = true, cq.Cohort, cfg.FairSharing(cq.Cohort)
		}
		byName[name] = s
		out = append(out, s)
		return s
	}
	for _, name := range cfg.QueueNames {
		get(name)
	}
	for _, job := range jobs {
		name := job.Meta.Labels[queues.LabelQueue]
		if name == "" || job.Meta.Labels[queues.LabelState] == "" {
			continue
		}
		e := statusEntry(cfg, job, name, templates.defaults(cfg, job.Meta.Namespace))
		if e.Phase() == machine.Finished {
			continue
		}
		s := get(name)
		switch e.Phase() {
		case machine.Admitted:
			s.Admitted++
		case machine.Inadmissible:
			s.Inadmissible++
		default:
			s.Pending++
		}
		if e.Charged != nil {
			s.Usage.Add(e.Charged)
		}
	}
	usage := make(map[string]queues.Usage, len(out))
	for _, s := range out {
		usage[s.Name] = s.Usage
	}
	snap := queues.NewSnapshot(cfg, usage, nil)
	res := make([]QueueStatus, 0, len(out))
	for _, s := range out {
		if s.FairSharing {
			s.Share = snap.Share(cfg.ClusterQueues[s.Name])
		}
		res = append(res, *s)
	}
	return res
}

// statusEntry folds job, of queue name, read with pod defaults d (nil
// for none), with React into the entry the
// ledger would have had before: the one its state label and its
// tally.dev/flavors annotation describe (machine.FromLabels). The fold
// says whether it still holds that quota.
func statusEntry(cfg *queues.Config, job *kinds.Object, name string, d *queues.PodDefaults) machine.Entry {
	w := job.WorkloadIn(name, 0, d)
	if cfg != nil {
		w = cfg.PodsReady.Order(w)
	}
	before := machine.FromLabels(w, queues.State(job.Meta.Labels[queues.LabelState]), name,
		queues.UsageOf(cfg, w, job.Meta.Annotations[queues.AnnotationFlavors]))
	e, _ := machine.React(before, machine.Observe(cfg, StatusOf(job), w, 0), time.Time{}, nil)
	return e
}

// WriteStatus prints the books as a table: one line per flavor and
// resource of each queue, with the queue's counts on its first line.
// Borrowing is usage above nominal quota; the share column appears when
// some cohort shares fairly. When the config has Cohort documents, a
// second table shows the tree of cohorts (see writeCohorts).
func WriteStatus(w io.Writer, cfg *queues.Config, st []QueueStatus) error {
	fair := slices.ContainsFunc(st, func(s QueueStatus) bool { return s.FairSharing })
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	header := "CLUSTERQUEUE\tCOHORT\tPENDING\tADMITTED\tINADMISSIBLE\tFLAVOR\tRESOURCE\tUSAGE\tNOMINAL\tBORROWING"
	if fair {
		header += "\tSHARE"
	}
	fmt.Fprintln(tw, header)
	for _, s := range st {
		cells := statusCells(cfg, s)
		if len(cells) == 0 {
			cells = [][3]string{{"-", "-", "-"}}
		}
		for i, c := range cells {
			queue := []string{s.Name, orDash(s.Cohort), strconv.Itoa(s.Pending), strconv.Itoa(s.Admitted), strconv.Itoa(s.Inadmissible)}
			if !s.Known {
				queue[1] = "(not in config)"
			}
			if i > 0 {
				queue = []string{"", "", "", "", ""}
			}
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", queue[0], queue[1], queue[2], queue[3], queue[4], c[0], c[1], c[2])
			if fair {
				share := ""
				if i == 0 && s.FairSharing {
					share = formatShare(s.Share)
				}
				line += "\t" + share
			}
			fmt.Fprintln(tw, line)
		}
	}
	if err := tw.Flush(); err != nil || !cfg.HasCohortTree() {
		return err
	}
	fmt.Fprintln(w)
	return writeCohorts(w, cfg, st)
}

// writeCohorts prints the tree of cohorts, when the config has Cohort
// documents: each cohort indented under its parent, with, per flavor and
// resource, the quota it holds itself, its subtree quota (its own, and
// what its members and child cohorts lend it) and what the queues of its
// subtree use.
func writeCohorts(w io.Writer, cfg *queues.Config, st []QueueStatus) error {
	byQueue := make(map[string]queues.Usage, len(st))
	for _, s := range st {
		byQueue[s.Name] = s.Usage
	}
	used := subtreeUsage(cfg, byQueue)
	snap := queues.NewSnapshot(cfg, nil, nil)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "COHORT\tPARENT\tFLAVOR\tRESOURCE\tOWN QUOTA\tSUBTREE QUOTA\tSUBTREE USAGE")
	names, depth := cfg.CohortOrder()
	for i, name := range names {
		cells := cfg.CohortCells(name)
		if len(cells) == 0 {
			cells = []queues.FlavorResource{{}}
		}
		for j, fr := range cells {
			cohort := []string{strings.Repeat("  ", depth[i]) + name, orDash(cfg.CohortParent(name))}
			if j > 0 {
				cohort = []string{"", ""}
			}
			own, sub, use := "-", "-", "-"
			if fr.Resource != "" {
				if q, ok := cfg.CohortQuota(name, fr); ok {
					own = q.Nominal.Format(fr.Resource)
				}
				sub = snap.CohortLendable(name, fr).Format(fr.Resource)
				use = used[name][fr].Format(fr.Resource)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cohort[0], cohort[1], orDash(fr.Flavor), orDash(string(fr.Resource)), own, sub, use)
		}
	}
	return tw.Flush()
}

// statusCells lists a queue's flavor, resource and "usage, nominal,
// borrowing" cells, in the config's order; resources a queue uses outside
// its quota (a flavor it no longer has) come last.
func statusCells(cfg *queues.Config, s QueueStatus) [][3]string {
	var cells [][3]string
	seen := map[queues.FlavorResource]bool{}
	cell := func(fr queues.FlavorResource, nominal flavors.Amount, known bool) {
		seen[fr] = true
		used := s.Usage[fr]
		nom, borrow := "-", "-"
		if known {
			nom = nominal.Format(fr.Resource)
			borrow = flavors.Max(0, used.Sub(nominal)).Format(fr.Resource)
		}
		cells = append(cells, [3]string{fr.Flavor, string(fr.Resource), used.Format(fr.Resource) + "\t" + nom + "\t" + borrow})
	}
	if cq := cfg.ClusterQueues[s.Name]; cq != nil {
		for _, g := range cq.ResourceGroups {
			for _, f := range g.Flavors {
				for _, r := range g.Covered {
					fr := queues.FlavorResource{Flavor: f.Name, Resource: r}
					q, ok := cq.Quota(fr)
					cell(fr, q.Nominal, ok)
				}
			}
		}
	}
	var rest []queues.FlavorResource
	for fr := range s.Usage {
		if !seen[fr] {
			rest = append(rest, fr)
		}
	}
	slices.SortFunc(rest, func(a, b queues.FlavorResource) int {
		return cmp.Or(cmp.Compare(a.Flavor, b.Flavor), cmp.Compare(a.Resource, b.Resource))
	})
	for _, fr := range rest {
		cell(fr, 0, false)
	}
	return cells
}

// subtreeUsage sums, per cohort, the usage of the ClusterQueues of its
// subtree.
func subtreeUsage(cfg *queues.Config, usage map[string]queues.Usage) map[string]queues.Usage {
	out := map[string]queues.Usage{}
	for q, u := range usage {
		cq := cfg.ClusterQueues[q]
		if cq == nil {
			continue
		}
		for c := cq.Cohort; c != ""; c = cfg.CohortParent(c) {
			if out[c] == nil {
				out[c] = queues.Usage{}
			}
			out[c].Add(u)
		}
	}
	return out
}

// formatShare renders a share in Kueue's units (per thousand), "max" for a
// queue with weight 0 that borrows.
func formatShare(v int64) string {
	if v == queues.MaxShare {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
