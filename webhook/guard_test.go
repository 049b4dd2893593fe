package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

const (
	tallySA   = "system:serviceaccount:tally-system:tally"
	tallyHost = "kubernetes-admin"
	alice     = "alice"
)

func newGuard() *JobGuard {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return &JobGuard{Users: []string{ServiceAccountUser("tally-system"), tallyHost}, Decoder: admission.NewDecoder(scheme)}
}

// pendingJob is a Job as the mutating webhook leaves it: suspended,
// labelled and pinned to its candidate flavors.
func pendingJob() *batchv1.Job {
	j := makeJob("team", "1")
	j.Labels = map[string]string{queues.LabelQueue: "q", queues.LabelState: string(queues.StatePending), "app": "train"}
	j.Annotations = map[string]string{queues.AnnotationUserAffinity: "[]"}
	j.Spec.Suspend = ptr.To(true)
	j.Spec.Parallelism = ptr.To[int32](2)
	spec := &j.Spec.Template.Spec
	setRequired(spec, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}},
	}})
	spec.Tolerations = []corev1.Toleration{{Key: "on-demand", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	return j
}

// admittedJob is pendingJob after tally admitted it.
func admittedJob() *batchv1.Job {
	j := pendingJob()
	j.Spec.Suspend = ptr.To(false)
	j.Labels[queues.LabelState] = string(queues.StateAdmitted)
	j.Annotations[queues.AnnotationFlavors] = "main=spot"
	j.Annotations[queues.AnnotationAdmittedAt] = "2030-01-02T03:04:05Z"
	j.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = j.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[:1]
	return j
}

func updateRequest(t testing.TB, user string, old, job *batchv1.Job) admission.Request {
	t.Helper()
	req := jobRequest(t, job)
	req.Operation = admissionv1.Update
	req.UserInfo = authenticationv1.UserInfo{Username: user}
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	req.OldObject = runtime.RawExtension{Raw: raw}
	return req
}

const unsuspendDenied = "tally: spec.suspend: only tally may un-suspend a Job in a managed namespace; it is admitted when its ClusterQueue has quota (see kubectl describe job)"

func TestJobGuard(t *testing.T) {
	cases := []struct {
		name   string
		user   string
		old    func() *batchv1.Job
		change func(j *batchv1.Job)
		// denied lists substrings of the denial, in order; none: allowed.
		denied []string
	}{
		{name: "tally's service account un-suspends and narrows at admission", user: tallySA, old: pendingJob,
			change: func(j *batchv1.Job) { *j = *admittedJob() }},
		{name: "tally's kubeconfig user preempts", user: tallyHost, old: admittedJob,
			change: func(j *batchv1.Job) { *j = *pendingJob() }},
		{name: "the owner suspends a running Job", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }},
		{name: "the owner adds an unrelated label and annotation", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Labels["team"] = "a"; j.Annotations["note"] = "x" }},
		{name: "the owner re-prioritises a pending Job", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Labels[queues.LabelPriorityClass] = "high" }},
		{name: "the garbage collector removes a finalizer", user: "system:serviceaccount:kube-system:generic-garbage-collector",
			old:    func() *batchv1.Job { j := admittedJob(); j.Finalizers = []string{"foregroundDeletion"}; return j },
			change: func(j *batchv1.Job) { j.Finalizers = nil }},
		{name: "the job controller's changes elsewhere pass", user: "system:serviceaccount:kube-system:job-controller", old: admittedJob,
			change: func(j *batchv1.Job) { j.Status.Active = 2; j.Spec.Template.Labels = map[string]string{"x": "y"} }},
		{name: "the owner lowers the parallelism of a running Job", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }},
		{name: "the owner raises the parallelism of a pending Job", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](8) }},
		{name: "the owner suspends and raises the parallelism at once", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true); j.Spec.Parallelism = ptr.To[int32](8) }},
		{name: "an empty tolerations list equals none", user: alice,
			old:    func() *batchv1.Job { j := pendingJob(); j.Spec.Template.Spec.Tolerations = nil; return j },
			change: func(j *batchv1.Job) { j.Spec.Template.Spec.Tolerations = []corev1.Toleration{} }},
		{name: "a Job tally does not manage may be un-suspended", user: alice,
			old: func() *batchv1.Job { j := makeJob("team", "1"); j.Spec.Suspend = ptr.To(true); return j },
			change: func(j *batchv1.Job) {
				j.Spec.Suspend = ptr.To(false)
				j.Spec.Template.Spec.NodeSelector = map[string]string{"a": "b"}
			}},

		{name: "the owner un-suspends a pending Job", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, denied: []string{unsuspendDenied}},
		{name: "dropping suspend un-suspends too", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = nil }, denied: []string{unsuspendDenied}},
		{name: "cluster-admin is not tally", user: "kubernetes-admin-2", old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, denied: []string{unsuspendDenied}},
		{name: "a look-alike service account is not tally", user: tallySA + "-x", old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }, denied: []string{unsuspendDenied}},
		{name: "the owner removes the queue label", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { delete(j.Labels, queues.LabelQueue) },
			denied: []string{"tally: metadata.labels[tally.dev/cluster-queue]: only tally may remove this label of a Job in a managed namespace; the queue is fixed when the Job is created (delete and re-create the Job to use another ClusterQueue)"}},
		{name: "the owner changes Kueue's queue-name", user: alice,
			old:    func() *batchv1.Job { j := pendingJob(); j.Labels[queues.LabelKueueQueueName] = "lq"; return j },
			change: func(j *batchv1.Job) { j.Labels[queues.LabelKueueQueueName] = "other" },
			denied: []string{"tally: metadata.labels[kueue.x-k8s.io/queue-name]: only tally may change this label of a Job in a managed namespace; the queue is fixed when the Job is created (delete and re-create the Job to use another ClusterQueue)"}},
		{name: "the owner removes Kueue's queue-name", user: alice,
			old:    func() *batchv1.Job { j := pendingJob(); j.Labels[queues.LabelKueueQueueName] = "lq"; return j },
			change: func(j *batchv1.Job) { delete(j.Labels, queues.LabelKueueQueueName) },
			denied: []string{"metadata.labels[kueue.x-k8s.io/queue-name]: only tally may remove this label"}},
		{name: "the owner adds Kueue's queue-name to a Job created without one", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Labels[queues.LabelKueueQueueName] = "lq" },
			denied: []string{"metadata.labels[kueue.x-k8s.io/queue-name]: only tally may add this label"}},
		{name: "Kueue's queue-name as an annotation is not reserved", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Annotations[queues.LabelKueueQueueName] = "lq" }},
		{name: "the owner moves an admitted Job to another queue", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Labels[queues.LabelQueue] = "other" },
			denied: []string{"metadata.labels[tally.dev/cluster-queue]: only tally may change this label"}},
		{name: "the owner marks a pending Job admitted", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Labels[queues.LabelState] = "admitted" },
			denied: []string{"metadata.labels[tally.dev/state]: only tally may change this label of a Job in a managed namespace; tally records its decisions in the tally.dev/ labels"}},
		{name: "the owner forges a flavor assignment", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Annotations[queues.AnnotationFlavors] = "main=on-demand" },
			denied: []string{"metadata.annotations[tally.dev/flavors]: only tally may add this annotation"}},
		{name: "the owner drops the kept affinity", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { delete(j.Annotations, queues.AnnotationUserAffinity) },
			denied: []string{"metadata.annotations[tally.dev/user-affinity]: only tally may remove this annotation"}},
		{name: "any tally.dev/ key is reserved, even on a Job tally does not manage", user: alice,
			old:    func() *batchv1.Job { return makeJob("team", "1") },
			change: func(j *batchv1.Job) { j.Labels = map[string]string{"tally.dev/anything": "x"} },
			denied: []string{"metadata.labels[tally.dev/anything]: only tally may add this label"}},
		{name: "the owner adds a nodeSelector", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "gpu"} },
			denied: []string{"tally: spec.template.spec.nodeSelector: only tally may change the nodeSelector of a Job in a managed namespace; tally pins its pods to the nodes of its ClusterQueue's flavors, so no change is allowed, not even a narrowing"}},
		{name: "the owner adds a toleration", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) {
				j.Spec.Template.Spec.Tolerations = append(j.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			},
			denied: []string{"spec.template.spec.tolerations: only tally may change the tolerations"}},
		{name: "the owner narrows the affinity", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) {
				a := j.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
				a.NodeSelectorTerms = a.NodeSelectorTerms[:1]
			},
			denied: []string{"spec.template.spec.affinity: only tally may change the affinity", "not even a narrowing"}},
		{name: "the owner drops the affinity", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) { j.Spec.Template.Spec.Affinity = nil },
			denied: []string{"spec.template.spec.affinity: only tally may change the affinity"}},
		{name: "the owner raises the parallelism of a running Job", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) },
			denied: []string{"spec.parallelism: only tally may raise the pod count of a running Job in a managed namespace; its quota was admitted for 2 pods, not 3"}},
		{name: "every violation is listed, keys sorted", user: alice, old: pendingJob,
			change: func(j *batchv1.Job) {
				j.Labels[queues.LabelState] = "admitted"
				j.Labels[queues.LabelQueue] = "other"
				j.Spec.Suspend = ptr.To(false)
				j.Spec.Template.Spec.Tolerations = nil
			},
			denied: []string{"metadata.labels[tally.dev/cluster-queue]", "; metadata.labels[tally.dev/state]", "; spec.suspend", "; spec.template.spec.tolerations"}},
	}
	g := newGuard()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.old()
			job := old.DeepCopy()
			tc.change(job)
			resp := g.Handle(context.Background(), updateRequest(t, tc.user, old, job))
			if want := len(tc.denied) == 0; resp.Allowed != want {
				t.Fatalf("allowed = %v, want %v (%s)", resp.Allowed, want, resp.Result.Message)
			}
			msg := resp.Result.Message
			for _, part := range tc.denied {
				i := strings.Index(msg, part)
				if i < 0 {
					t.Fatalf("denial %q does not contain %q (in this order)", resp.Result.Message, part)
				}
				msg = msg[i+len(part):]
			}
		})
	}
}

