package webhook

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// JobPath is where the Job mutating webhook is served.
const JobPath = "/mutate-batch-v1-job"

// JobMutator queues new Jobs of managed namespaces: it suspends them,
// labels their state and queue, and requires their candidate flavors'
// nodes.
type JobMutator struct {
	Store *queues.Store
	// Namespaces reads Namespaces from an in-memory cache.
	Namespaces client.Reader
	// APIReader reads a Namespace from the API server when the cache does
	// not hold it yet (a namespace bound and used at once).
	APIReader client.Reader
	// Namespace is tally's own namespace.
	Namespace string
	Decoder   admission.Decoder
}

// Handle implements admission.Handler.
func (m *JobMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	if resp := checkQuantities(req); resp != nil {
		return *resp
	}
	job := &batchv1.Job{}
	if err := m.Decoder.DecodeRaw(req.Object, job); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Job: %w", err))
	}
	// The API server always sends metadata with a name or generateName,
	// and a pod template with containers; without them there would be no
	// metadata, spec or pod spec for the JSON patch to add to.
	if job.Name == "" && job.GenerateName == "" {
		return admission.Errored(http.StatusBadRequest, errors.New("tally: decoding Job: metadata: neither name nor generateName is set"))
	}
	if len(job.Spec.Template.Spec.Containers) == 0 {
		return admission.Errored(http.StatusBadRequest, errors.New("tally: decoding Job: spec.template.spec.containers: a Job needs at least one container"))
	}
	// The request's namespace is the API server's word; the object's own
	// field is only the client's.
	if req.Namespace != "" || job.Namespace == "" {
		job.Namespace = req.Namespace
	}
	ns, err := m.namespace(ctx, job.Namespace)
	if err != nil {
		// The webhook is called only for namespaces labelled managed, so
		// letting the Job through would let it run unqueued.
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"tally: cannot read namespace %s to queue this Job (%v); this is temporary, retry the request", job.Namespace, err))
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
	queue, err := cfg.Route(ns.Name, annotation, job.Labels)
	if err != nil {
		return admission.Denied("tally: " + err.Error())
	}
	if queue == "" {
		resp := admission.Allowed("no queue")
		resp.Warnings = []string{unqueuedWarning(cfg, ns.Name)}
		return resp
	}
	before := mutable(job)
	warnings, err := MutateJob(cfg, job, queue, ns.Labels)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	resp := admission.Allowed("")
	if resp.Patches = before.patch(mutable(job)); len(resp.Patches) > 0 {
		resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	}
	resp.Warnings = warnings
	return resp
}

// namespace reads a Namespace from the cache, and from the API server when
// the cache does not hold it.
func (m *JobMutator) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := m.Namespaces.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err == nil || m.APIReader == nil {
		return ns, err
	}
	if err := m.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// unqueuedWarning tells the user of a managed namespace that their Job
// named no queue and none applies, so it runs outside any quota.
func unqueuedWarning(cfg *queues.Config, ns string) string {
	return fmt.Sprintf("tally: this Job is not queued and runs outside any quota: it has no %s label, and namespace %s has no %s annotation and no LocalQueue named %s (its LocalQueues: %s)",
		queues.LabelKueueQueueName, ns, queues.AnnotationNamespaceQueue, queues.DefaultLocalQueue, strings.Join(cfg.LocalQueuesIn(ns), ", "))
}

// jobFields are the parts of a Job that MutateJob may change.
type jobFields struct {
	labels, annotations map[string]string
	suspend             bool
	affinity            *corev1.Affinity
	tolerations         []corev1.Toleration
}

// mutable copies out the parts of job that MutateJob may change.
func mutable(job *batchv1.Job) jobFields {
	spec := &job.Spec.Template.Spec
	return jobFields{
		labels: maps.Clone(job.Labels), annotations: maps.Clone(job.Annotations),
		suspend: ptr.Deref(job.Spec.Suspend, false), affinity: spec.Affinity.DeepCopy(),
		tolerations: slices.Clone(spec.Tolerations),
	}
}

// patch is the JSON patch from f to after: each changed field is replaced
// whole, and nothing else is touched, so fields that the API server knows
// and tally's client types do not are kept.
func (f jobFields) patch(after jobFields) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	set := func(path string, changed bool, value any) {
		if changed {
			ops = append(ops, jsonpatch.NewOperation("add", path, value))
		}
	}
	set("/metadata/labels", !maps.Equal(f.labels, after.labels), after.labels)
	set("/metadata/annotations", !maps.Equal(f.annotations, after.annotations), after.annotations)
	set("/spec/suspend", f.suspend != after.suspend, after.suspend)
	set("/spec/template/spec/affinity", !equality.Semantic.DeepEqual(f.affinity, after.affinity), after.affinity)
	set("/spec/template/spec/tolerations", !equality.Semantic.DeepEqual(f.tolerations, after.tolerations), after.tolerations)
	return ops
}

// MutateJob applies tally's creation-time changes to job, queued in
// ClusterQueue queue (see queues.Config.Route) in a namespace with labels
// nsLabels. It is idempotent: the Job's own affinity terms are kept in an
// annotation the first time, and read back from it after. cfg may be nil
// before any config has loaded; the Job is then queued as pending and
// sorted out by the ledger.
func MutateJob(cfg *queues.Config, job *batchv1.Job, queue string, nsLabels map[string]string) ([]string, error) {
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	spec := &job.Spec.Template.Spec
	user := queues.RequiredTerms(spec)
	if enc, ok := job.Annotations[queues.AnnotationUserAffinity]; ok {
		var err error
		if user, err = queues.DecodeUserTerms(enc); err != nil {
			return nil, fmt.Errorf("tally: metadata.annotations[%s]: %w", queues.AnnotationUserAffinity, err)
		}
	}
	job.Annotations[queues.AnnotationUserAffinity] = queues.EncodeUserTerms(user)
	job.Spec.Suspend = ptr.To(true)

	job.Labels[queues.LabelQueue] = queue
	job.Labels[queues.LabelState] = string(queues.StatePending)
	if cfg == nil {
		return []string{"tally has not loaded a valid config yet; the Job waits until one is in force"}, nil
	}

	w := queues.WorkloadFromJob(job, queue, 0)
	snap := queues.NewSnapshot(cfg, nil, map[string]labels.Set{job.Namespace: nsLabels})
	if _, v := snap.Assign(w); v.Kind == queues.Never {
		job.Labels[queues.LabelState] = string(queues.StateInadmissible)
		return []string{fmt.Sprintf("tally: Job %s/%s will not be admitted. %s", job.Namespace, job.Name, v.Message)}, nil
	}
	cq := cfg.ClusterQueues[queue]
	combos := cfg.Candidates(cq, w)
	setRequired(spec, queues.NodeSelector(user, combos))
	spec.Tolerations = flavors.MergeTolerations(spec.Tolerations, queues.Tolerations(combos)...)
	return nil, nil
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
