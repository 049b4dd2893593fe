package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// JobPath is where the Job mutating webhook is served.
const JobPath = "/mutate-batch-v1-job"

// JobMutator queues new workloads (of every registered kind) of managed
// namespaces: it suspends them, labels their state and queue, and
// requires their candidate flavors' nodes. A workload whose controller
// owner is a workload of another registered kind is part of it and is
// let through as it is.
type JobMutator struct {
	Store *queues.Store
	// Namespaces reads Namespaces from an in-memory cache.
	Namespaces client.Reader
	// APIReader reads a Namespace from the API server when the cache does
	// not hold it yet (a namespace bound and used at once).
	APIReader client.Reader
	// Namespace is tally's own namespace.
	Namespace string
	// Kinds are the kinds tally queues (nil: the built-in ones).
	Kinds   *kinds.Registry
	Decoder admission.Decoder
}

// Handle implements admission.Handler.
func (m *JobMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	k, resp := kindOf(m.Kinds, req)
	if resp != nil {
		return *resp
	}
	if resp := checkQuantities(req, k); resp != nil {
		return *resp
	}
	// Review decodes the object with the request, into the object that
	// newObject makes for the same kind; k.Read checks its shape.
	obj, typed := req.Object.Object.(client.Object)
	if !typed || req.Object.Raw != nil {
		obj = k.New()
		if err := decodeObject(m.Decoder, req.Object, obj, k.GVK()); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", k.GVK().Kind, err))
		}
	}
	o, err := k.Read(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", k.GVK().Kind, err))
	}
	// The API server always sends metadata with a name or generateName,
	// and pod templates with containers; without them there would be no
	// metadata, spec or pod spec for the JSON patch to add to.
	if o.Meta.Name == "" && o.Meta.GenerateName == "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: metadata: neither name nor generateName is set", k.GVK().Kind))
	}
	if len(o.PodSets) == 0 && o.Unresolved == "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: it has no pod template", k.GVK().Kind))
	}
	for _, ps := range o.PodSets {
		if len(ps.Template.Spec.Containers) == 0 {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %s.spec.containers: a %s needs at least one container", k.GVK().Kind, kinds.FieldPath(ps.Path), k.GVK().Kind))
		}
	}
	// The request's namespace is the API server's word; the object's own
	// field is only the client's.
	if req.Namespace != "" || o.Meta.Namespace == "" {
		o.Meta.Namespace = req.Namespace
	}
	if owner := m.Kinds.Owner(o); owner != nil {
		queued, err := m.ownerQueued(ctx, o.Meta.Namespace, owner, o.Suspended)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"tally: cannot read the owner %s %s of this %s (%v); this is temporary, retry the request", owner.Kind, owner.Name, k.GVK().Kind, err))
		}
		if queued {
			return admission.Allowed(fmt.Sprintf("part of %s %s, which holds its quota", owner.Kind, owner.Name))
		}
		// An owner reference is only the client's word: one that names
		// no queued workload exempts nothing, and the workload is queued
		// on its own.
	}
	return m.enqueue(ctx, o, o.Fields())
}

// newObject makes the object of a workload of kind gvk for Review to
// decode it into (objectMaker); nil for an unstructured one.
func (m *JobMutator) newObject(gvk schema.GroupVersionKind) runtime.Object {
	if gvk.Empty() {
		return nil
	}
	k := m.Kinds.For(gvk)
	if k == nil {
		return nil
	}
	obj := k.New()
	if _, unstructured := obj.(runtime.Unstructured); unstructured {
		return nil
	}
	return obj
}

