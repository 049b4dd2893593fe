package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/flavors"
	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// JobGuardPath is where the Job validating webhook is served.
const JobGuardPath = "/validate-batch-v1-job"

// maxGuardedObject bounds each Job the guard decodes. The API server
// stores no object larger than about 1.5 MiB, so twice that leaves room
// for JSON being larger than the stored form.
const maxGuardedObject = 3 << 20

// maxListed bounds how many violations a denial lists.
const maxListed = 10

// JobGuard keeps tally's decisions about a Job in tally's hands: on an
// UPDATE by anyone but tally, it denies changes to the tally.dev/ labels and
// annotations and to Kueue's kueue.x-k8s.io/queue-name label and, on a Job
// tally manages, un-suspending it, changing where its pods may run, and
// raising the pod count or the per-pod resources of a running Job. On a
// workload's /scale subresource it denies a scale-up of an admitted
// workload (see handleScale).
type JobGuard struct {
	// Users are the user names tally itself acts as; their updates pass.
	Users   []string
	Decoder admission.Decoder
	// Reader reads the workload a /scale request scales, to tell whether
	// tally admitted it. When it is nil, every scale-up is denied: the
	// webhook only sees managed namespaces.
	Reader client.Reader
	// Kinds are the kinds tally queues (nil: the built-in ones).
	Kinds *kinds.Registry
}

// Handle implements admission.Handler.
func (g *JobGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if u := req.UserInfo.Username; u != "" && slices.Contains(g.Users, u) {
		return admission.Allowed("tally's own update")
	}
	for _, raw := range [][]byte{req.Object.Raw, req.OldObject.Raw} {
		if len(raw) > maxGuardedObject {
			return admission.Errored(http.StatusRequestEntityTooLarge,
				fmt.Errorf("tally: a Job of %d bytes is larger than the %d-byte limit", len(raw), maxGuardedObject))
		}
	}
	if req.SubResource == "scale" {
		return g.handleScale(ctx, req)
	}
	k, resp := kindOf(g.Kinds, req)
	if resp != nil {
		return *resp
	}
	if resp := checkQuantities(req, k); resp != nil {
		return *resp
	}
	name := k.GVK().Kind
	oldObj, obj := k.New(), k.New()
	if err := decodeObject(g.Decoder, req.OldObject, oldObj, k.GVK()); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding the old %s: %w", name, err))
	}
	if err := decodeObject(g.Decoder, req.Object, obj, k.GVK()); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", name, err))
	}
	old, err := k.Read(oldObj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding the old %s: %w", name, err))
	}
	cur, err := k.Read(obj)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding %s: %w", name, err))
	}
	if errs := Guard(old, cur); len(errs) > 0 {
		msgs := queues.FormatErrors(errs)
		if len(msgs) > maxListed {
			msgs = append(msgs[:maxListed], fmt.Sprintf("and %d more", len(msgs)-maxListed))
		}
		return admission.Denied("tally: " + strings.Join(msgs, "; "))
	}
	return admission.Allowed("")
}

// GuardJob applies Guard to a Job.
func GuardJob(old, job *batchv1.Job) field.ErrorList {
	o, _ := kinds.Job{}.Read(old)
	n, _ := kinds.Job{}.Read(job)
	return Guard(o, n)
}

// managed says whether tally manages a workload: it carries tally's
// queue or state label.
func managed(meta *metav1.ObjectMeta) bool {
	return meta.Labels[queues.LabelQueue] != "" || meta.Labels[queues.LabelState] != ""
}

