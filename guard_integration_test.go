package main

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// jobUser returns a client acting as user, who may do anything to Jobs
// and pods in ns. envtest runs no controller manager, so the aggregated edit role is
// empty: the Job verbs are granted directly.
func jobUser(t *testing.T, user, ns string) client.Client {
	t.Helper()
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs-" + user}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}, {
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "jobs-" + user},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}},
	} {
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(envCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIntegrationForgedStateUnbound acts as a user who may create Jobs in
// a namespace tally does not manage. A Job that carries tally's state
// label, which the ledger would take for one tally queued and admit into
// the ClusterQueue its queue label names, is denied at creation, and so
// is adding the label to a Job, or a pod made to look like a single-pod
// workload tally queued; a plain Job is left alone. Read from the Jobs.
func TestIntegrationForgedStateUnbound(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "forge"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	mallory := jobUser(t, "mallory", ns)
	const denied = `admission webhook "unmanaged.validate.tally.dev" denied the request: tally: metadata.labels[tally.dev/state]: only tally sets this label`
	forged := newJob(ns, "forged", "1")
	forged.Spec.Suspend = ptr.To(true)
	forged.Labels = map[string]string{queues.LabelState: string(queues.StatePending), queues.LabelQueue: "small"}
	if err := mallory.Create(ctx, forged); err == nil || !strings.Contains(err.Error(), denied) {
		t.Fatalf("creating a Job labelled %v in an unbound namespace: %v; want %q", forged.Labels, err, denied)
	}
	plain := newJob(ns, "plain", "1")
	if err := mallory.Create(ctx, plain); err != nil {
		t.Fatalf("creating a plain Job in an unbound namespace: %v", err)
	}
	if ptr.Deref(plain.Spec.Suspend, false) || plain.Labels[queues.LabelState] != "" {
		t.Errorf("a plain Job of an unbound namespace: suspend %v, labels %v; want it left alone", plain.Spec.Suspend, plain.Labels)
	}
	before := plain.DeepCopy()
	plain.Labels = map[string]string{queues.LabelState: string(queues.StateAdmitted), queues.LabelQueue: "small"}
	if err := mallory.Patch(ctx, plain, client.MergeFrom(before)); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("labelling a running Job admitted in an unbound namespace: %v; want %q", err, denied)
	}
	// A bare pod that says it is a single-pod workload queued (or
	// admitted) in small, as the pod gate and tally label one.
	pod := newPod(ns, "forged", "1", nil, "")
	pod.Labels = map[string]string{queues.LabelWorkload: queues.PodWorkload, queues.LabelState: string(queues.StatePending), queues.LabelQueue: "small"}
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: queues.SchedulingGate}}
	if err := mallory.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), denied) {
		t.Errorf("creating a pod labelled %v in an unbound namespace: %v; want %q", pod.Labels, err, denied)
	}
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Labels[queues.LabelState] != "" {
			t.Errorf("Job %s of an unbound namespace carries %s=%s", j.Name, queues.LabelState, j.Labels[queues.LabelState])
		}
	}
}

// TestIntegrationGuard acts as a plain user, alice, who may do anything to
// Jobs in her namespace, and checks that tally's Job guard leaves her own
// Jobs' queueing to tally while tally (the admin user here, found by
// SelfSubjectReview) still admits them.
func TestIntegrationGuard(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "guard"
	bindNamespace(t, ns, "accel")
	alice := jobUser(t, "alice", ns)
	// The Job webhook reads namespaces from tally's cache: wait until a
	// dry run shows it queues Jobs here.
	eventually(t, 10*time.Second, func() (bool, string) {
		probe := newJob(ns, "probe", "1")
		if err := alice.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return probe.Labels[queues.LabelQueue] == "accel", "not queued yet: labels " + strings.Join(mapKV(probe.Labels), ",")
	})

	run, never := newJob(ns, "run", "1"), newJob(ns, "never", "101")
	for _, j := range []*batchv1.Job{run, never} {
		if err := alice.Create(ctx, j); err != nil {
			t.Fatalf("alice creating %s: %v", j.Name, err)
		}
		if !ptr.Deref(j.Spec.Suspend, false) || j.Labels[queues.LabelQueue] != "accel" {
			t.Fatalf("%s created with suspend=%v labels %v, want suspended in accel", j.Name, j.Spec.Suspend, j.Labels)
		}
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j := getJob(t, ns, "run")
		return j.Labels[queues.LabelState] == "admitted" && !ptr.Deref(j.Spec.Suspend, true), "run: state " + j.Labels[queues.LabelState]
	})

	// edit changes a fresh copy of the Job as alice, with a merge patch.
	edit := func(name string, change func(j *batchv1.Job)) error {
		j := getJob(t, ns, name)
		before := j.DeepCopy()
		change(j)
		return alice.Patch(ctx, j, client.MergeFrom(before))
	}
	const denied = `admission webhook "jobs.validate.tally.dev" denied the request: tally: `
	for _, c := range []struct {
		name, job string
		change    func(j *batchv1.Job)
		want      string
	}{
		{"un-suspend a waiting Job", "never", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) },
			"spec.suspend: only tally may un-suspend a Job in a managed namespace; it is admitted when its ClusterQueue has quota (see kubectl describe job)"},
		{"remove the queue label", "never", func(j *batchv1.Job) { delete(j.Labels, queues.LabelQueue) },
			"metadata.labels[tally.dev/cluster-queue]: only tally may remove this label"},
		{"move an admitted Job to another queue", "run", func(j *batchv1.Job) { j.Labels[queues.LabelQueue] = "small" },
			"metadata.labels[tally.dev/cluster-queue]: only tally may change this label"},
		{"add a nodeSelector", "never", func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"accel": "gpu"} },
			"spec.template.spec.nodeSelector: only tally may change the nodeSelector"},
		{"add a toleration", "never", func(j *batchv1.Job) {
			j.Spec.Template.Spec.Tolerations = append(j.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}, "spec.template.spec.tolerations: only tally may change the tolerations"},
	} {
		t.Run("alice may not "+c.name, func(t *testing.T) {
			err := edit(c.job, c.change)
			if err == nil || !strings.Contains(err.Error(), denied+c.want) {
				t.Fatalf("want %q, got %v", denied+c.want, err)
			}
		})
	}
	t.Run("alice may label her waiting Job", func(t *testing.T) {
		if err := edit("never", func(j *batchv1.Job) { j.Labels["owner"] = "alice" }); err != nil {
			t.Fatal(err)
		}
		if j := getJob(t, ns, "never"); j.Labels["owner"] != "alice" || !ptr.Deref(j.Spec.Suspend, false) {
			t.Fatalf("never: labels %v suspend %v", j.Labels, j.Spec.Suspend)
		}
	})
	t.Run("alice may suspend her admitted Job", func(t *testing.T) {
		var stored *batchv1.Job
		err := edit("run", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true); stored = j })
		if err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(stored.Spec.Suspend, false) {
			t.Fatalf("the stored Job is not suspended")
		}
	})
}
