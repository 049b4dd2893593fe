package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/queues"
)

// Jobs that run before their namespace is bound are captured: counted as
// admitted while they fit, suspended when they do not.
func TestIntegrationLateCapture(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late-ns"}}); err != nil {
		t.Fatal(err)
	}
	// Unbound: the webhook never sees these, so they run at once.
	// The higher priority decides which one is captured first.
	for _, j := range []struct{ name, cpu, prio string }{{"fits", "1", "high"}, {"too-big", "2", "low"}} {
		job := newJob("late-ns", j.name, j.cpu)
		job.Spec.Suspend = new(bool)
		job.Labels = map[string]string{queues.LabelPriorityClass: j.prio}
		if err := k8s.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	if got := getJob(t, "late-ns", "fits").Labels[queues.LabelState]; got != "" {
		t.Fatalf("a Job in an unbound namespace was touched: state %q", got)
	}

	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "late-ns"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{queues.AnnotationNamespaceQueue: "late"}
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() (bool, string) {
		a, b := getJob(t, "late-ns", "fits"), getJob(t, "late-ns", "too-big")
		ok := a.Labels[queues.LabelState] == "admitted" && !*a.Spec.Suspend && a.Labels[queues.LabelQueue] == "late" &&
			b.Labels[queues.LabelState] == "pending" && *b.Spec.Suspend
		return ok, "fits=" + a.Labels[queues.LabelState] + " too-big=" + b.Labels[queues.LabelState]
	})
	eventually(t, 5*time.Second, func() (bool, string) {
		return hasEvent(t, "late-ns", "fits", "AdmittedLate", "now counted in ClusterQueue late in flavor on-demand (cpu=1)")
	})
	eventually(t, 5*time.Second, func() (bool, string) {
		return hasEvent(t, "late-ns", "too-big", "SuspendedLate", "does not fit: Waiting for quota: needs cpu=2 in flavor on-demand; ClusterQueue late uses 1 of 2")
	})

	// The captured Job holds its quota until it finishes; then the
	// suspended one is admitted the ordinary way.
	complete(t, "late-ns", "fits")
	eventually(t, 10*time.Second, func() (bool, string) {
		b := getJob(t, "late-ns", "too-big")
		return b.Labels[queues.LabelState] == "admitted" && !*b.Spec.Suspend, "too-big " + b.Labels[queues.LabelState]
	})
}

// A bound namespace that its ClusterQueue's namespaceSelector does not
// select gets its Jobs marked inadmissible, with an Event that says why.
func TestIntegrationNamespaceNotSelected(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "unselected", "selective")
	if err := k8s.Create(ctx, newJob("unselected", "j", "1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		s := getJob(t, "unselected", "j").Labels[queues.LabelState]
		return s == "inadmissible", "state " + s
	})
	eventually(t, 5*time.Second, func() (bool, string) {
		return hasEvent(t, "unselected", "j", "Inadmissible", `ClusterQueue selective does not admit namespace unselected: its namespaceSelector "team=ml" does not select it`)
	})
	// Labelling the namespace lets the selector match: the Job is admitted.
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "unselected"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["team"] = "ml"
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		s := getJob(t, "unselected", "j").Labels[queues.LabelState]
		return s == "admitted", "state " + s
	})
}

// Unbinding a namespace tells its waiting Jobs what becomes of them; they
// stay queued in their ClusterQueue.
func TestIntegrationUnbind(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	bindManaged(t, "unbind", "tiny")
	for _, n := range []string{"running", "waiting"} {
		if err := k8s.Create(ctx, newJob("unbind", n, "1")); err != nil {
			t.Fatal(err)
		}
	}
	var running, waiting string
	eventually(t, 10*time.Second, func() (bool, string) {
		running, waiting = "", ""
		for _, n := range []string{"running", "waiting"} {
			switch getJob(t, "unbind", n).Labels[queues.LabelState] {
			case "admitted":
				running = n
			case "pending":
				waiting = n
			}
		}
		return running != "" && waiting != "", "admitted " + running + ", pending " + waiting
	})
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "unbind"}, ns); err != nil {
		t.Fatal(err)
	}
	delete(ns.Annotations, queues.AnnotationNamespaceQueue)
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, "unbind", waiting, "NamespaceUnbound", "Namespace unbind is no longer bound to ClusterQueue tiny: this Job stays queued in ClusterQueue tiny")
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		ns := &corev1.Namespace{}
		_ = k8s.Get(ctx, client.ObjectKey{Name: "unbind"}, ns)
		return ns.Labels[queues.LabelManaged] == "", "namespace still labelled managed"
	})
	complete(t, "unbind", running)
	eventually(t, 10*time.Second, func() (bool, string) {
		s := getJob(t, "unbind", waiting).Labels[queues.LabelState]
		return s == "admitted", "waiting Job " + s
	})
}