// enqueue queues o, a new workload of a managed namespace, on its own:
// the rest of Handle, and of PodGate's handling of a pod that belongs to
// no admitted workload. before is o's fields as the request brought them.
func (m *JobMutator) enqueue(ctx context.Context, o *kinds.Object, before kinds.Fields) admission.Response {
	k := o.Kind
	ns, err := m.namespace(ctx, o.Meta.Namespace)
	if err != nil {
		// The webhook is called only for namespaces labelled managed, so
		// letting the workload through would let it run unqueued.
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"tally: cannot read namespace %s to queue this %s (%v); this is temporary, retry the request", o.Meta.Namespace, k.GVK().Kind, err))
	}
	cfg := m.Store.Load()
	annotation := ns.Annotations[queues.AnnotationNamespaceQueue]
	if !queues.Managed(cfg, ns.Name, annotation, m.Namespace) {
		if cfg == nil && ns.Labels[queues.LabelManaged] == "true" {
			// Bound by LocalQueues this replica cannot see yet.
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"tally: namespace %s is managed, but this tally replica has not loaded a valid config yet; retry the request", ns.Name))
		}
		return admission.Allowed("namespace not managed by tally")
	}
	queue, err := cfg.Route(ns.Name, annotation, o.Meta.Labels)
	if err != nil {
		return admission.Denied("tally: " + err.Error())
	}
	if queue == "" {
		resp := admission.Allowed("no queue")
		resp.Warnings = []string{unqueuedWarning(cfg, ns.Name, k.GVK().Kind)}
		return resp
	}
	if err := checkPriorityClass(cfg, o.Meta.Labels); err != nil {
		return admission.Denied("tally: " + err.Error())
	}
	if o.Meta.Labels == nil {
		o.Meta.Labels = map[string]string{}
	}
	if annotation == "" && o.Meta.Labels[queues.LabelKueueQueueName] == "" && o.Meta.Labels[queues.LabelQueue] == "" {
		// Queued in the namespace's LocalQueue default: labelled so, as
		// Kueue does, so that its stopPolicy applies.
		o.Meta.Labels[queues.LabelKueueQueueName] = queues.DefaultLocalQueue
	}
	if o.Meta.Labels[queues.LabelKueuePriorityClass] == "" && o.Meta.Labels[queues.LabelPriorityClass] == "" && cfg != nil {
		if _, ok := cfg.PriorityClasses[queues.DefaultWorkloadPriorityClass]; ok {
			// Kueue's default WorkloadPriorityClass, for a workload
			// that names none.
			o.Meta.Labels[queues.LabelKueuePriorityClass] = queues.DefaultWorkloadPriorityClass
		}
	}
	// The creation-time check counts what the pods will get from the
	// namespace's LimitRanges and their RuntimeClass; without them (a
	// cache that cannot say) it counts the templates as they are.
	d, err := podDefaults(ctx, m.Namespaces, m.APIReader, o, cfg)
	if err != nil {
		d = &queues.PodDefaults{Config: cfg}
	}
	warnings, err := MutateIn(cfg, o, queue, ns.Labels, d)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	resp := admission.Allowed("")
	if err := withPatch(&resp, o.CreationPatch(before)); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp.Warnings = warnings
	return resp
}

// kindOf returns the kind of ks of a request's object: a batch/v1 Job
// when the request does not say.
func kindOf(ks *kinds.Registry, req admission.Request) (kinds.Kind, *admission.Response) {
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if gvk.Empty() {
		return kinds.Job{}, nil
	}
	if k := ks.For(gvk); k != nil {
		return k, nil
	}
	resp := admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: %s is not a workload kind tally queues", gvk))
	return nil, &resp
}

// namespace reads a Namespace from the cache, and from the API server when
// the cache does not hold it. The cache's copy is not copied again: its
// labels and annotations are the cache's, which the caller only reads.
func (m *JobMutator) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := m.Namespaces.Get(ctx, client.ObjectKey{Name: name}, ns, client.UnsafeDisableDeepCopy)
	if err == nil || m.APIReader == nil {
		return ns, err
	}
	if err := m.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// checkPriorityClass refuses a WorkloadPriorityClass label (Kueue's or
