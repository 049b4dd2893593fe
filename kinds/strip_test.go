package kinds

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestStripJobTwice: stripping keeps a container's name, resources and
// restart policy only; stripping a stripped Job again changes nothing and
// keeps its containers, as a watched Job's spec taken from the store is.
func TestStripJobTwice(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	job := &batchv1.Job{}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep"}, Resources: res}}
	job.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "proxy", RestartPolicy: &always}}
	out, _ := StripJob(job)
	once := out.(*batchv1.Job).Spec.Template.Spec
	want := corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "main", Resources: res}},
		InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always}},
	}
	if diff := cmp.Diff(want, once); diff != "" {
		t.Fatalf("stripped spec (-want +got):\n%s", diff)
	}
	again := &batchv1.Job{}
	again.Spec = *out.(*batchv1.Job).Spec.DeepCopy()
	again.Spec.Template.Spec.Containers = once.Containers
	out2, _ := StripJob(again)
	twice := out2.(*batchv1.Job).Spec.Template.Spec
	if diff := cmp.Diff(want, twice); diff != "" {
		t.Errorf("stripped twice (-want +got):\n%s", diff)
	}
	if &twice.Containers[0] != &once.Containers[0] {
		t.Errorf("stripping stripped containers copied them")
	}
}

// TestStripEndedJob: a Job that has ended with no pod left keeps, of its
// spec and status, only what Job.Read takes of it; one that still counts
// a pod keeps its template.
func TestStripEndedJob(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	job := func(mutate func(*batchv1.JobStatus)) *batchv1.Job {
		j := &batchv1.Job{}
		j.Spec.Parallelism, j.Spec.Completions, j.Spec.Suspend = ptr.To[int32](4), ptr.To[int32](8), ptr.To(false)
		j.Spec.Template.Labels = map[string]string{"app": "x"}
		j.Spec.Template.Spec.PriorityClassName = "high"
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
		j.Status = batchv1.JobStatus{StartTime: &at, CompletionTime: &at, Succeeded: 4, Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "CompletionsReached"},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at, LastProbeTime: at, Reason: "CompletionsReached", Message: "done"},
			}}
		if mutate != nil {
			mutate(&j.Status)
		}
		return j
	}
	out, _ := StripJob(job(nil))
	ended := out.(*batchv1.Job)
	wantSpec := batchv1.JobSpec{Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](8), Suspend: ptr.To(false),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: "high"}}}
	if diff := cmp.Diff(wantSpec, ended.Spec); diff != "" {
		t.Errorf("an ended Job's spec (-want +got):\n%s", diff)
	}
	wantStatus := batchv1.JobStatus{StartTime: &at, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at}}}
	if diff := cmp.Diff(wantStatus, ended.Status); diff != "" {
		t.Errorf("an ended Job's status (-want +got):\n%s", diff)
	}
	o, err := Job{}.Read(ended)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Finished || !o.FinishedAt.Equal(at.Time) || !o.Started || o.Suspended || o.Active != 0 || o.PriorityClassName() != "high" {
		t.Errorf("read back: finished %t at %v, started %t, suspended %t, active %d, priority class %q",
			o.Finished, o.FinishedAt, o.Started, o.Suspended, o.Active, o.PriorityClassName())
	}
	again, _ := StripJob(ended.DeepCopy())
	if diff := cmp.Diff(ended, again); diff != "" {
		t.Errorf("stripped twice (-once +twice):\n%s", diff)
	}

	for name, mutate := range map[string]func(*batchv1.JobStatus){
		"active":      func(s *batchv1.JobStatus) { s.Active = 1 },
		"terminating": func(s *batchv1.JobStatus) { s.Terminating = ptr.To[int32](1) },
		"ready":       func(s *batchv1.JobStatus) { s.Ready = ptr.To[int32](1) },
		"not ended":   func(s *batchv1.JobStatus) { s.Conditions = s.Conditions[:1] },
		"not true":    func(s *batchv1.JobStatus) { s.Conditions[1].Status = corev1.ConditionFalse },
	} {
		out, _ := StripJob(job(mutate))
		if cs := out.(*batchv1.Job).Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Resources.Requests.Cpu().String() != "1" {
			t.Errorf("%s: the template's containers are %v, want the one kept", name, cs)
		}
	}
}

