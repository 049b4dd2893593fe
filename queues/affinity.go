package queues

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"tally.dev/tally/flavors"
)

// maxCombos bounds the candidate node affinity: beyond it, the Job keeps
// only the first combinations (flavor order is preference order anyway).
const maxCombos = 32

// Candidates returns the flavor combinations a Workload could be admitted
// to: for each resource group it uses, the flavors that its nodeSelector,
// required node affinity and tolerations do not rule out, combined across
// groups, in preference order. A Workload whose pod sets could not be
// read (Unresolved), or that asks for nothing the queue covers, may use
// every group: its pods are kept to the queue's flavors all the same.
func (c *Config) Candidates(cq *ClusterQueue, w *Workload) [][]*flavors.Flavor {
	if cq == nil {
		return nil
	}
	combos := [][]*flavors.Flavor{nil}
	used := map[int]bool{}
	for r := range w.Total() {
		if gi := cq.GroupFor(r); gi >= 0 {
			used[gi] = true
		}
	}
	if w.Unresolved != "" || len(used) == 0 {
		for gi := range cq.ResourceGroups {
			used[gi] = true
		}
	}
	for gi := range cq.ResourceGroups {
		if !used[gi] {
			continue
		}
		var fls []*flavors.Flavor
		for _, fq := range cq.ResourceGroups[gi].Flavors {
			if f := c.Flavors[fq.Name]; f != nil && w.canRunOn(f) {
				fls = append(fls, f)
			}
		}
		var next [][]*flavors.Flavor
		for _, combo := range combos {
			for _, f := range fls {
				if len(next) < maxCombos {
					next = append(next, append(append([]*flavors.Flavor(nil), combo...), f))
				}
			}
		}
		combos = next
	}
	if len(combos) == 1 && len(combos[0]) == 0 {
		return nil
	}
	return combos
}

// FlavorsByName looks flavors up, in order, skipping unknown names.
func (c *Config) FlavorsByName(names []string) []*flavors.Flavor {
	out := make([]*flavors.Flavor, 0, len(names))
	for _, n := range names {
		if f := c.Flavors[n]; f != nil {
			out = append(out, f)
		}
	}
	return out
}

// NodeSelector builds a required node affinity: each of the user's own
// terms (or one empty term) ANDed with each flavor combination's node
// labels. Terms are ORed, so a pod may land on any combination's nodes.
// It returns nil when some term would require nothing.
func NodeSelector(user []corev1.NodeSelectorTerm, combos [][]*flavors.Flavor) *corev1.NodeSelector {
	base := user
	if len(base) == 0 {
		base = []corev1.NodeSelectorTerm{{}}
	}
	var terms []corev1.NodeSelectorTerm
	for _, u := range base {
		for _, combo := range combos {
			t := *u.DeepCopy()
			for _, f := range combo {
				t.MatchExpressions = append(t.MatchExpressions, f.Requirements()...)
			}
			terms = append(terms, t)
		}
		if len(combos) == 0 {
			terms = append(terms, *u.DeepCopy())
		}
	}
	for _, t := range terms {
		// An empty term matches no node, but here it stands for "any
		// node", so one of them lifts the whole requirement.
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			return nil
		}
	}
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// Tolerations returns the union of the combinations' flavor tolerations.
func Tolerations(combos [][]*flavors.Flavor) []corev1.Toleration {
	var out []corev1.Toleration
	for _, combo := range combos {
		for _, f := range combo {
			out = flavors.MergeTolerations(out, f.Tolerations...)
		}
	}
	return out
}

// EncodeUserTerms renders the user's own required terms for the
// AnnotationUserAffinity annotation ("" when there are none).
func EncodeUserTerms(terms []corev1.NodeSelectorTerm) string {
	if len(terms) == 0 {
		return ""
	}
	b, _ := json.Marshal(terms)
	return string(b)
}

// DecodeUserTerms parses the AnnotationUserAffinity annotation.
func DecodeUserTerms(s string) ([]corev1.NodeSelectorTerm, error) {
	if s == "" {
		return nil, nil
	}
	var terms []corev1.NodeSelectorTerm
	if err := json.Unmarshal([]byte(s), &terms); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationUserAffinity, err)
	}
	return terms, nil
}

// PodSetTerms returns, from the AnnotationUserAffinity annotation, the
// encoded terms of pod set name. The annotation is the terms themselves
// (a JSON list, as EncodeUserTerms writes them) for a workload with one
// pod set or with the same terms in each, or a JSON object of each pod
// set's terms by name (see EncodePodSetTerms).
func PodSetTerms(ann, name string) (string, error) {
	if !strings.HasPrefix(ann, "{") {
		return ann, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ann), &m); err != nil {
		return "", fmt.Errorf("annotation %s: %w", AnnotationUserAffinity, err)
	}
	return string(m[name]), nil
}