func TestJobGuardOperations(t *testing.T) {
	g := newGuard()
	old, job := pendingJob(), pendingJob()
	job.Spec.Suspend = ptr.To(false)
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Delete, admissionv1.Connect} {
		req := updateRequest(t, alice, old, job)
		req.Operation = op
		if resp := g.Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("%s denied: %s", op, resp.Result.Message)
		}
	}
	// An empty user name never counts as tally, even if one was configured empty.
	g.Users = append(g.Users, "")
	if resp := g.Handle(context.Background(), updateRequest(t, "", old, job)); resp.Allowed || resp.Result.Message != unsuspendDenied {
		t.Errorf("an anonymous update: allowed=%v %q", resp.Allowed, resp.Result.Message)
	}
}

// TestGuardSkipsTally checks the condition that spares tally's own writes
// the guard's call: its service account, and the other names it acts as.
func TestGuardSkipsTally(t *testing.T) {
	e := Endpoint{ServiceNamespace: "tally-system", ServiceName: "tally-webhook", ServicePort: 443}
	for _, tc := range []struct {
		users []string
		want  string
	}{
		{nil, `request.userInfo.username != "system:serviceaccount:tally-system:tally"`},
		{[]string{"system:serviceaccount:tally-system:tally", ""}, `request.userInfo.username != "system:serviceaccount:tally-system:tally"`},
		{[]string{"system:serviceaccount:tally-system:tally", "tally"}, `!(request.userInfo.username in ["system:serviceaccount:tally-system:tally", "tally"])`},
	} {
		_, v := Configurations(nil, e, "tally-system", tc.users...)
		var got []string
		for _, w := range v.Webhooks {
			for _, c := range w.MatchConditions {
				if c.Name == "not-tally" {
					got = append(got, w.Name+": "+c.Expression)
				}
			}
		}
		if want := []string{"jobs.validate.tally.dev: " + tc.want, "unmanaged.validate.tally.dev: " + tc.want, "pods.validate.tally.dev: " + tc.want}; !slices.Equal(got, want) {
			t.Errorf("users %q: match conditions %q, want %q", tc.users, got, want)
		}
	}
}

