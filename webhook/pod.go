package webhook

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// PodPath is where the pod gate is served; PodGuardPath where the pod
// guard is.
const (
	PodPath      = "/mutate-v1-pod"
	PodGuardPath = "/validate-v1-pod"
)

// PodWorkloadIndex is the field index of the pod cache by
// queues.LabelWorkload, which the pod gate counts a workload's pods by.
const PodWorkloadIndex = "tally.dev/workload"

// IndexPodWorkload is PodWorkloadIndex's function.
func IndexPodWorkload(obj client.Object) []string {
	if v := obj.GetLabels()[queues.LabelWorkload]; v != "" {
		return []string{v}
	}
	return nil
}

// PodGate judges every new pod of a managed namespace as it will run
// (after the other mutating webhooks: it is called again when one of
// them changes the pod). A pod that asks for no resource a ClusterQueue
// covers is left alone. Otherwise it must belong to a workload tally
// admitted, through its controller-owner chain in its namespace, keep to
// the nodes of the flavors that workload was admitted in (it is denied
// otherwise, see confine), and fit what it was admitted with beside its
// live pods, those being deleted included (queues.FitPods); it is then
// let through, labelled with the workload's UID so that the ledger
// counts it.
// A pod larger than the workload's pods is held by the scheduling gate,
// and the ledger requeues the workload at the pod's size
// (queues.AnnotationPodOverhead). A pod more than the workload's count
// is held by the gate too, as the workload's, and the ledger lets it run
// when one of the workload's pods ends. Any other pod (a bare Pod, a
// Deployment's) is queued on its own, as a single-pod workload
// (kinds.Pod). A workload's pods are counted in the cache, or on the API
// server for passWindow after the gate let one of them through.
//
// On an UPDATE (PodGuardPath) it denies, to anyone but tally, changes to
// tally's labels and annotations and the removal of tally's scheduling
// gate; on pods/resize, raising a covered resource.
type PodGate struct {
	// Jobs queues a pod on its own as it queues any workload.
	Jobs *JobMutator
	// Reader reads workloads, pods (indexed by PodWorkloadIndex),
	// LimitRanges and RuntimeClasses from the manager's cache.
	Reader client.Reader
	// APIReader reads an owner that the cache does not hold, or holds as
	// not admitted: tally may have admitted it a moment ago.
	APIReader client.Reader
	// Users are the user names tally acts as (see JobGuard.Users).
	Users   []string
	Decoder admission.Decoder

	mu sync.Mutex
	// passed is when the gate last let a pod of each workload run, for
	// passWindow.
	passed map[types.UID]time.Time
	swept  time.Time
}

// passWindow is how long after the gate lets a pod of a workload run it
// counts that workload's pods on the API server instead of in the
// cache. The cache sees a new pod some time after its create returns:
// counted there, a pod made right after it would find room that it
// holds. A workload whose pods are made in a burst (a Job's, by its
// controller) has them counted on the API server, one list each.
const passWindow = 30 * time.Second

// passedRecently says whether the gate let a pod of workload uid run in
// the last passWindow.
func (g *PodGate) passedRecently(uid types.UID, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.passed[uid]
	return ok && now.Sub(t) < passWindow
}

// notePass records that the gate let a pod of workload uid run, and
// forgets the workloads whose window has closed.
func (g *PodGate) notePass(uid types.UID, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.passed == nil {
		g.passed = map[types.UID]time.Time{}
	}
	if now.Sub(g.swept) >= passWindow {
		for u, t := range g.passed {
			if now.Sub(t) >= passWindow {
				delete(g.passed, u)
			}
		}
		g.swept = now
	}
	g.passed[uid] = now
}

// Handle implements admission.Handler.
func (g *PodGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch req.Operation {
	case admissionv1.Create:
		return g.create(ctx, req)
	case admissionv1.Update:
		if u := req.UserInfo.Username; u != "" && slices.Contains(g.Users, u) {
			return admission.Allowed("tally's own update")
		}
		return g.update(req)
	}
	return admission.Allowed("")
}

