package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/queues"
)

// TestIntegrationFinishedLeaves: a Job labelled finished leaves tally's
// watch, and the ledger keeps nothing of it (its LocalQueue's gauge of
// finished workloads counts none), while a pod of it that still runs
// keeps its quota until the pod is gone.
func TestIntegrationFinishedLeaves(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "finished"
	bindManaged(t, ns, "finished") // 2 CPUs
	one := admittedJob(t, ns, "one", "2", 1)
	pod := newPod(ns, "one-a", "2", one, "Job")
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if gated(pod) {
		t.Fatalf("pod one-a, Job one's, is gated: %v", pod.Spec.SchedulingGates)
	}
	state := func(name string) string { return getJob(t, ns, name).Labels[queues.LabelState] }
	eventually(t, 10*time.Second, func() (bool, string) {
		n, found, err := gauge("tally_local_queue_admitted_active_workloads", ns)
		return found && n == 1, fmt.Sprintf("tally_local_queue_admitted_active_workloads{namespace=%q} = %v (found %v, %v)", ns, n, found, err)
	})
	// Its LocalQueue's series may be gone once it counts nothing.
	finished := func() (bool, string) {
		n, found, err := gauge("tally_local_queue_finished_workloads", ns)
		return err == nil && n == 0, fmt.Sprintf("tally_local_queue_finished_workloads{namespace=%q} = %v (found %v, %v)", ns, n, found, err)
	}

	// Job one finishes while its pod still runs: it is labelled finished,
	// and its pod keeps the quota.
	complete(t, ns, "one")
	eventually(t, 10*time.Second, func() (bool, string) { s := state("one"); return s == "finished", "Job one is " + s })
	if err := k8s.Create(ctx, newJob(ns, "two", "2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return hasEvent(t, ns, "two", "Pending", "Waiting for quota: needs cpu=2 in flavor on-demand; ClusterQueue finished uses 2 of 2")
	})
	if s := state("two"); s != "pending" {
		t.Fatalf("Job two is %s while Job one's pod holds the quota", s)
	}

	// The pod is gone: Job one is forgotten, and Job two is admitted,
	// finishes and is forgotten too.
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, finished)
	// A pod that names Job one, out of tally's watch now, as its
	// controller is not let through as its: Job one has finished.
	late := newPod(ns, "one-late", "2", one, "Job")
	if err := k8s.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	if !gated(late) {
		t.Fatalf("pod one-late, naming finished Job one as its controller, was let through: labels %v", late.Labels)
	}
	if err := k8s.Delete(ctx, late, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		j := getJob(t, ns, "two")
		return !ptr.Deref(j.Spec.Suspend, true), "Job two is " + j.Labels[queues.LabelState]
	})
	complete(t, ns, "two")
	eventually(t, 10*time.Second, func() (bool, string) { s := state("two"); return s == "finished", "Job two is " + s })
	eventually(t, 10*time.Second, finished)
}

// gauge sums the series of metric name in the registry tally's ledger
// registers with, whose namespace label is ns, and says whether there
// are any.
func gauge(name, ns string) (float64, bool, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, false, err
	}
	sum, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					sum += m.GetGauge().GetValue()
					found = true
				}
			}
		}
	}
	return sum, found, nil
}