// resourcesOf returns a change that sets the resources of the container
// of a Job's template.
func resourcesOf(requests, limits corev1.ResourceList) func(j *batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

// withInit gives j one init container, which requests cpu, and returns it.
func withInit(j *batchv1.Job, cpu string) *batchv1.Job {
	j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
	}}}
	return j
}

// resourcesDenied is the start of the denial of larger pods of a running Job.
const resourcesDenied = "tally: spec.template: only tally may raise the resources of a running Job's pods in a managed namespace; its quota was admitted for pods of "

// TestJobGuardResources checks that a running managed Job's pods may not
// grow: per pod, as the scheduler counts a pod's requests.
func TestJobGuardResources(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	withGPULimit := func() *batchv1.Job {
		j := admittedJob()
		j.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gpu: resource.MustParse("1")}
		return j
	}
	cases := []struct {
		name   string
		user   string
		old    func() *batchv1.Job
		change func(j *batchv1.Job)
		// denied lists substrings of the denial, in order; none: allowed.
		denied []string
	}{
		{name: "a request raised", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "2"), nil),
			denied: []string{resourcesDenied + "cpu=1, not cpu=2 (delete and re-create the Job to run larger pods)"}},
		{name: "a limit-only GPU raised", user: alice, old: withGPULimit, change: resourcesOf(list("cpu", "1"), list("nvidia.com/gpu", "2")),
			denied: []string{resourcesDenied + "nvidia.com/gpu=1, not nvidia.com/gpu=2"}},
		{name: "a limit-only resource added", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "1"), list("nvidia.com/gpu", "1")),
			denied: []string{resourcesDenied + "nvidia.com/gpu=0, not nvidia.com/gpu=1"}},
		{name: "a request dropped for a higher limit", user: alice, old: admittedJob, change: resourcesOf(nil, list("cpu", "4")),
			denied: []string{resourcesDenied + "cpu=1, not cpu=4"}},
		{name: "a new resource requested", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "1", "memory", "1Gi"), nil),
			denied: []string{resourcesDenied + "memory=0, not memory=1Gi"}},
		{name: "one resource raised and another lowered names the raised one", user: alice,
			old: func() *batchv1.Job {
				j := admittedJob()
				resourcesOf(list("cpu", "1", "memory", "2Gi"), nil)(j)
				return j
			},
			change: resourcesOf(list("cpu", "1500m", "memory", "1Gi"), nil),
			denied: []string{resourcesDenied + "cpu=1, not cpu=1500m ("}},
		{name: "an init container larger than the containers raised", user: alice,
			old:    func() *batchv1.Job { return withInit(admittedJob(), "4") },
			change: func(j *batchv1.Job) { withInit(j, "8") },
			denied: []string{resourcesDenied + "cpu=4, not cpu=8"}},
		{name: "an init container added that is larger than the containers", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { withInit(j, "3") },
			denied: []string{resourcesDenied + "cpu=1, not cpu=3"}},
		{name: "a restartable sidecar added", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) {
				withInit(j, "100m")
				j.Spec.Template.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			},
			denied: []string{resourcesDenied + "cpu=1, not cpu=1100m"}},
		{name: "overhead added", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Template.Spec.Overhead = list("cpu", "250m") },
			denied: []string{resourcesDenied + "cpu=1, not cpu=1250m"}},
		{name: "many resources raised are listed ten at most", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) {
				l := list("cpu", "2")
				for i := range 12 {
					l[corev1.ResourceName(fmt.Sprintf("example.com/r%02d", i))] = resource.MustParse("1")
				}
				resourcesOf(l, nil)(j)
			},
			denied: []string{resourcesDenied + "cpu=1, example.com/r00=0,", "example.com/r08=0, and 3 more, not cpu=2,", "example.com/r08=1, and 3 more ("}},
		{name: "the pod count and the pods raised at once", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3); resourcesOf(list("cpu", "2"), nil)(j) },
			denied: []string{"spec.parallelism: only tally may raise the pod count", "; " + resourcesDenied[len("tally: "):] + "cpu=1, not cpu=2"}},

		{name: "a claim added", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) {
				j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("eight-gpus")}}
			},
			denied: []string{"spec.template.spec.resourceClaims: only tally may change the resource claims of a running Job's pods in a managed namespace"}},
		{name: "a claim's template changed", user: alice,
			old: func() *batchv1.Job {
				j := admittedJob()
				j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
				return j
			},
			change: func(j *batchv1.Job) {
				j.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To("eight-gpus")
			},
			denied: []string{"spec.template.spec.resourceClaims: only tally may change the resource claims"}},
		{name: "a request lowered", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "500m"), nil)},
		{name: "a resource dropped", user: alice,
			old: func() *batchv1.Job {
				j := admittedJob()
				resourcesOf(list("cpu", "1", "memory", "1Gi"), nil)(j)
				return j
			},
			change: resourcesOf(list("cpu", "1"), nil)},
		{name: "a limit raised above its request", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "1"), list("cpu", "8"))},
		{name: "the same amount written otherwise", user: alice, old: admittedJob, change: resourcesOf(list("cpu", "1000m"), nil)},
		{name: "a limit-only resource made a request of the same amount", user: alice, old: withGPULimit,
			change: resourcesOf(list("cpu", "1", "nvidia.com/gpu", "1"), nil)},
		{name: "an init container raised below the containers", user: alice,
			old:    func() *batchv1.Job { return withInit(admittedJob(), "100m") },
			change: func(j *batchv1.Job) { withInit(j, "900m") }},
		{name: "a pending Job's request raised", user: alice, old: pendingJob, change: resourcesOf(list("cpu", "8"), list("nvidia.com/gpu", "4"))},
		{name: "a running Job suspended and raised at once", user: alice, old: admittedJob,
			change: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true); resourcesOf(list("cpu", "8"), nil)(j) }},
		{name: "a Job tally does not manage", user: alice, old: func() *batchv1.Job { return makeJob("team", "1") },
			change: resourcesOf(list("cpu", "8"), nil)},
		{name: "tally's own update", user: tallySA, old: admittedJob, change: resourcesOf(list("cpu", "8"), nil)},
	}
	g := newGuard()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.old()
			job := old.DeepCopy()
			tc.change(job)
			checkDenial(t, g.Handle(context.Background(), updateRequest(t, tc.user, old, job)), tc.denied)
		})
	}
}

