package webhook

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

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

// TestConfigurationsDeployed checks that deploy/base/webhooks.yaml (and
// so the Helm chart, which e2e/helmchart keeps equal to it) registers every
// webhook as Configurations does, with the Service as endpoint: a tally run
// with --register-webhooks=false finds them as it would write them.
func TestConfigurationsDeployed(t *testing.T) {
	wantM, wantV := Configurations(Endpoint{ServiceNamespace: "tally-system", ServiceName: "tally-webhook", ServicePort: 443}, "tally-system")
	data, err := os.ReadFile("../deploy/base/webhooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gotM, gotV := &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		switch kind.Kind {
		case "MutatingWebhookConfiguration":
			err = yaml.UnmarshalStrict([]byte(doc), gotM)
		case "ValidatingWebhookConfiguration":
			err = yaml.UnmarshalStrict([]byte(doc), gotV)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(wantM.Webhooks, gotM.Webhooks); diff != "" {
		t.Errorf("deploy/base/webhooks.yaml: MutatingWebhookConfiguration differs from Configurations (-code +manifest):\n%s", diff)
	}
	if diff := cmp.Diff(wantV.Webhooks, gotV.Webhooks); diff != "" {
		t.Errorf("deploy/base/webhooks.yaml: ValidatingWebhookConfiguration differs from Configurations (-code +manifest):\n%s", diff)
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
		_, v := Configurations(e, "tally-system", tc.users...)
		var got []string
		for _, w := range v.Webhooks {
			for _, c := range w.MatchConditions {
				got = append(got, w.Name+": "+c.Expression)
			}
		}
		if want := []string{"jobs.validate.tally.dev: " + tc.want}; !slices.Equal(got, want) {
			t.Errorf("users %q: match conditions %q, want %q", tc.users, got, want)
		}
	}
}
