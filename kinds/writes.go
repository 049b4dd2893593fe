package kinds

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// The writes tally makes to a workload are built here, for its kind: the
// webhook's creation patch (Object.TakeOwnTerms, Object.CreationPatch),
// and the ledger's admission, restore and eviction writes (Target). A
// kind's writes are the template kinds' (templateWrites) unless it
// overrides them by a method writes() writes: JobSet narrows by
// nodeSelector (selectorWrites), the Pod besides lifts a scheduling gate
// and is evicted by deletion (podWrites).

// writes are the parts of tally's writes that depend on the kind.
type writes interface {
	// ownTerms returns the required node terms of a pod template's own
	// at creation, which tally keeps (queues.AnnotationUserAffinity) and
	// ANDs with its flavors'; it may change spec.
	ownTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm
	// narrow sets in p the fields of pod template i of t that narrow it
	// to combos: at admission (!suspend) the chosen one, at a restore the
	// candidates.
	narrow(p MergePatch, t *Target, i int, combos [][]*flavors.Flavor, suspend bool) error
	// restoreDue says whether pod set ps, of a workload whose
	// AnnotationUserAffinity is userAnn, is narrowed otherwise than a
	// restore to combos narrows it; an error says it cannot tell.
	restoreDue(ps PodSet, userAnn string, combos [][]*flavors.Flavor) (bool, error)
	// resume is the suspend field's value that lets t run.
	resume(t *Target) any
	// evict is the write that evicts t, with annotations (unless nil)
	// set in the same write.
	evict(t *Target, annotations map[string]any) (Eviction, error)
	// mergeOnly says only a merge patch expresses the admission.
	mergeOnly() bool
	// templates sets in p what narrows t's pod templates to combos (at
	// admission, !suspend, the chosen one, at a restore the candidates),
	// with annotations (unless nil) on them.
	templates(p MergePatch, t *Target, combos [][]*flavors.Flavor, suspend bool, annotations map[string]any) error
}

// writesOf returns k's writes; nil k, a declared kind no longer
// declared, has the template kinds'.
func writesOf(k Kind) writes {
	if w, ok := k.(interface{ writes() writes }); ok {
		return w.writes()
	}
	return templateWrites{}
}

// templateWrites are the writes of a kind whose suspended workloads'
// pod templates tally may change: it narrows them by required node
// affinity, un-suspends them with false and evicts them by suspending
// them.
type templateWrites struct{}

func (templateWrites) ownTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	return queues.RequiredTerms(spec)
}

func (templateWrites) narrow(p MergePatch, t *Target, i int, combos [][]*flavors.Flavor, _ bool) error {
	user, err := podSetTerms(t.UserAffinity, t.W.PodSets[i].Name)
	if err != nil {
		return err
	}
	var required any
	if ns := queues.NodeSelector(user, combos); ns != nil {
		required = ns
	}
	p.SetIn(t.Src, Join(t.Paths[i], "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"), required)
	return nil
}