// checkDenial checks that resp is allowed when denied is empty, or else
// a denial that contains each of denied, in order.
func checkDenial(t *testing.T, resp admission.Response, denied []string) {
	t.Helper()
	if want := len(denied) == 0; resp.Allowed != want {
		t.Fatalf("allowed = %v, want %v (%s)", resp.Allowed, want, resp.Result.Message)
	}
	msg := resp.Result.Message
	for _, part := range denied {
		i := strings.Index(msg, part)
		if i < 0 {
			t.Fatalf("denial %q does not contain %q (in this order)", resp.Result.Message, part)
		}
		msg = msg[i+len(part):]
	}
}

// TestPyTorchJobGuardResources checks the same of a PyTorchJob, read as
// an unstructured object: each replica type's template is its own.
func TestPyTorchJobGuardResources(t *testing.T) {
	o, _ := mutatePyTorchJob(t, pyTorchJobJSON("", "", ""))
	pending := o.Obj.(*unstructured.Unstructured)
	edit := func(from *unstructured.Unstructured, f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := from.DeepCopy()
		f(u)
		return u
	}
	running := edit(pending, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, false, "spec", "runPolicy", "suspend")
	})
	unmanaged := edit(running, func(u *unstructured.Unstructured) { u.SetLabels(nil) })
	worker := []string{"spec", "pytorchReplicaSpecs", "Worker", "template", "spec"}
	// setWorker sets the resources of the worker's container.
	setWorker := func(resources map[string]any) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			c := map[string]any{"name": "c", "resources": resources}
			_ = unstructured.SetNestedSlice(u.Object, []any{c}, append(worker, "containers")...)
		}
	}
	addInit := func(cpu string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "init", "resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}},
				append(worker, "initContainers")...)
		}
	}
	const denied = "tally: spec.pytorchReplicaSpecs.Worker.template: only tally may raise the resources of a running PyTorchJob's pods in a managed namespace; its quota was admitted for pods of "
	for _, tc := range []struct {
		name     string
		user     string
		old, cur *unstructured.Unstructured
		denied   []string
	}{
		{"a worker's request raised", alice, running, edit(running, setWorker(map[string]any{"requests": map[string]any{"cpu": "2"}})),
			[]string{denied + "cpu=1, not cpu=2 (delete and re-create the PyTorchJob to run larger pods)"}},
		{"a worker's limit-only GPU added", alice, running, edit(running, setWorker(map[string]any{"requests": map[string]any{"cpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}})),
			[]string{denied + "nvidia.com/gpu=0, not nvidia.com/gpu=1"}},
		{"a worker's init container added", alice, running, edit(running, addInit("2")),
			[]string{denied + "cpu=1, not cpu=2"}},
		{"a worker's memory requested", alice, running, edit(running, setWorker(map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}})),
			[]string{denied + "memory=0, not memory=1Gi"}},
		{"the master's request raised", alice, running, edit(running, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "c", "resources": map[string]any{"requests": map[string]any{"cpu": "3"}}}},
				"spec", "pytorchReplicaSpecs", "Master", "template", "spec", "containers")
		}), []string{"tally: spec.pytorchReplicaSpecs.Master.template: only tally may raise the resources of a running PyTorchJob's pods"}},

		{"a worker's request lowered", alice, running, edit(running, setWorker(map[string]any{"requests": map[string]any{"cpu": "500m"}})), nil},
		{"a pending worker's request raised", alice, pending, edit(pending, setWorker(map[string]any{"requests": map[string]any{"cpu": "8"}})), nil},
		{"an unmanaged worker's request raised", alice, unmanaged, edit(unmanaged, setWorker(map[string]any{"requests": map[string]any{"cpu": "8"}})), nil},
		{"tally raises a worker's request", tallySA, running, edit(running, setWorker(map[string]any{"requests": map[string]any{"cpu": "8"}})), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := json.Marshal(tc.old.Object)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := json.Marshal(tc.cur.Object)
			if err != nil {
				t.Fatal(err)
			}
			req := pyTorchJobRequest(admissionv1.Update, string(cur), string(old))
			req.UserInfo = authenticationv1.UserInfo{Username: tc.user}
			checkDenial(t, newGuard().Handle(context.Background(), req), tc.denied)
		})
	}
}

