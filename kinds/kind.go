package kinds

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// Kind is one kind of workload tally queues.
type Kind interface {
	// GVK is the kind's group, version and kind.
	GVK() schema.GroupVersionKind
	// Resource is its plural resource name, for webhook and RBAC rules.
	Resource() string
	// New returns an empty object of the kind, for decoders and
	// informers; NewList an empty list.
	New() client.Object
	NewList() client.ObjectList
	// Shape returns a value of a Go type whose JSON form holds the kind's
	// pod templates where the kind's objects hold them, so that their
	// quantities can be checked before anything decodes them.
	Shape() any
	// SuspendPath is the JSON path of the suspend field. The result must
	// not be modified.
	SuspendPath() []string
	// Read describes an object of the kind.
	Read(obj client.Object) (*Object, error)
}

// IsPodKind says whether k's workloads are pods, which the pod gate
// (webhook.PodGate) queues, not the workload webhooks.
func IsPodKind(k Kind) bool {
	_, ok := k.(interface{ gatesPods() })
	return ok
}

// PodParents names the kinds of object, other than workload kinds, that
// k's operator makes its pods through (a RayJob's RayCluster): a pod that
// such an object controls may be a pod of a workload of kind k. tally does
// not watch them, so it takes such a pod's claim to its workload at its
// word, within the workload's namespace.
func PodParents(k Kind) []string {
	if p, ok := k.(interface{ podParents() []string }); ok {
		return p.podParents()
	}
	return nil
}

// Object is one workload object seen through its Kind.
type Object struct {
	Kind Kind
	// Obj is the object itself.
	Obj client.Object
	// Meta is its metadata. For a Job it is the Job's own; for other
	// kinds a copy, so changes to it are not seen in Obj.
	Meta *metav1.ObjectMeta
	// PodSets are its pod sets, in the kind's order. Their templates are
	// the Job's own, or copies converted from other kinds' objects.
	PodSets []PodSet
	// Suspended is the suspend field's value; Finished says a condition
	// that means finished is true.
	Suspended, Finished bool
	// Active counts pods that run or terminate, as the kind's status
	// reports them.
	Active int32
	// Started says the status has a startTime.
	Started bool
	// StoppedSince is when the kind's controller last marked it
	// stopped (a Suspended condition that is true), zero if it has not.
	StoppedSince time.Time
	// FinishedAt is when it finished, if it has and its status says.
	FinishedAt time.Time
	// Refs are the objects its pod sets were read from, or would be
	// (References); RefsVersion their resourceVersions, so that a change
	// of one tells; Unresolved, when not empty, says why its pod sets
	// could not be read (`ClusterTrainingRuntime "x" not found`): it
	// cannot be admitted until they can.
	Refs        []ObjectRef
	RefsVersion string
	Unresolved  string
	// suspendParent says the suspend field's parent object exists.
	suspendParent bool
	// templates, when set, is what TemplatePaths returns.
	templates [][]string
}

// TemplatePaths returns the paths of the pod templates, by pod set. The
// result must not be modified: a kind may share it among its objects.
func (o *Object) TemplatePaths() [][]string {
	if o.templates != nil {
		return o.templates
	}
	out := make([][]string, len(o.PodSets))
	for i, ps := range o.PodSets {
		out[i] = ps.Path
	}
	return out
}

// PodSet is one group of identical pods of a workload.
type PodSet struct {
	Name  string
	Count int64
	// Autoscaled is how many of the Count pods the kind's controller does
	// not start, but an autoscaler may add at any time (a RayJob's
	// workers above replicas, with in-tree autoscaling). The quota covers
	// all Count; waitForPodsReady waits for the Count-Autoscaled it
	// starts.
	Autoscaled int64
	Template   *corev1.PodTemplateSpec
	// Path is the JSON path of the pod template, CountPath that of the
	// field the count derives from. A segment that is a number indexes a
	// list. Path is nil for a pod set the object does not hold (its
	// controller makes the pods from its own defaults, as KubeRay's
	// default submitter): it counts for quota, and nothing writes to it.
	Path, CountPath []string
	// PatchPath is, for a pod set the object does not hold, the path of
	// the field of the object that patches its template (a TrainJob's
	// spec.runtimePatches), nil if none does.
	PatchPath []string
	// Injected are the init containers the kind's operator adds to the
	// pod set's pods (see injected.go and queues.PodDefaults.Inject).
	Injected []corev1.Container
}

// GVKOf returns the group, version and kind of a Workload.
func GVKOf(w *queues.Workload) schema.GroupVersionKind {
	if w.Kind == "" {
		return batchv1.SchemeGroupVersion.WithKind("Job")
	}
	return schema.FromAPIVersionAndKind(w.APIVersion, w.Kind)
}