// Guard returns what an update from old to cur changes that only tally
// may change. A workload is managed when it carries tally's queue or
// state label.
//
// Where its pods may run is not to be changed at all by others, not even
// narrowed: telling a narrowing from a widening of arbitrary node affinity
// is not worth the risk of getting it wrong. The shape of a running
// workload, which its quota was admitted for, may shrink but not grow: no
// more pods, and no pod that requests more. A pod set the object does
// not hold is compared too: where its template is patched (PatchPath, a
// TrainJob's runtime patches) its placement, and always its pods' size;
// a running workload whose pod sets can no longer be read has changed
// what they are made from.
func Guard(old, cur *kinds.Object) field.ErrorList {
	kind := old.Kind.GVK().Kind
	meta := field.NewPath("metadata")
	errs := reservedKeys(meta.Child("labels"), "label", kind, old.Meta.Labels, cur.Meta.Labels)
	errs = append(errs, reservedKeys(meta.Child("annotations"), "annotation", kind, old.Meta.Annotations, cur.Meta.Annotations)...)
	if !managed(old.Meta) {
		return errs
	}
	if old.Suspended && !cur.Suspended {
		errs = append(errs, field.Forbidden(path(old.Kind.SuspendPath()), fmt.Sprintf(
			"only tally may un-suspend a %s in a managed namespace; it is admitted when its ClusterQueue has quota (see kubectl describe %s)", kind, strings.ToLower(kind))))
	}
	if !old.Suspended && !cur.Suspended {
		errs = append(errs, grown(old, cur)...)
	}
	templates := map[string]*corev1.PodSpec{}
	for _, ps := range old.PodSets {
		templates[ps.Name] = &ps.Template.Spec
	}
	for _, ps := range cur.PodSets {
		pod := path(ps.Path).Child("spec")
		switch {
		case ps.PatchPath != nil:
			pod = path(ps.PatchPath)
		case ps.Path == nil:
			continue
		}
		o, n := templates[ps.Name], &ps.Template.Spec
		if o == nil {
			o = &corev1.PodSpec{}
		}
		for _, c := range []struct {
			name string
			same bool
		}{
			{"affinity", equality.Semantic.DeepEqual(o.Affinity, n.Affinity)},
			{"nodeSelector", equality.Semantic.DeepEqual(o.NodeSelector, n.NodeSelector)},
			{"tolerations", equality.Semantic.DeepEqual(o.Tolerations, n.Tolerations)},
		} {
			switch {
			case c.same:
			case ps.Path == nil:
				errs = append(errs, field.Forbidden(pod, fmt.Sprintf(
					"only tally may change the %s of a %s's %s pods in a managed namespace; tally pins its pods to the nodes of its ClusterQueue's flavors, so no change is allowed, not even a narrowing (delete and re-create the %s instead)", c.name, kind, ps.Name, kind)))
			default:
				errs = append(errs, field.Forbidden(pod.Child(c.name), fmt.Sprintf(
					"only tally may change the %s of a %s in a managed namespace; tally pins its pods to the nodes of its ClusterQueue's flavors, so no change is allowed, not even a narrowing (delete and re-create the %s instead)", c.name, kind, kind)))
			}
		}
	}
	return errs
}

// grown reports how a running workload grows from old to cur: a pod set
// of more pods, a new pod set of pods, or a pod template whose pods
// request more of a resource, or a resource they did not request.
func grown(old, cur *kinds.Object) field.ErrorList {
	kind := old.Kind.GVK().Kind
	before := map[string]*kinds.PodSet{}
	for i := range old.PodSets {
		before[old.PodSets[i].Name] = &old.PodSets[i]
	}
	var errs field.ErrorList
	if cur.Unresolved != "" && old.Unresolved == "" {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf(
			"only tally may change what a running %s's pods are made from in a managed namespace; its pods can no longer be read: %s (delete and re-create the %s instead)", kind, cur.Unresolved, kind)))
	}
	for _, ps := range cur.PodSets {
		was, had := before[ps.Name]
		count := int64(0)
		if had {
			count = was.Count
		}
		if ps.Count > count {
			what := "pod count"
			if !had {
				what = "pod sets"
			}
			at := ps.CountPath
			if at == nil {
				at = ps.Path
			}
			errs = append(errs, field.Forbidden(path(at), fmt.Sprintf(
				"only tally may raise the %s of a running %s in a managed namespace; its quota was admitted for %d pods, not %d (delete and re-create the %s to run more)", what, kind, count, ps.Count, kind)))
		}
		// A new pod set's pods are denied above. A pod set the object does
		// not hold changes only by the fields that shape it (a TrainJob's
		// resourcesPerNode), reported at spec.
		if !had {
			continue
		}
		if !equality.Semantic.DeepEqual(was.Template.Spec.ResourceClaims, ps.Template.Spec.ResourceClaims) {
			errs = append(errs, field.Forbidden(path(ps.Path).Child("spec", "resourceClaims"), fmt.Sprintf(
				"only tally may change the resource claims of a running %s's pods in a managed namespace: its quota was admitted for the devices they claimed (delete and re-create the %s to claim others)", kind, kind)))
		}
		if from, to := raised(queues.PodRequests(&was.Template.Spec), queues.PodRequests(&ps.Template.Spec)); from != "" {
			whose := kind + "'s pods"
			if ps.Path == nil {
				whose = fmt.Sprintf("%s's %s pods", kind, ps.Name)
			}
			errs = append(errs, field.Forbidden(path(ps.Path), fmt.Sprintf(
				"only tally may raise the resources of a running %s in a managed namespace; its quota was admitted for pods of %s, not %s (delete and re-create the %s to run larger pods)", whose, from, to, kind)))
		}
	}
	return errs
}