// workloadReader is a client.Reader that holds one workload, or fails.
type workloadReader struct {
	obj *unstructured.Unstructured
	err error
}

func (r workloadReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	switch {
	case r.err != nil:
		return r.err
	case !ok || u.GroupVersionKind() != r.obj.GroupVersionKind():
		return fmt.Errorf("asked for a %T of %v, holding a %v", obj, obj.GetObjectKind().GroupVersionKind(), r.obj.GroupVersionKind())
	case key != client.ObjectKeyFromObject(r.obj):
		return apierrors.NewNotFound(schema.GroupResource{Group: "kubeflow.org", Resource: "pytorchjobs"}, key.Name)
	}
	r.obj.DeepCopyInto(u)
	return nil
}

func (r workloadReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not listed")
}

// scaleRequest is an UPDATE of the scale of PyTorchJob team/p from old to
// cur replicas, by user.
func scaleRequest(t testing.TB, user string, old, cur int32) admission.Request {
	t.Helper()
	scale := func(n int32) runtime.RawExtension {
		raw, err := json.Marshal(&autoscalingv1.Scale{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: n},
		})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Update, Namespace: "team", Name: "p", SubResource: "scale",
		Kind:        metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
		Resource:    metav1.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"},
		RequestKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
		UserInfo:    authenticationv1.UserInfo{Username: user},
		Object:      scale(cur), OldObject: scale(old),
	}}
}

const scaleDenied = "tally: spec.replicas: only tally may scale up an admitted PyTorchJob in a managed namespace; its quota was admitted for 2 pods (delete and re-create the PyTorchJob to run more)"

