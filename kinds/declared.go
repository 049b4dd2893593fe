package kinds

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// Declared is a kind declared by a WorkloadKind document of the config:
// any CRD whose objects have a suspend field. Its pod sets are the
// declared template paths, each of the pods its count path says (1 when
// it has none); it is finished when one of the declared conditions is
// true, and stopped since a Suspended condition became true, if its
// controller sets one. Its pods, labelled by the admission, hold its
// quota until they are gone.
type Declared struct {
	spec   queues.WorkloadKind
	gvk    schema.GroupVersionKind
	plural string
	shape  reflect.Type
}

// NewDeclared makes the kind spec declares; plural is its resource name,
// as the API server's discovery gives it.
func NewDeclared(spec queues.WorkloadKind, plural string) *Declared {
	d := &Declared{spec: spec, gvk: schema.GroupVersionKind{Group: spec.Group, Version: spec.Version, Kind: spec.Kind}, plural: plural}
	paths := make([][]string, len(spec.PodSets))
	for i, ps := range spec.PodSets {
		paths[i] = ps.TemplatePath
	}
	d.shape = shapeOf(paths)
	return d
}

func (d *Declared) GVK() schema.GroupVersionKind { return d.gvk }
func (d *Declared) Resource() string             { return d.plural }
func (d *Declared) New() client.Object           { return newUnstructured(d.gvk) }
func (d *Declared) NewList() client.ObjectList   { return newUnstructuredList(d.gvk) }
func (d *Declared) SuspendPath() []string        { return d.spec.SuspendPath }
func (d *Declared) Shape() any                   { return reflect.New(d.shape).Interface() }

func (d *Declared) Read(obj client.Object) (*Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, errShape(d, obj)
	}
	o := &Object{Kind: d, Obj: u, Meta: metaOf(u)}
	suspend := d.spec.SuspendPath
	o.Suspended, _ = At(u.Object, suspend).(bool)
	_, o.suspendParent = At(u.Object, suspend[:len(suspend)-1]).(map[string]any)
	for _, ps := range d.spec.PodSets {
		tpl := &corev1.PodTemplateSpec{}
		if raw, ok := At(u.Object, ps.TemplatePath).(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, tpl); err != nil {
				return nil, fmt.Errorf("%s: %w", FieldPath(ps.TemplatePath), err)
			}
		}
		n := int64(1)
		if ps.CountPath != nil {
			if v := At(u.Object, ps.CountPath); v != nil {
				if n, ok = number(v); !ok {
					return nil, fmt.Errorf("%s: not a number", FieldPath(ps.CountPath))
				}
			}
		}
		o.PodSets = append(o.PodSets, PodSet{Name: ps.Name, Count: n, Template: tpl, Path: ps.TemplatePath, CountPath: ps.CountPath})
	}
	o.readConditions(u, d.spec.FinishedConditions...)
	return o, nil
}

// At is the value at path in m, through maps and lists; nil if there is
// none.
func At(m any, path []string) any {
	for _, k := range path {
		switch n := m.(type) {
		case map[string]any:
			m = n[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			m = n[i]
		default:
			return nil
		}
	}
	return m
}

// shapeOf builds a Go type whose JSON form holds a pod template at each
// path (see Kind.Shape): a struct per object, a slice where a segment is
// an index (every element then has the shape).
func shapeOf(paths [][]string) reflect.Type {
	type node struct {
		leaf     bool
		children map[string]*node
	}
	root := &node{}
	for _, p := range paths {
		n := root
		for _, seg := range p {
			if n.children == nil {
				n.children = map[string]*node{}
			}
			if _, err := strconv.Atoi(seg); err == nil {
				seg = "[]"
			}
			c := n.children[seg]
			if c == nil {
				c = &node{}
				n.children[seg] = c
			}
			n = c
		}
		n.leaf = true
	}
	var build func(n *node) reflect.Type
	build = func(n *node) reflect.Type {
		if n.leaf {
			return reflect.TypeFor[corev1.PodTemplateSpec]()
		}
		if elem, ok := n.children["[]"]; ok && len(n.children) == 1 {
			return reflect.SliceOf(build(elem))
		}
		var fields []reflect.StructField
		keys := make([]string, 0, len(n.children))
		for k := range n.children {
			if k != "[]" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for i, k := range keys {
			fields = append(fields, reflect.StructField{Name: "F" + strconv.Itoa(i), Type: build(n.children[k]),
				Tag: reflect.StructTag(`json:"` + k + `"`)})
		}
		return reflect.StructOf(fields)
	}
	return build(root)
}

// CheckDeclared reports the declarations that name a built-in kind.
func CheckDeclared(specs []queues.WorkloadKind) field.ErrorList {
	var errs field.ErrorList
	for _, s := range specs {
		gvk := schema.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind}
		if slices.ContainsFunc(builtin, func(k Kind) bool { return k.GVK() == gvk }) {
			errs = append(errs, field.Forbidden(field.NewPath(fmt.Sprintf("WorkloadKind %q", s.Name)).Child("spec", "kind"),
				fmt.Sprintf("%s is built into tally; declare only kinds it does not know", gvk)))
		}
	}
	return errs
}