func (templateWrites) restoreDue(ps PodSet, userAnn string, combos [][]*flavors.Flavor) (bool, error) {
	user, err := podSetTerms(userAnn, ps.Name)
	if err != nil {
		return false, err
	}
	want := queues.NodeSelector(user, combos)
	have := ps.Template.Spec.Affinity
	var haveSel *corev1.NodeSelector
	if have != nil && have.NodeAffinity != nil {
		haveSel = have.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return !pinnedWithin(want, haveSel), nil
}

// pinnedWithin says whether node selector have is want, or want with a
// topology domain's pins beside each term's requirements: a label In
// one value that want does not name, as an admission pins its domain
// (Target.Pinned). Such a template runs only where want lets it; the
// next admission's write replaces the pins, so a stopped victim is not
// written again for them.
func pinnedWithin(want, have *corev1.NodeSelector) bool {
	if equality.Semantic.DeepEqual(want, have) {
		return true
	}
	if want == nil || have == nil || len(want.NodeSelectorTerms) != len(have.NodeSelectorTerms) {
		return false
	}
	for i, w := range want.NodeSelectorTerms {
		h := have.NodeSelectorTerms[i]
		if !equality.Semantic.DeepEqual(w.MatchFields, h.MatchFields) {
			return false
		}
		named := map[string]bool{}
		for _, r := range w.MatchExpressions {
			named[r.Key] = true
			if !slices.ContainsFunc(h.MatchExpressions, func(x corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(r, x) }) {
				return false
			}
		}
		pins := 0
		for _, r := range h.MatchExpressions {
			if named[r.Key] {
				continue
			}
			if r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 {
				return false
			}
			pins++
		}
		if len(h.MatchExpressions) != len(w.MatchExpressions)+pins {
			return false // a requirement of want's keys that want has not
		}
	}
	return true
}

func (templateWrites) resume(t *Target) any {
	if t.Resume == nil {
		return false
	}
	return t.Resume
}

func (templateWrites) evict(t *Target, annotations map[string]any) (Eviction, error) {
	meta := map[string]any{"labels": map[string]any{queues.LabelState: string(queues.StatePending)}}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	p := MergePatch{"metadata": meta}
	p.Set(t.Suspend, true)
	b, err := p.Marshal()
	return Eviction{Patch: b}, err
}

func (templateWrites) mergeOnly() bool { return false }

// templates narrows each pod template t holds, by w's narrow, and labels
// it with t's UID.
func (templateWrites) templates(p MergePatch, t *Target, combos [][]*flavors.Flavor, suspend bool, annotations map[string]any) error {
	w := writesOf(t.Kind)
	for i := range t.W.PodSets {
		if i >= len(t.Paths) {
			break
		}
		if t.Paths[i] == nil {
			continue // a pod set the object does not hold
		}
		if err := w.narrow(p, t, i, t.combosOf(i, combos), suspend); err != nil {
			return err
		}
		p.SetIn(t.Src, Join(t.Paths[i], "metadata", "labels", queues.LabelWorkload), string(t.W.UID))
		if !suspend && len(t.Pinned) > 0 {
			p.SetIn(t.Src, Join(t.Paths[i], "metadata", "labels", queues.LabelPodSet), t.W.PodSets[i].Name)
		}
		if f, ok := annotations[queues.AnnotationFlavors]; ok {
			// What its pods hold, should they outlive the workload
			// and the ledger forget it.
			p.SetIn(t.Src, Join(t.Paths[i], "metadata", "annotations", queues.AnnotationPodQueue), t.W.Queue)
			p.SetIn(t.Src, Join(t.Paths[i], "metadata", "annotations", queues.AnnotationFlavors), f)
		}
	}
	return nil
}

// podSetTerms decodes pod set name's own required terms from the
// AnnotationUserAffinity annotation ann.
func podSetTerms(ann, name string) ([]corev1.NodeSelectorTerm, error) {
	enc, err := queues.PodSetTerms(ann, name)
	if err != nil {
		return nil, err
	}
	return queues.DecodeUserTerms(enc)
}

// TakeOwnTerms returns the required node terms of pod set ps's own, which
// tally keeps at creation (queues.AnnotationUserAffinity) and ANDs with
// its candidate flavors': its template's required node affinity's. A
// kind narrowed by nodeSelector takes the template's nodeSelector into
// them, and out of the template, so that the nodeSelector is tally's.
func (o *Object) TakeOwnTerms(ps PodSet) []corev1.NodeSelectorTerm {
	return writesOf(o.Kind).ownTerms(&ps.Template.Spec)
}

// RestoreDue says whether a pod template of o, a suspended workload, is
// narrowed otherwise than Target.Restore narrows it to combos, its
// candidate flavor combinations: it still carries the flavor it ran in.
func (o *Object) RestoreDue(combos [][]*flavors.Flavor) bool {
	w := writesOf(o.Kind)
	if r, ok := w.(interface{ restoreDueOf(*Object) bool }); ok {
		return r.restoreDueOf(o)
	}
	for _, ps := range o.PodSets {
		due, err := w.restoreDue(ps, o.Meta.Annotations[queues.AnnotationUserAffinity], combos)
		if err != nil {
			return false
		}
		if due {
			return true
		}
	}
	return false
}

// Fields are the fields of a workload that tally's creation-time changes
// may touch, copied out before they are made (Object.Fields), for
// Object.CreationPatch.
type Fields struct {
	// Labels and Annotations are the workload's metadata's.
	Labels, Annotations map[string]string
	suspend             bool
	// Per pod set.
	affinity     []*corev1.Affinity
	tolerations  [][]corev1.Toleration
	nodeSelector []map[string]string
}

// Fields copies out the fields of o that tally's creation-time changes
// may touch.
func (o *Object) Fields() Fields {
	f := Fields{Labels: maps.Clone(o.Meta.Labels), Annotations: maps.Clone(o.Meta.Annotations), suspend: o.Suspended}
	for _, ps := range o.PodSets {
		spec := &ps.Template.Spec
		f.affinity = append(f.affinity, spec.Affinity.DeepCopy())
		f.tolerations = append(f.tolerations, slices.Clone(spec.Tolerations))
		f.nodeSelector = append(f.nodeSelector, maps.Clone(spec.NodeSelector))
	}
	return f
}

// CreationPatch is the JSON patch that changes the workload, whose fields
// were before, into o: each changed field is replaced whole, and nothing
// else is touched, so fields that the API server knows and tally's types
// do not are kept. A pod set o does not hold gets no op.
func (o *Object) CreationPatch(before Fields) []JSONPatchOp {
	after := o.Fields()
	var ops []JSONPatchOp
	set := func(path string, changed bool, value any) {
		if changed {
			ops = append(ops, JSONPatchOp{Op: "add", Path: path, Value: value})
		}
	}
	set("/metadata/labels", !maps.Equal(before.Labels, after.Labels), after.Labels)
	set("/metadata/annotations", !maps.Equal(before.Annotations, after.Annotations), after.Annotations)
	path, value := o.SuspendOp(after.suspend)
	set(path, before.suspend != after.suspend, value)
	for i, ps := range o.PodSets {
		if ps.Path == nil {
			continue // not held by the object
		}
		spec := Pointer(ps.Path) + "/spec"
		set(spec+"/affinity", !equality.Semantic.DeepEqual(before.affinity[i], after.affinity[i]), after.affinity[i])
		set(spec+"/tolerations", !equality.Semantic.DeepEqual(before.tolerations[i], after.tolerations[i]), after.tolerations[i])
		if !maps.Equal(before.nodeSelector[i], after.nodeSelector[i]) {
			ops = append(ops, JSONPatchOp{Op: "remove", Path: spec + "/nodeSelector"})
		}
	}
	return ops
}

// Target is a workload as tally's admission, restore and eviction writes
// need it, kept from the last version of it the ledger saw.
type Target struct {
	// Kind is its kind; nil (a declared kind no longer declared) writes
	// as the template kinds do.
	Kind Kind
	// W is its Workload: pod set names, UID, queue, and the nodeSelector
	// its templates carry.
	W *queues.Workload
	// RV is the resourceVersion the admission and restore are guarded by.
	RV string
	// UserAffinity is its AnnotationUserAffinity.
	UserAffinity string
	// Paths are its pod templates' paths by pod set in W.PodSets order
	// (Object.TemplatePaths), Suspend its suspend field's
	// (Kind.SuspendPath) and Resume the suspend field's value that lets it
	// run (Object.SuspendValue).
	Paths   [][]string
	Suspend []string
	Resume  any
	// Src is its content where a pod template path crosses a list
	// (Object.Source).
	Src map[string]any
	// Pinned is, by pod set in W.PodSets order, the node labels of the
	// topology domain an admission places all its pods in
	// (queues.TopologyAssignment.Pinned), which narrow its template as
	// a flavor's do; nil for none.
	Pinned []map[string]string
}

// combosOf is combos for pod set i: each flavor also pins the labels of
// the pod set's topology domain (t.Pinned), if it has one.
func (t *Target) combosOf(i int, combos [][]*flavors.Flavor) [][]*flavors.Flavor {
	if i >= len(t.Pinned) || len(t.Pinned[i]) == 0 {
		return combos
	}
	out := make([][]*flavors.Flavor, len(combos))
	for c, combo := range combos {
		out[c] = make([]*flavors.Flavor, len(combo))
		for j, f := range combo {
			pinned := *f
			pinned.NodeLabels = maps.Clone(f.NodeLabels)
			if f.TopologyName != "" {
				if pinned.NodeLabels == nil {
					pinned.NodeLabels = map[string]string{}
				}
				maps.Copy(pinned.NodeLabels, t.Pinned[i])
			}
			out[c][j] = &pinned
		}
	}
	return out
}

// Admit is the merge patch that admits t in the flavors of combos (one
// combination, or the queue's for a workload charged none): guarded
// by t.RV, so that it fails with a Conflict if the workload changed
// meanwhile, it un-suspends t, narrows every pod template to combos'
// nodes, labels them with t's UID (LabelWorkload), sets annotations
// (with AnnotationFlavors among them, the pod templates get it too, with
// AnnotationPodQueue) and the state label admitted.
func (t Target) Admit(combos [][]*flavors.Flavor, annotations map[string]any) ([]byte, error) {
	return t.narrowed(combos, false, annotations, queues.StateAdmitted)
}

// Restore is the merge patch that gives a stopped victim t its candidate
// flavor combinations combos back, as the webhook narrowed it at
// creation, suspended and pending, guarded by t.RV so that it cannot undo
// an admission.
func (t Target) Restore(combos [][]*flavors.Flavor) ([]byte, error) {
	return t.narrowed(combos, true, nil, queues.StatePending)
}

// MergeOnly says t's admission is a merge patch whatever the write mode:
// no other removes one scheduling gate among others', which apply cannot
// take from their managers (a Pod).
func (t Target) MergeOnly() bool { return writesOf(t.Kind).mergeOnly() }

// Eviction is the write that preempts a workload: a merge patch that
// suspends it and sets its state back to pending, or, for a kind that
// cannot be suspended again (a Pod), its deletion.
type Eviction struct {
	Delete bool
	Patch  []byte
}

// Evict is the one write that evicts t (a preemption, or a requeue at a
// larger size): suspended and pending again, with annotations (unless
// nil) in the same write; or, for a kind that cannot be suspended again,
// its deletion (and then annotations are moot).
func (t Target) Evict(annotations map[string]any) (Eviction, error) {
	return writesOf(t.Kind).evict(&t, annotations)
}

// narrowed builds a merge patch, guarded by t.RV, that narrows each pod
// template t holds to combos, labels it with t's UID, and sets the
// suspend field (to suspend, or to what lets t run), annotations (unless
// nil) and the state label.
func (t Target) narrowed(combos [][]*flavors.Flavor, suspend bool, annotations map[string]any, state queues.State) ([]byte, error) {
	w := writesOf(t.Kind)
	meta := map[string]any{
		"resourceVersion": t.RV,
		"labels":          map[string]any{queues.LabelState: string(state)},
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	p := MergePatch{"metadata": meta}
	if suspend {
		p.Set(t.Suspend, true)
	} else {
		p.Set(t.Suspend, w.resume(&t))
	}
	if err := w.templates(p, &t, combos, suspend, annotations); err != nil {
		return nil, err
	}
	b, err := p.Marshal()
	if err != nil {
		return nil, fmt.Errorf("affinity patch: %w", err)
	}
	return b, nil
}