// EncodePodSetTerms renders the pod sets' own required terms, by pod set
// name in the order names gives, for the AnnotationUserAffinity
// annotation: as EncodeUserTerms does when every pod set has the same
// terms, else as a JSON object.
func EncodePodSetTerms(names []string, terms map[string][]corev1.NodeSelectorTerm) string {
	first := EncodeUserTerms(terms[names[0]])
	same := true
	for _, n := range names[1:] {
		same = same && EncodeUserTerms(terms[n]) == first
	}
	if same {
		return first
	}
	m := map[string]json.RawMessage{}
	for _, n := range names {
		if enc := EncodeUserTerms(terms[n]); enc != "" {
			m[n] = json.RawMessage(enc)
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// RequiredTerms returns a pod spec's required node affinity terms.
func RequiredTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// canRunOn reports whether w's pods could run on f's nodes: its
// nodeSelector and required node affinity allow f's node labels (see
// flavors.Flavor.Allows), and it tolerates f's taints.
func (w *Workload) canRunOn(f *flavors.Flavor) bool {
	if p := w.placement(); p != nil && !p.allows(f) {
		return false
	}
	if !f.Tolerates(w.Tolerations) {
		return false
	}
	for _, o := range w.More {
		if !o.canRunOn(f) {
			return false
		}
	}
	return true
}

// whyNot says why w's pods can never run on f's nodes, or "" if they can.
func (w *Workload) whyNot(f *flavors.Flavor) string {
	if why := f.Mismatch(flavors.Affinity{NodeSelector: w.NodeSelector, Terms: w.NodeAffinity}, w.Tolerations); why != "" {
		return why
	}
	for _, o := range w.More {
		if why := o.whyNot(f); why != "" {
			return why
		}
	}
	return ""
}

// placement returns what w's nodeSelector and required node affinity
// allow, or nil when they ask nothing.
func (w *Workload) placement() *placement {
	if w.place != nil || w.total != nil {
		return w.place
	}
	// Not sealed: worked out afresh, and not kept.
	if a := (flavors.Affinity{NodeSelector: w.NodeSelector, Terms: w.NodeAffinity}); !a.IsZero() {
		return &placement{aff: a}
	}
	return nil
}

// maxChecked bounds the flavors a placement remembers. The memo is keyed
// by flavor object, and each config load makes new ones, so a long-lived
// placement sheds the old ones by starting over.
const maxChecked = 64

// placement is what a nodeSelector and required node affinity allow, and
// which flavors it has been checked against. Every pass asks it about each
// flavor of each pending Workload's queue; matching against a flavor's
// labels parses the affinity anew, so the answers are kept. Workloads that
// ask the same (Jobs made from one template) share one placement.
type placement struct {
	aff flavors.Affinity

	mu      sync.Mutex
	checked []checkedFlavor
}

type checkedFlavor struct {
	flavor *flavors.Flavor
	allows bool
}

// allows reports whether p allows f's node labels.
func (p *placement) allows(f *flavors.Flavor) bool {
	p.mu.Lock()
	for _, c := range p.checked {
		if c.flavor == f {
			p.mu.Unlock()
			return c.allows
		}
	}
	p.mu.Unlock()
	ok := f.Allows(p.aff)
	p.mu.Lock()
	if len(p.checked) >= maxChecked {
		p.checked = p.checked[:0]
	}
	p.checked = append(p.checked, checkedFlavor{f, ok})
	p.mu.Unlock()
	return ok
}

// placements holds every live placement by what it asks, so Workloads that
// ask the same share one; an entry goes when its placement is collected.
var placements = struct {
	sync.Mutex
	m map[placementKey]weak.Pointer[placement]
}{m: map[placementKey]weak.Pointer[placement]{}}

// placementKey is a nodeSelector in a canonical form and required terms in
// JSON.
type placementKey struct{ selector, terms string }

// placementOf returns the placement of a nodeSelector and the required
// terms that enc encodes (as EncodeUserTerms does, or as the
// AnnotationUserAffinity annotation holds them), or nil when they ask
// nothing. terms, if not nil, are enc decoded; otherwise enc is decoded
// unless a Workload that asks the same already holds the placement. A new
// placement keeps copies: it outlives the Job they came from.
func placementOf(sel map[string]string, enc string, terms []corev1.NodeSelectorTerm) (*placement, error) {
	if len(sel) == 0 && enc == "" {
		return nil, nil
	}
	key := placementKey{SelectorKey(sel), enc}
	placements.Lock()
	p := placements.m[key].Value()
	placements.Unlock()
	if p != nil {
		return p, nil
	}
	var own []corev1.NodeSelectorTerm
	if terms == nil {
		var err error
		if own, err = DecodeUserTerms(enc); err != nil {
			return nil, err
		}
	} else if len(terms) > 0 {
		own = make([]corev1.NodeSelectorTerm, len(terms))
		for i := range terms {
			terms[i].DeepCopyInto(&own[i])
		}
	}
	aff := flavors.Affinity{NodeSelector: maps.Clone(sel), Terms: own}
	if aff.IsZero() {
		return nil, nil
	}
	placements.Lock()
	defer placements.Unlock()
	if p := placements.m[key].Value(); p != nil {
		return p, nil
	}
	p = &placement{aff: aff}
	placements.m[key] = weak.Make(p)
	runtime.AddCleanup(p, forgetPlacement, key)
	return p, nil
}

// forgetPlacement drops the entry of a collected placement, unless a new
// placement has taken its key since.
func forgetPlacement(key placementKey) {
	placements.Lock()
	defer placements.Unlock()
	if placements.m[key].Value() == nil {
		delete(placements.m, key)
	}
}

// SelectorKey renders a nodeSelector (or any map of strings)
// canonically: its entries sorted by key, each as key NUL value NUL
// (neither may hold a NUL).
func SelectorKey(sel map[string]string) string {
	if len(sel) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(sel[k])
		b.WriteByte(0)
	}
	return b.String()
}