// TestJobGuardScale checks the guard of the /scale subresource: a
// scale-up of an admitted workload is denied, any other scale passes.
func TestJobGuardScale(t *testing.T) {
	o, _ := mutatePyTorchJob(t, pyTorchJobJSON("", "", ""))
	pending := o.Obj.(*unstructured.Unstructured)
	admitted := pending.DeepCopy()
	_ = unstructured.SetNestedField(admitted.Object, false, "spec", "runPolicy", "suspend")
	unmanaged := admitted.DeepCopy()
	unmanaged.SetLabels(map[string]string{"app": "train"})
	for _, tc := range []struct {
		name     string
		user     string
		reader   client.Reader
		old, cur int32
		want     answer
	}{
		{"up, without a reader", alice, nil, 2, 5, denied(scaleDenied)},
		{"down, without a reader", alice, nil, 2, 1, allowed("")},
		{"unchanged, without a reader", alice, nil, 2, 2, allowed("")},
		{"up, tally's own", tallySA, nil, 2, 5, allowed("tally's own update")},
		{"up, admitted", alice, workloadReader{obj: admitted}, 2, 5, denied(scaleDenied)},
		{"down, admitted", alice, workloadReader{obj: admitted}, 2, 0, allowed("")},
		{"up, suspended", alice, workloadReader{obj: pending}, 2, 5, allowed("")},
		{"up, unmanaged", alice, workloadReader{obj: unmanaged}, 2, 5, allowed("")},
		{"up, unreadable", alice, workloadReader{err: fmt.Errorf("connection refused")}, 2, 5,
			answer{code: http.StatusServiceUnavailable, msg: "tally: cannot read PyTorchJob team/p to check its scale-up: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard()
			g.Reader = tc.reader
			resp := g.Handle(context.Background(), scaleRequest(t, tc.user, tc.old, tc.cur))
			code := resp.Result.Code
			if code == 0 {
				code = http.StatusOK
			}
			if resp.Allowed != tc.want.allowed || code != tc.want.code || resp.Result.Message != tc.want.msg {
				t.Errorf("allowed %v, code %d, message %q; want %+v", resp.Allowed, code, resp.Result.Message, tc.want)
			}
		})
	}
}

// TestJobGuardScaleBadRequests checks the scale requests the guard cannot
// read.
func TestJobGuardScaleBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(req *admission.Request)
		want   string
	}{
		{"the scale of a kind tally does not queue", func(req *admission.Request) {
			req.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		}, "tally: deployments/scale is not the scale of a workload kind tally queues"},
		{"no old object", func(req *admission.Request) { req.OldObject = runtime.RawExtension{} },
			"tally: decoding the old Scale of a PyTorchJob: there is no content to decode"},
		{"replicas as a string", func(req *admission.Request) {
			req.Object = runtime.RawExtension{Raw: []byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":"9"}}`)}
		}, "tally: decoding the Scale of a PyTorchJob:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := scaleRequest(t, alice, 2, 5)
			tc.change(&req)
			resp := newGuard().Handle(context.Background(), req)
			if resp.Allowed || resp.Result.Code != http.StatusBadRequest || !strings.HasPrefix(resp.Result.Message, tc.want) {
				t.Errorf("allowed %v, code %d, message %q; want a bad request %q", resp.Allowed, resp.Result.Code, resp.Result.Message, tc.want)
			}
		})
	}
}

// TestGuardScaleRules checks that the guard, and only it, watches the
// scale subresource of the kinds that have one.
func TestGuardScaleRules(t *testing.T) {
	m, v := Configurations(nil, Endpoint{URL: "https://127.0.0.1:9443"}, "tally-system")
	var got []string
	for _, w := range m.Webhooks {
		for _, r := range w.Rules {
			for _, res := range r.Resources {
				if strings.HasSuffix(res, "/scale") {
					t.Errorf("mutating webhook %s watches %s", w.Name, res)
				}
			}
		}
	}
	for _, w := range v.Webhooks {
		for _, r := range w.Rules {
			for _, res := range r.Resources {
				if strings.HasSuffix(res, "/scale") {
					got = append(got, w.Name+": "+r.APIGroups[0]+"/"+r.APIVersions[0]+" "+res)
				}
			}
		}
	}
	want := []string{
		"jobs.validate.tally.dev: kubeflow.org/v1 pytorchjobs/scale",
		"jobs.validate.tally.dev: kubeflow.org/v1 paddlejobs/scale",
		"jobs.validate.tally.dev: kubeflow.org/v1 jaxjobs/scale",
	}
	if !slices.Equal(got, want) {
		t.Errorf("scale rules %q, want %q", got, want)
	}
}