// raised lists the resources of which cur asks more than old, a resource
// old does not name counting as none: as they were and as they are, e.g.
// "cpu=1, nvidia.com/gpu=0" and "cpu=2, nvidia.com/gpu=1", maxListed at
// most. Both are empty when none is raised.
func raised(old, cur flavors.Resources) (was, is string) {
	var from, to []string
	more := 0
	for _, n := range cur.Names() {
		q, o := cur[n], old[n]
		switch {
		case q <= o:
		case len(from) == maxListed:
			more++
		default:
			from = append(from, fmt.Sprintf("%s=%s", n, o.Format(n)))
			to = append(to, fmt.Sprintf("%s=%s", n, q.Format(n)))
		}
	}
	if more > 0 {
		from = append(from, fmt.Sprintf("and %d more", more))
		to = append(to, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(from, ", "), strings.Join(to, ", ")
}

// path turns a JSON path into a field path; an empty one (a pod set the
// object does not hold) into spec.
func path(p []string) *field.Path {
	if len(p) == 0 {
		return field.NewPath("spec")
	}
	return field.NewPath(p[0], p[1:]...)
}

// reservedKeys reports every tally.dev/ key added, changed or removed
// between old and cur, except the priority class label, which users set,
// and of the labels also Kueue's queue-name, which chose the queue.
func reservedKeys(p *field.Path, kind, workload string, old, cur map[string]string) field.ErrorList {
	seen := map[string]bool{}
	for _, m := range []map[string]string{old, cur} {
		for k := range m {
			if strings.HasPrefix(k, "tally.dev/") && !(kind == "label" && k == queues.LabelPriorityClass) ||
				kind == "label" && k == queues.LabelKueueQueueName {
				seen[k] = true
			}
		}
	}
	var errs field.ErrorList
	for _, k := range queues.SortedKeys(seen) {
		was, had := old[k]
		is, has := cur[k]
		verb := "change"
		switch {
		case had == has && was == is:
			continue
		case !had:
			verb = "add"
		case !has:
			verb = "remove"
		}
		why := fmt.Sprintf("tally records its decisions in the tally.dev/ %ss", kind)
		if kind == "label" && (k == queues.LabelQueue || k == queues.LabelKueueQueueName) {
			why = fmt.Sprintf("the queue is fixed when the %s is created (delete and re-create the %s to use another ClusterQueue)", workload, workload)
		}
		errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf("only tally may %s this %s of a %s in a managed namespace; %s", verb, kind, workload, why)))
	}
	return errs
}

// ServiceAccountUser is the user name of the service account tally runs as
// in namespace ns (deploy/base names it tally).
func ServiceAccountUser(ns string) string { return "system:serviceaccount:" + ns + ":tally" }

// WhoAmI asks the API server which user c acts as, with a
// SelfSubjectReview, so that tally knows its own updates when it runs
// with a kubeconfig rather than its service account.
func WhoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("SelfSubjectReview: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("SelfSubjectReview: the API server returned no user name")
	}
	return review.Status.UserInfo.Username, nil
}