func (g *PodGate) create(ctx context.Context, req admission.Request) admission.Response {
	if len(req.Object.Raw) > maxGuardedObject {
		return admission.Errored(http.StatusRequestEntityTooLarge,
			fmt.Errorf("tally: a Pod of %d bytes is larger than the %d-byte limit", len(req.Object.Raw), maxGuardedObject))
	}
	pod := &corev1.Pod{}
	if err := decodeObject(g.Decoder, req.Object, pod, corev1.SchemeGroupVersion.WithKind("Pod")); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Pod: %w", err))
	}
	if req.Namespace != "" || pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	ns, err := g.Jobs.namespace(ctx, pod.Namespace)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"tally: cannot read namespace %s to judge this Pod (%v); this is temporary, retry the request", pod.Namespace, err))
	}
	cfg := g.Jobs.Store.Load()
	if !queues.Managed(cfg, ns.Name, ns.Annotations[queues.AnnotationNamespaceQueue], g.Jobs.Namespace) {
		if cfg == nil && ns.Labels[queues.LabelManaged] == "true" {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"tally: namespace %s is managed, but this tally replica has not loaded a valid config yet; retry the request", ns.Name))
		}
		return admission.Allowed("namespace not managed by tally")
	}
	reqs := queues.PodRequests(&pod.Spec)
	if len(pod.Spec.ResourceClaims) == 0 && !slices.ContainsFunc(reqs.Names(), cfg.Covers) {
		return admission.Allowed("asks for no resource a ClusterQueue covers, and claims no device")
	}
	root, admitted, err := g.queuedRoot(ctx, pod)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"tally: cannot read the owners of this Pod (%v); this is temporary, retry the request", err))
	}
	if root != nil && !admitted {
		// Its workload waits (or its controller has yet to see it
		// suspended): the pod waits with it, as its own, and runs once
		// the workload is admitted, if it fits; its controller deletes
		// it otherwise.
		return podPatch(pod, root, true, fmt.Sprintf("part of %s, which waits for its admission", root.Describe()))
	}
	if root != nil {
		if denial := confine(cfg, root, pod); denial != "" {
			return admission.Denied(denial)
		}
		d, err := g.rootDefaults(ctx, cfg, root, pod)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"tally: cannot read the LimitRanges, RuntimeClasses or ResourceClaimTemplates of this Pod (%v); this is temporary, retry the request", err))
		}
		if denial := replacedTemplate(root, d, pod); denial != "" {
			return admission.Denied(denial)
		}
		claims, why := d.ClaimRequests(&pod.Spec)
		if why != "" {
			return admission.Denied(fmt.Sprintf("tally: a pod of %s may get devices tally cannot charge: %s", root.Describe(), why))
		}
		reqs = queues.WithClaims(reqs, claims)
		now := time.Now()
		r := g.Reader
		if g.passedRecently(root.Meta.UID, now) {
			r = g.APIReader
		}
		fit, err := g.fit(ctx, cfg, root, d, reqs, r)
		if err == nil && fit == queues.PodTooMany && r != g.APIReader {
			// The cache may not have seen a pod end that the workload's
			// controller replaces.
			fit, err = g.fit(ctx, cfg, root, d, reqs, g.APIReader)
		}
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
				"tally: cannot count the pods of %s (%v); this is temporary, retry the request", root.Describe(), err))
		}
		var warning string
		switch fit {
		case queues.PodFits:
			g.notePass(root.Meta.UID, now)
			if queues.Spread(cfg, root.Meta.Annotations[queues.AnnotationTopology], pod.Labels[queues.LabelPodSet]) {
				// Its pod set is spread over several domains of a
				// topology: the gate gives it its own as it releases it.
				return podPatch(pod, root, true, fmt.Sprintf("part of %s, which tally admitted; it waits to be given its topology domain", root.Describe()))
			}
			return podPatch(pod, root, false, fmt.Sprintf("part of %s, which tally admitted", root.Describe()))
		case queues.PodTooLarge:
			warning = fmt.Sprintf("tally: this pod asks for %s, more than the pods %s was admitted with; it waits while tally requeues %s at this size",
				reqs, root.Describe(), root.Meta.Name)
		default: // one more than the workload was admitted with
			warning = fmt.Sprintf("tally: %s already runs as many pods as it was admitted with; this pod waits behind the scheduling gate %s until one of them ends",
				root.Describe(), queues.SchedulingGate)
		}
		// It waits as the workload's.
		resp := podPatch(pod, root, true, "")
		resp.Warnings = []string{warning}
		return resp
	}
	labels := maps.Clone(pod.Labels)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[queues.LabelWorkload] = queues.PodWorkload
	o, err := kinds.Pod{}.Read(pod)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Pod: %w", err))
	}
	before := o.Fields()
	before.Labels = labels
	return g.Jobs.enqueue(ctx, o, before)
}