// TestScaledKindsMatchCRDs checks hasScale against the CRDs the e2e
// toolchain installs (TALLY_TOOLS/crds, built by e2e/toolchain/build.sh):
// a kind whose CRD declares a scale subresource in its version must have
// the guard watch it, and only such a kind.
func TestScaledKindsMatchCRDs(t *testing.T) {
	dir := os.Getenv("TALLY_TOOLS")
	if dir == "" {
		t.Skip("TALLY_TOOLS is not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "crds", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("no CRDs in %s/crds (%v)", dir, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, ver := range crd.Spec.Versions {
			k := kinds.NewRegistry().For(schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind})
			if k == nil {
				continue
			}
			seen[k.GVK().Kind] = true
			crdScale := ver.Subresources != nil && ver.Subresources.Scale != nil
			if hasScale(k) != crdScale {
				t.Errorf("%s: %s declares a scale subresource: %v; the guard watches it: %v", f, k.GVK(), crdScale, hasScale(k))
			}
		}
	}
	t.Logf("checked %d kinds against %d CRDs", len(seen), len(files))
}

// TestRayJobGuardSubmitter checks the guard of a RayJob whose submitter
// pod set the object does not hold (KubeRay's default submitter): turning
// it on while running is a new pod set, denied at spec; a running RayJob
// that has it may still change otherwise.
func TestRayJobGuardSubmitter(t *testing.T) {
	rayJob := func(mode, cpu string) string {
		return `{"apiVersion":"ray.io/v1","kind":"RayJob","metadata":{"name":"r","namespace":"team","labels":{"tally.dev/cluster-queue":"q","tally.dev/state":"admitted"}},` +
			`"spec":{"suspend":false,` + mode + `"rayClusterSpec":{"headGroupSpec":{"template":{"spec":{"containers":[{"name":"head","resources":{"requests":{"cpu":"` + cpu + `"}}}]}}}}}}`
	}
	request := func(old, cur string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Update, Namespace: "team", Name: "r",
			Kind:     metav1.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayJob"},
			UserInfo: authenticationv1.UserInfo{Username: alice},
			Object:   runtime.RawExtension{Raw: []byte(cur)}, OldObject: runtime.RawExtension{Raw: []byte(old)},
		}}
	}
	g := newGuard()
	t.Run("the default submitter turned on", func(t *testing.T) {
		checkDenial(t, g.Handle(context.Background(), request(rayJob(`"submissionMode":"HTTPMode",`, "1"), rayJob("", "1"))),
			[]string{"tally: spec: only tally may raise the pod sets of a running RayJob in a managed namespace; its quota was admitted for 0 pods, not 1"})
	})
	t.Run("the head raised beside the default submitter", func(t *testing.T) {
		checkDenial(t, g.Handle(context.Background(), request(rayJob("", "1"), rayJob("", "2"))),
			[]string{"tally: spec.rayClusterSpec.headGroupSpec.template: only tally may raise the resources of a running RayJob's pods in a managed namespace; its quota was admitted for pods of cpu=1, not cpu=2"})
	})
	t.Run("the head lowered beside the default submitter", func(t *testing.T) {
		checkDenial(t, g.Handle(context.Background(), request(rayJob("", "1"), rayJob("", "500m"))), nil)
	})
}