// Ref returns an object that names w, to patch it or to record an Event
// on it: its metadata only, with w's kind. The client sends a write on it
// to the same resource, but asks for and decodes only the metadata of the
// answer; the whole object would be thrown away.
func Ref(w *queues.Workload) client.Object {
	ref := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, UID: w.UID}}
	ref.SetGroupVersionKind(GVKOf(w))
	return ref
}

// Workload builds the queues.Workload of o, queued in queue with the given
// priority.
func (o *Object) Workload(queue string, priority int32) *queues.Workload {
	return o.WorkloadIn(queue, priority, nil)
}

// WorkloadIn builds the queues.Workload of o, queued in queue with the
// given priority, its pods read with the defaults of its namespace (d may
// be nil), each with the pod overhead its AnnotationPodOverhead records,
// ordered in its queue as the waitForPodsReady of d's config says
// (queues.PodsReady.Order; Kueue's default without one).
func (o *Object) WorkloadIn(queue string, priority int32, d *queues.PodDefaults) *queues.Workload {
	sets := make([]queues.PodTemplate, len(o.PodSets))
	extra := queues.ParsePodOverhead(o.Meta.Annotations[queues.AnnotationPodOverhead])
	unresolved := o.Unresolved
	var specs []*corev1.PodSpec
	for i, ps := range o.PodSets {
		if d != nil && len(d.ClaimTemplates) > 0 {
			specs = append(specs, &ps.Template.Spec)
		}
		applied := d.Apply(&ps.Template.Spec)
		spec := d.Inject(queue, applied, ps.Injected)
		claims, why := d.ClaimRequests(&ps.Template.Spec)
		if why != "" && unresolved == "" {
			unresolved = podSetPath(ps) + why
		}
		req, group, err := queues.TopologyRequestOf(ps.Template.Annotations)
		if err != nil && unresolved == "" {
			unresolved = podSetPath(ps) + err.Error()
		}
		sets[i] = queues.PodTemplate{Name: ps.Name, Count: ps.Count, Autoscaled: ps.Autoscaled, Spec: queues.WithPodOverhead(spec, extra),
			Uncharged: d.Uncharged(queue, applied, ps.Injected), Claims: claims, Topology: req, Group: group}
	}
	apiVersion, kind := "", ""
	if _, typed := o.Obj.(*batchv1.Job); !typed {
		apiVersion, kind = o.Kind.GVK().GroupVersion().String(), o.Kind.GVK().Kind
	}
	w := queues.NewWorkload(o.Meta, apiVersion, kind, sets, queue, priority)
	if d != nil && d.Config != nil {
		w = d.Config.PodsReady.Order(w)
	}
	w.Unresolved = unresolved
	w.ClaimTemplates = queues.FormatClaimTemplates(d.ClaimTemplateUIDs(specs...))
	return w
}

// podSetPath is the path of ps's pod template, with a trailing dot, for
// messages about its fields: "" for a pod.
func podSetPath(ps PodSet) string {
	if len(ps.Path) == 0 {
		return ""
	}
	return FieldPath(ps.Path) + "."
}

// Source is the object's content for patches built with
// MergePatch.SetIn: the unstructured object's map, nil for a typed Job
// (whose paths cross no list). It must not be modified.
func (o *Object) Source() map[string]any {
	if u, ok := o.Obj.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return nil
}

// PodSetNames lists the pod set names in order.
func (o *Object) PodSetNames() []string {
	names := make([]string, len(o.PodSets))
	for i, ps := range o.PodSets {
		names[i] = ps.Name
	}
	return names
}

// PriorityClassName returns the PriorityClass the workload's priority
// derives from when it has no WorkloadPriorityClass: the priorityClassName
// of the first pod template that sets one. A template's numeric priority
// is not read: anyone who can write the workload can write it, and the
// API server refuses the pods of a template whose priority does not match
// its class.
func (o *Object) PriorityClassName() string {
	for _, ps := range o.PodSets {
		if c := ps.Template.Spec.PriorityClassName; c != "" {
			return c
		}
	}
	return ""
}

// PodCount is the workload's pods summed over its pod sets.
func (o *Object) PodCount() int64 {
	n := int64(0)
	for _, ps := range o.PodSets {
		n += ps.Count
	}
	return n
}

// Describe names o for messages: "PyTorchJob team-a/train".
func (o *Object) Describe() string {
	return o.Kind.GVK().Kind + " " + o.Meta.Namespace + "/" + o.Meta.Name
}