// podPatch lets a pod of root through, labelled with root's UID (so
// that the ledger counts it) and held by tally's scheduling gate when
// gate says, without it otherwise.
func podPatch(pod *corev1.Pod, root *kinds.Object, gate bool, reason string) admission.Response {
	resp := admission.Allowed(reason)
	if err := withPatch(&resp, kinds.PartPatch(pod, root.Meta.UID, gate)); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return resp
}

// queuedRoot returns the workload that pod's controller-owner chain
// leads to, in its namespace, when tally queues it (nil otherwise), and
// whether tally has admitted it (it runs: only tally un-suspends a
// managed workload) and it has not finished. The chain runs through
// workloads of registered kinds (a JobSet's Job) and the objects their
// operators make pods through (kinds.PodParents). An owner is read from
// the cache first; one the cache does not hold, or holds as not running,
// is read again from the API server.
func (g *PodGate) queuedRoot(ctx context.Context, pod *corev1.Pod) (*kinds.Object, bool, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	for range maxOwnerDepth {
		if ref == nil {
			return nil, false, nil
		}
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		k := g.Jobs.Kinds.For(gvk)
		if k == nil || kinds.IsPodKind(k) {
			if !g.Jobs.Kinds.PodParent(gvk.Kind) {
				return nil, false, nil
			}
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			found, err := g.get(ctx, pod.Namespace, ref, m, g.APIReader)
			if !found || err != nil {
				return nil, false, err
			}
			ref = metav1.GetControllerOfNoCopy(m)
			continue
		}
		o, err := g.read(ctx, k, pod.Namespace, ref, g.Reader)
		if o == nil || err != nil {
			return nil, false, err
		}
		if o.Meta.Labels[queues.LabelQueue] != "" {
			if o.Suspended || o.Finished {
				// Perhaps admitted since the cache saw it.
				fresh, err := g.read(ctx, k, pod.Namespace, ref, g.APIReader)
				if err != nil {
					return nil, false, err
				}
				if fresh == nil {
					return nil, false, nil
				}
				o = fresh
			}
			return o, !o.Suspended && !o.Finished, nil
		}
		ref = g.Jobs.Kinds.Owner(o)
	}
	return nil, false, nil
}

// read reads owner ref of kind k in ns through r, and from the API
// server when r does not hold it. It returns nil when it does not exist
// with ref's UID.
func (g *PodGate) read(ctx context.Context, k kinds.Kind, ns string, ref *metav1.OwnerReference, r client.Reader) (*kinds.Object, error) {
	obj := k.New()
	found, err := g.get(ctx, ns, ref, obj, r)
	if !found || err != nil {
		return nil, err
	}
	o, err := k.Read(obj)
	if err != nil {
		return nil, nil
	}
	return o, nil
}