// TestStripJobMeta: of a Job's annotations the keys are kept, and the
// values of tally's; its labels are all kept; the same key or value on
// two Jobs, and the same namespace, is one string.
func TestStripJobMeta(t *testing.T) {
	job := func(name string, annotations map[string]string) *batchv1.Job {
		j := &batchv1.Job{}
		j.Namespace, j.Name = string([]byte("team-a")), name
		j.Labels = map[string]string{string([]byte("tally.dev/state")): string([]byte("pending")), "app": name}
		j.Annotations = annotations
		return j
	}
	a, _ := StripJob(job("a", map[string]string{"tally.dev/flavors": "main=default",
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"batch/v1","kind":"Job"}`}))
	b, _ := StripJob(job("b", map[string]string{"example.com/note": "x"}))
	c, _ := StripJob(job("c", nil))
	ja, jb, jc := a.(*batchv1.Job), b.(*batchv1.Job), c.(*batchv1.Job)
	if diff := cmp.Diff(map[string]string{"tally.dev/flavors": "main=default", "kubectl.kubernetes.io/last-applied-configuration": ""}, ja.Annotations); diff != "" {
		t.Errorf("annotations kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"example.com/note": ""}, jb.Annotations); diff != "" {
		t.Errorf("annotations kept (-want +got):\n%s", diff)
	}
	if jc.Annotations != nil {
		t.Errorf("a Job with no annotations keeps %#v, want none", jc.Annotations)
	}
	if diff := cmp.Diff(map[string]string{"tally.dev/state": "pending", "app": "b"}, jb.Labels); diff != "" {
		t.Errorf("labels kept (-want +got):\n%s", diff)
	}
	same := func(what, x, y string) {
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("the %s %q of two Jobs is two strings", what, x)
		}
	}
	same("namespace", ja.Namespace, jb.Namespace)
	same("state label", ja.Labels["tally.dev/state"], jb.Labels["tally.dev/state"])
	for k := range ja.Labels {
		for k2 := range jb.Labels {
			if k == k2 {
				same("label key", k, k2)
			}
		}
	}
}

// TestStripJobShares: Jobs alike in their containers' resources and
// their labels share one copy of each once stripped; Jobs that differ
// keep their own, equal to what they had.
func TestStripJobShares(t *testing.T) {
	job := func(name, cpu, queue string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": queue}}}
		j.Spec.Template.Labels = map[string]string{"batch.kubernetes.io/job-name": name, "tally.dev/podset": "main"}
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		out, _ := StripJob(j)
		return out.(*batchv1.Job)
	}
	a, b, c := job("a", "1", "q"), job("b", "1", "q"), job("c", "2", "r")
	containers := func(j *batchv1.Job) *corev1.Container { return &j.Spec.Template.Spec.Containers[0] }
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if containers(a) != containers(b) || !same(a.Labels, b.Labels) || !same(a.Spec.Template.Labels, b.Spec.Template.Labels) {
		t.Errorf("Jobs a and b, alike but for their names, do not share their containers, labels and template labels")
	}
	if containers(a) == containers(c) || same(a.Labels, c.Labels) {
		t.Errorf("Jobs a and c, of other requests and queues, share their containers or labels")
	}
	if got := c.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("Job c's container requests %s cpu, want 2", got.String())
	}
	if diff := cmp.Diff(map[string]string{"kueue.x-k8s.io/queue-name": "r"}, c.Labels); diff != "" {
		t.Errorf("Job c's labels (-want +got):\n%s", diff)
	}
	// The template's labels keep their keys (the admission patch adds to
	// them), and the values of tally's only.
	if diff := cmp.Diff(map[string]string{"batch.kubernetes.io/job-name": "", "tally.dev/podset": "main"}, a.Spec.Template.Labels); diff != "" {
		t.Errorf("Job a's template labels (-want +got):\n%s", diff)
	}
}

// storedJob is a Job of a queue as the API server keeps it once tally's
// webhook has made it: the API server's defaults, the Job controller's
// labels and Suspended condition, and the node affinity and toleration
// of its queue's flavor.
func storedJob(name string, uid types.UID) *batchv1.Job {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	nonIndexed, replace := batchv1.NonIndexedCompletion, batchv1.TerminatingOrFailed
	pods := map[string]string{"batch.kubernetes.io/controller-uid": string(uid), "batch.kubernetes.io/job-name": name,
		"controller-uid": string(uid), "job-name": name}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: uid, ResourceVersion: "123456",
		Generation: 1, CreationTimestamp: at,
		Labels:      map[string]string{"kueue.x-k8s.io/queue-name": "lq", "tally.dev/state": "pending"},
		Annotations: map[string]string{"tally.dev/queue": "team-a-cq"}}}
	j.Spec = batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
		CompletionMode: &nonIndexed, Suspend: ptr.To(true), PodReplacementPolicy: &replace, ManualSelector: ptr.To(false),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": string(uid)}}}
	j.Spec.Template.Labels = pods
	j.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSClusterFirst,
		SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](30),
		Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "cloud.example.com/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-a100"}}}}}}}},
		Tolerations: []corev1.Toleration{{Key: "kueue.x-k8s.io/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	j.Status = batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0),
		UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, LastProbeTime: at,
			LastTransitionTime: at, Reason: "JobSuspended", Message: "Job suspended"}}}
	return j
}

// TestStripJobSharesScheduling: Jobs of one queue, stored apart, share
// their affinity, tolerations, the spec's counts and modes, and their
// conditions' words once stripped; their own values are unchanged.
func TestStripJobSharesScheduling(t *testing.T) {
	strip := func(name string) *batchv1.Job {
		b, err := storedJob(name, types.UID("uid-"+name)).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		j := &batchv1.Job{}
		if err := j.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		out, _ := StripJob(j)
		return out.(*batchv1.Job)
	}
	a, b := strip("a"), strip("b")
	sa, sb := &a.Spec.Template.Spec, &b.Spec.Template.Spec
	if sa.Affinity != sb.Affinity || &sa.Tolerations[0] != &sb.Tolerations[0] {
		t.Errorf("Jobs a and b do not share their affinity and tolerations")
	}
	if a.Spec.Parallelism != b.Spec.Parallelism || a.Spec.BackoffLimit != b.Spec.BackoffLimit || a.Spec.Suspend != b.Spec.Suspend ||
		a.Spec.CompletionMode != b.Spec.CompletionMode || a.Spec.PodReplacementPolicy != b.Spec.PodReplacementPolicy ||
		a.Status.Ready != b.Status.Ready {
		t.Errorf("Jobs a and b do not share the pointers of their spec's counts and modes")
	}
	if unsafe.StringData(a.Status.Conditions[0].Reason) != unsafe.StringData(b.Status.Conditions[0].Reason) {
		t.Errorf("Jobs a and b do not share their condition's reason")
	}
	want := storedJob("a", "uid-a")
	if diff := cmp.Diff(want.Spec.Template.Spec.Affinity, sa.Affinity); diff != "" {
		t.Errorf("Job a's affinity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Spec.Template.Spec.Tolerations, sa.Tolerations); diff != "" {
		t.Errorf("Job a's tolerations (-want +got):\n%s", diff)
	}
	if *a.Spec.Parallelism != 1 || *a.Spec.BackoffLimit != 6 || !*a.Spec.Suspend || *a.Spec.ManualSelector ||
		*a.Spec.CompletionMode != batchv1.NonIndexedCompletion || *a.Spec.PodReplacementPolicy != batchv1.TerminatingOrFailed {
		t.Errorf("Job a's counts and modes changed: %+v", a.Spec)
	}
	other := storedJob("c", "uid-c")
	other.Spec.Template.Spec.Tolerations[0].Key = "other"
	other.Spec.Parallelism = ptr.To[int32](3)
	out, _ := StripJob(other)
	c := out.(*batchv1.Job)
	if c.Spec.Template.Spec.Tolerations[0].Key != "other" || *c.Spec.Parallelism != 3 || *a.Spec.Parallelism != 1 {
		t.Errorf("Job c, of other tolerations and parallelism, got another's: %q, %d", c.Spec.Template.Spec.Tolerations[0].Key, *c.Spec.Parallelism)
	}
}

// BenchmarkStrippedJobHeld reports the heap that each of 10,000 stored
// Jobs of one queue holds once decoded from protobuf and stripped, as
// the Jobs' informer keeps them (B/job).
func BenchmarkStrippedJobHeld(b *testing.B) {
	const n = 10000
	frames := make([][]byte, n)
	for i := range frames {
		name := fmt.Sprintf("job-%05d", i)
		var err error
		if frames[i], err = storedJob(name, types.UID(fmt.Sprintf("8d7c1e2a-0000-4000-8000-%012d", i))).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	var perJob float64
	for b.Loop() {
		held := make([]*batchv1.Job, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, f := range frames {
			j := &batchv1.Job{}
			if err := j.Unmarshal(f); err != nil {
				b.Fatal(err)
			}
			out, _ := StripJob(j)
			held[i] = out.(*batchv1.Job)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perJob = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(held)
	}
	b.ReportMetric(perJob, "B/job")
}