// TestTrainJobGuard checks the guard of a TrainJob, whose pod sets come
// from the runtime it names, patched by its spec.runtimePatches: the
// patches that move its pods, of any manager, and its numNodes and
// resourcesPerNode are its placement and shape.
func TestTrainJobGuard(t *testing.T) {
	runtimes := map[string]*unstructured.Unstructured{}
	for name, cpu := range map[string]string{"torch": "1", "big": "4"} {
		rt := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"ClusterTrainingRuntime","metadata":{"name":"`+name+`"},
		  "spec":{"mlPolicy":{"numNodes":1,"torch":{}},"template":{"spec":{"replicatedJobs":[{"name":"node",
		    "template":{"metadata":{"labels":{"trainer.kubeflow.org/trainjob-ancestor-step":"trainer"}},
		    "spec":{"template":{"spec":{"containers":[{"name":"node","resources":{"requests":{"cpu":"`+cpu+`"}}}]}}}}}]}}}}`), &rt.Object); err != nil {
			t.Fatal(err)
		}
		runtimes[name] = rt
	}
	reg := kinds.NewRegistry()
	reg.SetLookup(func(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
		if rt := runtimes[name]; rt != nil && gvk.Kind == rt.GetKind() {
			return rt, nil
		}
		return nil, nil
	})
	g := newGuard()
	g.Kinds = reg
	// patch is a runtimePatches entry of manager m for the Job node's pod
	// template.
	patch := func(m, tpl string) string {
		return `{"manager":"` + m + `","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":` + tpl + `}}}]}}}}`
	}
	tallys := patch(kinds.TrainJobPatchManager, `{"metadata":{"labels":{"tally.dev/workload":"u1"}},"spec":{"nodeSelector":{"flavor":"a"}}}`)
	trainJob := func(state string, suspend bool, trainer string, patches ...string) string {
		return fmt.Sprintf(`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"tj","namespace":"team","uid":"u1",`+
			`"labels":{"tally.dev/cluster-queue":"q","tally.dev/state":%q}},"spec":{"runtimeRef":{"name":"torch"},"suspend":%v,"trainer":{%s},"runtimePatches":[%s]}}`,
			state, suspend, trainer, strings.Join(patches, ","))
	}
	request := func(user, old, cur string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Update, Namespace: "team", Name: "tj",
			Kind:     metav1.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"},
			UserInfo: authenticationv1.UserInfo{Username: user},
			Object:   runtime.RawExtension{Raw: []byte(cur)}, OldObject: runtime.RawExtension{Raw: []byte(old)},
		}}
	}
	admitted := trainJob("admitted", false, `"numNodes":2`, tallys)
	pending := trainJob("pending", true, `"numNodes":2`)
	moved := `spec.runtimePatches: only tally may change the nodeSelector of a TrainJob's node pods in a managed namespace`
	for _, c := range []struct {
		name     string
		user     string
		old, cur string
		denied   []string
	}{
		{name: "numNodes raised", old: admitted, cur: trainJob("admitted", false, `"numNodes":3`, tallys),
			denied: []string{"tally: spec.trainer.numNodes: only tally may raise the pod count of a running TrainJob in a managed namespace; its quota was admitted for 2 pods, not 3"}},
		{name: "numNodes lowered", old: admitted, cur: trainJob("admitted", false, `"numNodes":1`, tallys)},
		{name: "resourcesPerNode raised", old: admitted, cur: trainJob("admitted", false, `"numNodes":2,"resourcesPerNode":{"limits":{"nvidia.com/gpu":"1"}}`, tallys),
			denied: []string{"tally: spec: only tally may raise the resources of a running TrainJob's node pods in a managed namespace; its quota was admitted for pods of nvidia.com/gpu=0, not nvidia.com/gpu=1"}},
		{name: "runtimeRef changed to a larger runtime", old: admitted, cur: strings.Replace(admitted, `"name":"torch"`, `"name":"big"`, 1),
			denied: []string{"tally: spec: only tally may raise the resources of a running TrainJob's node pods in a managed namespace; its quota was admitted for pods of cpu=1, not cpu=4"}},
		{name: "runtimeRef changed to none", old: admitted, cur: strings.Replace(admitted, `"name":"torch"`, `"name":"gone"`, 1),
			denied: []string{`tally: spec: only tally may change what a running TrainJob's pods are made from in a managed namespace; its pods can no longer be read: ClusterTrainingRuntime "gone" not found`}},
		{name: "a user's patch after tally's moves the pods", old: admitted,
			cur:    trainJob("admitted", false, `"numNodes":2`, tallys, patch("mallory", `{"spec":{"nodeSelector":{"flavor":"b"}}}`)),
			denied: []string{moved}},
		{name: "a user's patch adds a toleration", old: admitted,
			cur:    trainJob("admitted", false, `"numNodes":2`, tallys, patch("mallory", `{"spec":{"tolerations":[{"operator":"Exists"}]}}`)),
			denied: []string{`spec.runtimePatches: only tally may change the tolerations of a TrainJob's node pods`}},
		{name: "a user's patch adds a node affinity", old: admitted,
			cur: trainJob("admitted", false, `"numNodes":2`, tallys, patch("mallory", `{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":`+
				`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"flavor","operator":"In","values":["b"]}]}]}}}}}`)),
			denied: []string{`spec.runtimePatches: only tally may change the affinity of a TrainJob's node pods`}},
		{name: "tally's patch removed", old: admitted, cur: trainJob("admitted", false, `"numNodes":2`), denied: []string{moved}},
		{name: "tally's patch changed", old: admitted,
			cur:    trainJob("admitted", false, `"numNodes":2`, patch(kinds.TrainJobPatchManager, `{"spec":{"nodeSelector":{"flavor":"b"}}}`)),
			denied: []string{moved}},
		{name: "a user's patch of the environment", old: admitted,
			cur: trainJob("admitted", false, `"numNodes":2`, tallys, patch("mallory", `{"spec":{"containers":[{"name":"node","env":[{"name":"A","value":"1"}]}]}}`))},
		{name: "a user's patch of the pods' labels", old: admitted,
			cur: trainJob("admitted", false, `"numNodes":2`, tallys, patch("mallory", `{"metadata":{"labels":{"team":"x"}}}`))},
		{name: "un-suspended while pending", old: pending, cur: trainJob("pending", false, `"numNodes":2`),
			denied: []string{"tally: spec.suspend: only tally may un-suspend a TrainJob in a managed namespace"}},
		{name: "a pending one moved", old: pending, cur: trainJob("pending", true, `"numNodes":2`, patch("mallory", `{"spec":{"nodeSelector":{"flavor":"b"}}}`)),
			denied: []string{moved}},
		{name: "a pending one grown", old: pending, cur: trainJob("pending", true, `"numNodes":4`)},
		{name: "tally admits it", user: tallySA, old: pending, cur: admitted},
	} {
		t.Run(c.name, func(t *testing.T) {
			user := c.user
			if user == "" {
				user = alice
			}
			checkDenial(t, g.Handle(context.Background(), request(user, c.old, c.cur)), c.denied)
		})
	}
}