// get reads ref into obj through r, then the API server; found says it
// exists with ref's UID.
func (g *PodGate) get(ctx context.Context, ns string, ref *metav1.OwnerReference, obj client.Object, r client.Reader) (bool, error) {
	key := client.ObjectKey{Namespace: ns, Name: ref.Name}
	err := r.Get(ctx, key, obj)
	if (apierrors.IsNotFound(err) || err == nil && obj.GetUID() != ref.UID) && r != g.APIReader {
		err = g.APIReader.Get(ctx, key, obj)
	}
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return obj.GetUID() == ref.UID, nil
}

// fit judges a new pod that asks for reqs against what root was admitted
// with (its pods read with defaults d) and the pods it runs, as r lists
// them (the cache, by PodWorkloadIndex, or the API server).
func (g *PodGate) fit(ctx context.Context, cfg *queues.Config, root *kinds.Object, d *queues.PodDefaults, reqs flavors.Resources, r client.Reader) (queues.PodFit, error) {
	w := root.WorkloadIn(root.Meta.Labels[queues.LabelQueue], 0, d)
	pods := &corev1.PodList{}
	// The cache's pods are only read: not copied.
	opts := []client.ListOption{client.InNamespace(root.Meta.Namespace), client.MatchingFields{PodWorkloadIndex: string(root.Meta.UID)}, client.UnsafeDisableDeepCopy}
	if r == g.APIReader {
		opts = []client.ListOption{client.InNamespace(root.Meta.Namespace), client.MatchingLabels{queues.LabelWorkload: string(root.Meta.UID)}}
	}
	if err := r.List(ctx, pods, opts...); err != nil {
		return 0, err
	}
	var live []flavors.Resources
	for i := range pods.Items {
		p := &pods.Items[i]
		// A pod being deleted holds its resources until it is gone: a
		// Job's controller replaces it at once, and the replacement
		// waits for it.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || kinds.Gated(p) {
			continue
		}
		if err := readClaimTemplates(ctx, g.Reader, d, p.Namespace, &p.Spec); err != nil {
			return 0, err
		}
		claims, _ := d.ClaimRequests(&p.Spec)
		live = append(live, queues.WithClaims(queues.PodRequests(&p.Spec), claims))
	}
	return queues.FitPods(w.PodSets, live, reqs, cfg.Covers), nil
}

// confine says why pod, a new pod of admitted workload root, is denied
// for where it may run ("" if it is not): it must run only on the nodes
// of the flavors root was admitted in (queues.PodConfined), as the pods
// its controller makes from the pod templates tally narrowed do. A pod
// that names a node, or keeps to other nodes, would take capacity that
// root's queue was not charged for.
func confine(cfg *queues.Config, root *kinds.Object, pod *corev1.Pod) string {
	names := queues.AdmittedFlavors(root.Meta.Annotations[queues.AnnotationFlavors])
	nodeLabels, missing, ok := cfg.NodeLabelsOf(names)
	if !ok {
		return fmt.Sprintf("tally: %s was admitted in flavor %s, which the config no longer holds: tally cannot tell which nodes its pods may run on, and lets none be made", root.Describe(), missing)
	}
	flavorNames := strings.Join(names, "+")
	if queues.PodConfined(&pod.Spec, nodeLabels) {
		return confineToDomains(cfg, root, pod, flavorNames)
	}
	if pod.Spec.NodeName != "" {
		return fmt.Sprintf("tally: spec.nodeName: a pod of %s may not name its node: it runs on the nodes of flavor %s, which the scheduler places it on", root.Describe(), flavorNames)
	}
	return fmt.Sprintf("tally: spec.nodeSelector: a pod of %s must run on the nodes of flavor %s, which %s was admitted in: it needs node labels %s in spec.nodeSelector, or in every term of spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, as its pod templates have them",
		root.Describe(), flavorNames, root.Meta.Name, labels.SelectorFromSet(nodeLabels))
}

