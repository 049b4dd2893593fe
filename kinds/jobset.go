package kinds

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// JobSet is jobset.x-k8s.io/v1alpha2 JobSet. Its pod sets are its
// replicatedJobs, each named by its name, of replicas (default 1) × its
// Job template's pods (parallelism, default 1, capped by completions).
// It is suspended by spec.suspend and finished when Completed or Failed;
// on suspend the JobSet controller suspends its child Jobs, whose pods go,
// and sets a Suspended condition. Its child Jobs are part of it and not
// queued on their own (Registry.Owner).
//
// JobSet's own webhook lets a suspended JobSet's pod templates change
// only in labels, annotations, nodeSelector, tolerations and scheduling
// gates, so tally narrows it to its flavor by the nodeSelector
// (selectorWrites).
type JobSet struct{}

var (
	jobSetSuspend = []string{"spec", "suspend"}
	jobSetGVK     = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
)

func (JobSet) GVK() schema.GroupVersionKind { return jobSetGVK }
func (JobSet) Resource() string             { return "jobsets" }
func (JobSet) New() client.Object           { return newUnstructured(jobSetGVK) }
func (JobSet) NewList() client.ObjectList   { return newUnstructuredList(jobSetGVK) }
func (JobSet) SuspendPath() []string        { return jobSetSuspend }
func (JobSet) writes() writes               { return selectorWrites{} }

// Shape is the kind's pod templates, where it holds them.
func (JobSet) Shape() any {
	return &struct {
		Spec struct {
			ReplicatedJobs []struct {
				Template struct {
					Spec struct {
						Template corev1.PodTemplateSpec `json:"template"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"replicatedJobs"`
		} `json:"spec"`
	}{}
}

func (k JobSet) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(k, obj)
	}
	o := &Object{Kind: k, Obj: u, Meta: metaOf(u), suspendParent: true}
	o.Suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "suspend")
	rjs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
	seen := map[string]bool{}
	for i, rj := range rjs {
		at := []string{"spec", "replicatedJobs", strconv.Itoa(i)}
		m, ok := rj.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not an object", FieldPath(at))
		}
		name, _ := m["name"].(string)
		if name == "" || seen[name] {
			return nil, fmt.Errorf("%s.name: %q is empty or names another replicated Job", FieldPath(at), name)
		}
		seen[name] = true
		replicas, err := count(m, 1, FieldPath(at), "replicas")
		if err != nil {
			return nil, err
		}
		pods, err := count(m, 1, FieldPath(at), "template", "spec", "parallelism")
		if err != nil {
			return nil, err
		}
		if _, set, _ := unstructured.NestedFieldNoCopy(m, "template", "spec", "completions"); set {
			completions, err := count(m, 1, FieldPath(at), "template", "spec", "completions")
			if err != nil {
				return nil, err
			}
			pods = min(pods, completions)
		}
		tpl, err := template(m, "template", "spec", "template")
		if err != nil {
			return nil, fmt.Errorf("%s.template.spec.template: %w", FieldPath(at), err)
		}
		o.PodSets = append(o.PodSets, PodSet{Name: name, Count: replicas * pods, Template: tpl,
			Path: Join(at, "template", "spec", "template"), CountPath: Join(at, "replicas")})
	}
	statuses, _, _ := unstructured.NestedSlice(u.Object, "status", "replicatedJobsStatus")
	for _, s := range statuses {
		if m, ok := s.(map[string]any); ok {
			if a, ok := number(m["active"]); ok {
				o.Active += int32(a)
			}
		}
	}
	o.readConditions(u, "Completed", "Failed")
	return o, nil
}

// count reads the number at path in m, def when it is not set.
func count(m map[string]any, def int64, at string, path ...string) (int64, error) {
	v, set, _ := unstructured.NestedFieldNoCopy(m, path...)
	if !set || v == nil {
		return def, nil
	}
	n, ok := number(v)
	if !ok {
		return 0, fmt.Errorf("%s.%s: not a number", at, FieldPath(path))
	}
	return n, nil
}

// selectorWrites are the writes of a kind whose controller allows no
// change to a suspended workload's pod templates but their nodeSelector
// (JobSet; a gated Pod's affinity may not change either): tally narrows
// it to its flavors by the nodeSelector. At creation the user's own
// nodeSelector moves into the required node affinity, so that the
// nodeSelector is tally's alone: the chosen flavors' node labels at
// admission, cleared when the workload is evicted.
type selectorWrites struct{ templateWrites }

func (selectorWrites) ownTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	terms := withSelector(queues.RequiredTerms(spec), spec.NodeSelector)
	spec.NodeSelector = nil
	return terms
}

func (selectorWrites) narrow(p MergePatch, t *Target, i int, combos [][]*flavors.Flavor, suspend bool) error {
	sel := map[string]any{}
	for k := range t.W.NodeSelector { // all templates carry the same
		sel[k] = nil
	}
	if !suspend {
		for _, f := range combos[0] {
			for k, v := range f.NodeLabels {
				sel[k] = v
			}
		}
	}
	p.SetIn(t.Src, Join(t.Paths[i], "spec", "nodeSelector"), sel)
	return nil
}

// restoreDue: the nodeSelector is tally's, and empty while it waits.
func (selectorWrites) restoreDue(ps PodSet, _ string, _ [][]*flavors.Flavor) (bool, error) {
	return len(ps.Template.Spec.NodeSelector) > 0, nil
}

// withSelector adds a nodeSelector's requirements to every term (to a
// single term when there is none): the same nodes, as affinity.
func withSelector(terms []corev1.NodeSelectorTerm, sel map[string]string) []corev1.NodeSelectorTerm {
	if len(sel) == 0 {
		return terms
	}
	if len(terms) == 0 {
		terms = []corev1.NodeSelectorTerm{{}}
	}
	keys := slices.Sorted(maps.Keys(sel))
	out := make([]corev1.NodeSelectorTerm, len(terms))
	for i, t := range terms {
		out[i] = *t.DeepCopy()
		for _, k := range keys {
			out[i].MatchExpressions = append(out[i].MatchExpressions,
				corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{sel[k]}})
		}
	}
	return out
}