// tally's) that names no WorkloadPriorityClass of the config, in Kueue's
// words ("WorkloadPriorityClass %q not found"), listing the known ones:
// the workload would otherwise queue at another priority than its user
// asked for. cfg may be nil before any config has loaded.
func checkPriorityClass(cfg *queues.Config, labels map[string]string) error {
	for _, key := range []string{queues.LabelKueuePriorityClass, queues.LabelPriorityClass} {
		class := labels[key]
		if class == "" {
			continue
		}
		path := "metadata.labels[" + key + "]"
		if cfg == nil {
			return fmt.Errorf("%s: tally has not loaded a valid config yet, so WorkloadPriorityClass %q cannot be looked up; retry the request", path, queues.Shorten(class))
		}
		if _, ok := cfg.PriorityClasses[class]; ok {
			continue
		}
		known := "tally's config defines none"
		if names := queues.SortedKeys(cfg.PriorityClasses); len(names) > 0 {
			known = "known: " + strings.Join(names, ", ")
		}
		return fmt.Errorf("%s: WorkloadPriorityClass %q not found; %s", path, queues.Shorten(class), known)
	}
	return nil
}

// maxOwnerDepth bounds the chain of owners ownerQueued follows: a Job of
// a JobSet of a TrainJob is two deep.
const maxOwnerDepth = 4

// ownerQueued says whether ref, the controller owner of a new workload of
// namespace ns, is a workload that tally queues and that holds the new
// one's quota: it exists in ns with ref's UID and carries tally's queue
// label and, unless the new workload is created suspended (as operators
// create the parts of a suspended workload), tally admitted it and it has
// not finished. An owner that is not queued but is itself part of such a
// workload, by the same rule, will do too (a JobSet that a TrainJob
// made); whether the new workload may run still depends on the queued
// one alone. It reads the API server, not a cache, since an operator creates
// its parts right after tally admits their owner. An owner of a kind the
// API server does not serve does not exist.
func (m *JobMutator) ownerQueued(ctx context.Context, ns string, ref *metav1.OwnerReference, suspended bool) (bool, error) {
	for range maxOwnerDepth {
		k := m.Kinds.For(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		if m.APIReader == nil || k == nil {
			return false, nil
		}
		obj := k.New()
		err := m.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return false, nil
		case err != nil:
			return false, err
		}
		owner, err := k.Read(obj)
		if err != nil || owner.Meta.UID != ref.UID {
			return false, nil
		}
		if owner.Meta.Labels[queues.LabelQueue] != "" {
			return suspended || !owner.Suspended && !owner.Finished, nil
		}
		if ref = m.Kinds.Owner(owner); ref == nil {
			return false, nil
		}
	}
	return false, nil
}

// unqueuedWarning tells the user of a managed namespace that their
// workload named no queue and none applies, so it runs outside any quota.
func unqueuedWarning(cfg *queues.Config, ns, kind string) string {
	return fmt.Sprintf("tally: this %s is not queued and runs outside any quota: it has no %s label, and namespace %s has no %s annotation and no LocalQueue named %s (its LocalQueues: %s)",
		kind, queues.LabelKueueQueueName, ns, queues.AnnotationNamespaceQueue, queues.DefaultLocalQueue, strings.Join(cfg.LocalQueuesIn(ns), ", "))
}

// MutateJob applies Mutate to a Job.
func MutateJob(cfg *queues.Config, job *batchv1.Job, queue string, nsLabels map[string]string) ([]string, error) {
	o, err := kinds.Job{}.Read(job)
	if err != nil {
		return nil, err
	}
	warnings, err := Mutate(cfg, o, queue, nsLabels)
	job.Spec.Suspend = ptr.To(o.Suspended)
	return warnings, err
}

