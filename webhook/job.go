package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/queues"
)

// JobPath is where the Job mutating webhook is served.
const JobPath = "/mutate-batch-v1-job"

// JobMutator queues new Jobs of bound namespaces: it suspends them, labels
// their state and queue, and requires their candidate flavors' nodes.
type JobMutator struct {
	Store *queues.Store
	// Namespaces reads Namespaces from an in-memory cache.
	Namespaces client.Reader
	// Namespace is tally's own namespace.
	Namespace string
	Decoder   admission.Decoder
}

// Handle implements admission.Handler.
func (m *JobMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	job := &batchv1.Job{}
	if err := m.Decoder.DecodeRaw(req.Object, job); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding Job: %w", err))
	}
	// The request's namespace is the API server's word; the object's own
	// field is only the client's.
	if req.Namespace != "" || job.Namespace == "" {
		job.Namespace = req.Namespace
	}
	ns := &corev1.Namespace{}
	if err := m.Namespaces.Get(ctx, client.ObjectKey{Name: job.Namespace}, ns); err != nil {
		return admission.Allowed("namespace not known to tally")
	}
	nsQueue := ns.Annotations[queues.AnnotationNamespaceQueue]
	if !queues.Managed(ns.Name, nsQueue, m.Namespace) {
		return admission.Allowed("namespace not bound to a ClusterQueue")
	}
	warnings, err := MutateJob(m.Store.Load(), job, nsQueue, ns.Labels)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	out, err := json.Marshal(job)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, out)
	resp.Warnings = warnings
	return resp
}

// MutateJob applies tally's creation-time changes to job, in a namespace
// bound to nsQueue with labels nsLabels. It is idempotent: the Job's own
// affinity terms are kept in an annotation the first time, and read back
// from it after. cfg may be nil before any config has loaded; the Job is
// then queued as pending and sorted out by the ledger.
func MutateJob(cfg *queues.Config, job *batchv1.Job, nsQueue string, nsLabels map[string]string) ([]string, error) {
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

	queue := nsQueue
	if cfg != nil {
		queue = cfg.Queue(job.Namespace, job.Labels, nsQueue)
	}
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