// confineToDomains says why pod, a new pod of admitted workload root,
// is denied for where it may run in the topology of its flavor ("" if it
// is not): it must keep to the domain of one of root's pod sets, as the
// pods its controller makes do (queues.TopologyPins).
func confineToDomains(cfg *queues.Config, root *kinds.Object, pod *corev1.Pod, flavorNames string) string {
	ann := root.Meta.Annotations[queues.AnnotationTopology]
	if ann == "" {
		return ""
	}
	pins, err := queues.TopologyPins(cfg, ann)
	if err != nil {
		return fmt.Sprintf("tally: %s was placed in a topology that the config no longer holds (%v): tally cannot tell which nodes its pods may run on, and lets none be made", root.Describe(), err)
	}
	var want []string
	for _, pin := range pins {
		if queues.PodConfined(&pod.Spec, pin) {
			return ""
		}
		want = append(want, labels.SelectorFromSet(pin).String())
	}
	return fmt.Sprintf("tally: spec.nodeSelector: a pod of %s must run in the topology domain of flavor %s that %s was placed in: it needs node labels %s in spec.nodeSelector, or in every term of spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, as its pod templates have them",
		root.Describe(), flavorNames, root.Meta.Name, strings.Join(want, " or "))
}

// podDefaults are the pod defaults of o's namespace, as the API server
// applies them to o's pods, read through r, with config cfg; a
// ResourceClaimTemplate that r does not hold is read through api, unless
// it is nil (a cache may not have seen one made a moment ago).
func podDefaults(ctx context.Context, r, api client.Reader, o *kinds.Object, cfg *queues.Config) (*queues.PodDefaults, error) {
	ranges := &corev1.LimitRangeList{}
	if err := r.List(ctx, ranges, client.InNamespace(o.Meta.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	d := &queues.PodDefaults{Config: cfg}
	ptrs := make([]*corev1.LimitRange, len(ranges.Items))
	for i := range ranges.Items {
		ptrs[i] = &ranges.Items[i]
	}
	d.Requests = queues.LimitRangeRequests(ptrs)
	for _, ps := range o.PodSets {
		name := ps.Template.Spec.RuntimeClassName
		if name == nil || d.Overhead[*name] != nil {
			continue
		}
		rc := &nodev1.RuntimeClass{}
		if err := r.Get(ctx, client.ObjectKey{Name: *name}, rc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if rc.Overhead != nil && rc.Overhead.PodFixed != nil {
			if d.Overhead == nil {
				d.Overhead = map[string]corev1.ResourceList{}
			}
			d.Overhead[*name] = rc.Overhead.PodFixed
		}
	}
	for _, ps := range o.PodSets {
		if err := readClaimTemplates(ctx, r, d, o.Meta.Namespace, &ps.Template.Spec); err != nil {
			return nil, err
		}
		if api == nil {
			continue
		}
		if err := readClaimTemplates(ctx, api, d, o.Meta.Namespace, &ps.Template.Spec); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// readClaimTemplates reads into d's ClaimTemplates, through r, the
// ResourceClaimTemplates of namespace ns that spec names and d does not
// hold yet; one that does not exist is left out (the claim is then not
// charged: queues.PodDefaults.ClaimRequests says why).
func readClaimTemplates(ctx context.Context, r client.Reader, d *queues.PodDefaults, ns string, spec *corev1.PodSpec) error {
	for _, name := range queues.ClaimTemplateNames(spec) {
		if d.ClaimTemplates[name] != nil {
			continue
		}
		t := &resourcev1.ResourceClaimTemplate{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return err
		}
		if d.ClaimTemplates == nil {
			d.ClaimTemplates = map[string]*resourcev1.ResourceClaimTemplate{}
		}
		d.ClaimTemplates[name] = queues.StripClaimTemplate(t)
	}
	return nil
}

// rootDefaults are the pod defaults of root's namespace, with the
// ResourceClaimTemplates that root's pod templates and pod name read
// from the API server: the claims of pod are made from them as they are
// now, which a cache may not have seen yet.
func (g *PodGate) rootDefaults(ctx context.Context, cfg *queues.Config, root *kinds.Object, pod *corev1.Pod) (*queues.PodDefaults, error) {
	d, err := podDefaults(ctx, g.Reader, nil, root, cfg)
	if err != nil {
		return nil, err
	}
	if len(pod.Spec.ResourceClaims) == 0 && d.ClaimTemplates == nil {
		return d, nil
	}
	d.ClaimTemplates = nil
	specs := []*corev1.PodSpec{&pod.Spec}
	for _, ps := range root.PodSets {
		specs = append(specs, &ps.Template.Spec)
	}
	for _, spec := range specs {
		if err := readClaimTemplates(ctx, g.APIReader, d, pod.Namespace, spec); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// replacedTemplate says why pod, a new pod of admitted workload root, is
// denied for a ResourceClaimTemplate it names that is not the one root
// was charged from ("" if none is): it was deleted and made again since
// root's admission was decided, perhaps asking for more devices.
func replacedTemplate(root *kinds.Object, d *queues.PodDefaults, pod *corev1.Pod) string {
	charged := queues.ParseClaimTemplates(root.Meta.Annotations[queues.AnnotationClaimTemplates])
	now := d.ClaimTemplateUIDs(&pod.Spec)
	for _, name := range queues.ClaimTemplateNames(&pod.Spec) {
		uid, ok := charged[name]
		if ok && now[name] != uid {
			return fmt.Sprintf("tally: spec.resourceClaims: ResourceClaimTemplate %s/%s is not the one %s was admitted with: it was replaced since; delete and re-create the %s to have it charged for the template as it is now",
				pod.Namespace, name, root.Describe(), root.Kind.GVK().Kind)
		}
	}
	return ""
}

// update guards a pod against everyone but tally (Handle has let tally's
// own updates through).
func (g *PodGate) update(req admission.Request) admission.Response {
	oldPod, pod := &corev1.Pod{}, &corev1.Pod{}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	if err := decodeObject(g.Decoder, req.OldObject, oldPod, gvk); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding the old Pod: %w", err))
	}
	if err := decodeObject(g.Decoder, req.Object, pod, gvk); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Pod: %w", err))
	}
	if errs := GuardPod(oldPod, pod, req.SubResource, g.Jobs.Store.Load()); len(errs) > 0 {
		return admission.Denied("tally: " + strings.Join(errs, "; "))
	}
	return admission.Allowed("")
}

// GuardPod returns what an update of a pod from old to cur (of
// subresource sub) changes that only tally may change: tally's labels and
// annotations and Kueue's queue label, tally's scheduling gate (which
// only admission removes) and, through pods/resize, a resource that a
// ClusterQueue of cfg covers, raised (cfg nil: any resource).
func GuardPod(old, cur *corev1.Pod, sub string, cfg *queues.Config) []string {
	var errs []string
	if sub == "resize" {
		was, now := queues.PodRequests(&old.Spec), queues.PodRequests(&cur.Spec)
		for _, r := range now.Names() {
			if now[r] > was[r] && (cfg == nil || cfg.Covers(r)) {
				errs = append(errs, fmt.Sprintf("spec.containers[*].resources: raising %s from %s to %s is denied: the pod runs on what tally admitted; delete it and create a larger one, which is queued",
					r, was[r].Format(r), now[r].Format(r)))
			}
		}
		return errs
	}
	for _, path := range []struct {
		field    string
		old, cur map[string]string
	}{{"metadata.labels", old.Labels, cur.Labels}, {"metadata.annotations", old.Annotations, cur.Annotations}} {
		keys := slices.Sorted(maps.Keys(path.old))
		for k := range path.cur {
			if _, ok := path.old[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "tally.dev/") && k != queues.LabelKueueQueueName {
				continue
			}
			if v, ok := path.cur[k]; !ok || v != path.old[k] {
				errs = append(errs, fmt.Sprintf("%s[%s]: only tally may change it", path.field, k))
			}
		}
	}
	if kinds.Gated(old) && !kinds.Gated(cur) {
		errs = append(errs, fmt.Sprintf("spec.schedulingGates[%s]: only tally removes it, when it admits the pod", queues.SchedulingGate))
	}
	return errs
}