// Mutate applies tally's creation-time changes to o, queued in
// ClusterQueue queue (see queues.Config.Route) in a namespace with labels
// nsLabels: it suspends it, labels its state and queue, and makes every
// pod template require its candidate flavors' nodes and tolerate their
// taints. It is idempotent: the pod sets' own affinity terms are kept in
// an annotation the first time, and read back from it after. cfg may be
// nil before any config has loaded; the workload is then queued as
// pending and sorted out by the ledger.
func Mutate(cfg *queues.Config, o *kinds.Object, queue string, nsLabels map[string]string) ([]string, error) {
	return MutateIn(cfg, o, queue, nsLabels, nil)
}

// MutateIn is Mutate with the pod defaults of o's namespace d (nil for
// none), which the check that o can ever fit counts.
func MutateIn(cfg *queues.Config, o *kinds.Object, queue string, nsLabels map[string]string, d *queues.PodDefaults) ([]string, error) {
	meta := o.Meta
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	names := o.PodSetNames()
	user := map[string][]corev1.NodeSelectorTerm{}
	enc, annotated := meta.Annotations[queues.AnnotationUserAffinity]
	for _, ps := range o.PodSets {
		if !annotated {
			user[ps.Name] = o.TakeOwnTerms(ps)
			continue
		}
		terms, err := queues.PodSetTerms(enc, ps.Name)
		if err == nil {
			user[ps.Name], err = queues.DecodeUserTerms(terms)
		}
		if err != nil {
			return nil, fmt.Errorf("tally: metadata.annotations[%s]: %w", queues.AnnotationUserAffinity, err)
		}
	}
	meta.Annotations[queues.AnnotationUserAffinity] = queues.EncodePodSetTerms(names, user)
	o.Suspended = true

	meta.Labels[queues.LabelQueue] = queue
	meta.Labels[queues.LabelState] = string(queues.StatePending)
	if cfg == nil {
		return []string{fmt.Sprintf("tally has not loaded a valid config yet; the %s waits until one is in force", o.Kind.GVK().Kind)}, nil
	}

	w := o.WorkloadIn(queue, 0, d)
	snap := queues.NewSnapshot(cfg, nil, map[string]labels.Set{meta.Namespace: nsLabels})
	var warnings []string
	if _, v := snap.Assign(w); v.Kind == queues.Never {
		meta.Labels[queues.LabelState] = string(queues.StateInadmissible)
		warnings = []string{fmt.Sprintf("tally: %s will not be admitted. %s", o.Describe(), v.Message())}
	}
	// Narrowed all the same: a change of the config, or the object its
	// pod sets wait for, may let it be admitted, and its admission
	// narrows the node affinity only, not the tolerations.
	combos := cfg.Candidates(cfg.ClusterQueues[queue], w)
	for _, ps := range o.PodSets {
		spec := &ps.Template.Spec
		setRequired(spec, queues.NodeSelector(user[ps.Name], combos))
		spec.Tolerations = flavors.MergeTolerations(spec.Tolerations, queues.Tolerations(combos)...)
	}
	return warnings, nil
}

// withPatch sets ops, unless there are none, as resp's JSON patch,
// encoded here rather than left in resp.Patches for Response.Complete:
// that goes through each operation's MarshalJSON and compacts what it
// returns (about a sixth of BenchmarkJobReview's time). As there, an
// add or replace always carries its value, null included.
func withPatch(resp *admission.Response, ops []kinds.JSONPatchOp) error {
	if len(ops) == 0 {
		return nil
	}
	type valued struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	type bare struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	out := make([]any, len(ops))
	for i, op := range ops {
		if op.Value != nil || op.Op == "add" || op.Op == "replace" {
			out[i] = valued(op)
		} else {
			out[i] = bare{op.Op, op.Path}
		}
	}
	patch, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("tally: encoding the patch: %w", err)
	}
	resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
	return nil
}

// setRequired replaces the pod spec's required node affinity.
func setRequired(spec *corev1.PodSpec, sel *corev1.NodeSelector) {
	if sel == nil {
		if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
			spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
		}
		return
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
}