// SuspendOp returns the JSON patch path and value that set o's suspend
// field to v: the field itself, or its parent object when o has none.
func (o *Object) SuspendOp(v bool) (string, any) {
	path := o.Kind.SuspendPath()
	if o.suspendParent {
		return Pointer(path), o.SuspendValue(v)
	}
	return Pointer(path[:len(path)-1]), map[string]any{path[len(path)-1]: o.SuspendValue(v)}
}

// SuspendValue is the value of o's suspend field that suspends it (v) or
// lets it run: v itself, but for a kind whose suspension is not a
// boolean (a Pod's scheduling gates).
func (o *Object) SuspendValue(v bool) any {
	if s, ok := o.Kind.(interface{ suspendValue(*Object, bool) any }); ok {
		return s.suspendValue(o, v)
	}
	return v
}

// Pointer renders a path as a JSON pointer.
func Pointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscape.Replace(p))
	}
	return b.String()
}

var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// FieldPath renders a path for messages: spec.pytorchReplicaSpecs.Worker.template.
func FieldPath(path []string) string { return strings.Join(path, ".") }

// MergePatch is a JSON merge patch built from paths.
type MergePatch map[string]any

// Set sets the value at path, creating the objects on the way.
func (p MergePatch) Set(path []string, v any) { p.SetIn(nil, path, v) }

// SetIn sets the value at path in a patch of src, the object's content. A
// merge patch cannot address one element of a list: where path crosses a
// list of src (a segment that is an index, as in
// spec.replicatedJobs.0.template), the whole list is copied from src into
// the patch, once, and the element is changed in the copy. There a value
// is taken literally, not merged: a map value's null entries, which would
// delete keys in a merge, are left out. A path into a list that src does
// not hold is left out.
func (p MergePatch) SetIn(src map[string]any, path []string, v any) {
	var node, from any = map[string]any(p), src
	copied := false
	for i, k := range path {
		last := i == len(path)-1
		if last && copied {
			if m, ok := v.(map[string]any); ok {
				lit := make(map[string]any, len(m))
				for key, val := range m {
					if val != nil {
						lit[key] = val
					}
				}
				v = lit
			}
		}
		switch n := node.(type) {
		case map[string]any:
			var fromNext any
			if m, ok := from.(map[string]any); ok {
				fromNext = m[k]
			}
			if last {
				n[k] = v
				return
			}
			next, ok := n[k]
			if !ok {
				if l, isList := fromNext.([]any); isList {
					next = runtime.DeepCopyJSONValue(l)
				} else {
					next = map[string]any{}
				}
				n[k] = next
			}
			node, from = next, fromNext
		case []any:
			// A list copied whole from src: from is no longer needed.
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= len(n) {
				return
			}
			copied = true
			if last {
				n[idx] = v
				return
			}
			if n[idx] == nil {
				n[idx] = map[string]any{}
			}
			node, from = n[idx], nil
		default:
			return
		}
	}
}

// Join appends elements to a path, in a new slice.
func Join(path []string, elems ...string) []string {
	return append(append(make([]string, 0, len(path)+len(elems)), path...), elems...)
}

// conditionsTrue reads the true conditions of an unstructured status:
// each type, with when it became true (zero if that is not set).
func conditionsTrue(u *unstructured.Unstructured) map[string]time.Time {
	out := map[string]time.Time{}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		if s, _ := m["status"].(string); s != string(corev1.ConditionTrue) {
			continue
		}
		ts, _ := m["lastTransitionTime"].(string)
		out[t], _ = time.Parse(time.RFC3339, ts)
	}
	return out
}

// readConditions sets o's Finished and FinishedAt from the true
// conditions of u among finished, and its StoppedSince from a true
// Suspended condition.
func (o *Object) readConditions(u *unstructured.Unstructured, finished ...string) {
	conds := conditionsTrue(u)
	for _, c := range finished {
		if at, ok := conds[c]; ok {
			o.Finished = true
			if at.After(o.FinishedAt) {
				o.FinishedAt = at
			}
		}
	}
	if at, ok := conds["Suspended"]; ok {
		o.StoppedSince = at
	}
}

// newUnstructured returns an empty object of gvk, and newUnstructuredList
// an empty list of them.
func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func newUnstructuredList(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}

// metaOf copies an unstructured object's metadata.
func metaOf(u *unstructured.Unstructured) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), GenerateName: u.GetGenerateName(),
		UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		CreationTimestamp: u.GetCreationTimestamp(), DeletionTimestamp: u.GetDeletionTimestamp(),
		Labels: u.GetLabels(), Annotations: u.GetAnnotations(), OwnerReferences: u.GetOwnerReferences(),
	}
}

// errShape is the error of an object that is not of the kind asked.
func errShape(k Kind, obj any) error {
	return fmt.Errorf("kinds: %s cannot read a %T", k.GVK().Kind, obj)
}
