package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
	"tally.dev/tally/kinds/kindstest"
	"tally.dev/tally/queues"
)

// newPyTorchJob is a PyTorchJob of one master and workers workers, one GPU
// each, created not suspended (runPolicy absent), as a user would.
func newPyTorchJob(ns, name string, workers int64, labels map[string]string) *unstructured.Unstructured {
	c := map[string]any{"name": "pytorch", "image": "pytorch",
		"resources": map[string]any{"requests": map[string]any{"cpu": "1", "nvidia.com/gpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}}}
	b := kindstest.PyTorchJob(ns, name).Replica("Master", 1, "OnFailure", c).Replica("Worker", workers, "OnFailure", c)
	for k, v := range labels {
		b.Label(k, v)
	}
	return b.Obj()
}

func getPyTorchJob(t *testing.T, ns, name string) *kinds.Object {
	t.Helper()
	u := kinds.PyTorchJob.New()
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatalf("get PyTorchJob %s/%s: %v", ns, name, err)
	}
	o, err := kinds.PyTorchJob.Read(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// pyTorchJobEvent says whether the PyTorchJob has an Event of reason
// whose message holds text.
func pyTorchJobEvent(t *testing.T, ns, name, reason, text string) (bool, string) {
	t.Helper()
	var list corev1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind != "PyTorchJob" || e.InvolvedObject.Name != name {
			continue
		}
		if e.Reason == reason && strings.Contains(e.Message, text) {
			return true, ""
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return false, fmt.Sprintf("no %s event with %q on PyTorchJob %s; has %v", reason, text, name, seen)
}

// finishPyTorchJob marks a PyTorchJob Succeeded through the status
// subresource, as the training operator would.
func finishPyTorchJob(t *testing.T, ns, name string) {
	t.Helper()
	o := getPyTorchJob(t, ns, name)
	u := o.Obj.(*unstructured.Unstructured)
	now := metav1.Now().UTC().Format(time.RFC3339)
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{
		"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "lastUpdateTime": now, "lastTransitionTime": now,
	}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Status().Update(context.Background(), u); err != nil {
		t.Fatalf("finishing PyTorchJob %s: %v", name, err)
	}
}

// TestIntegrationPyTorchJob runs PyTorchJobs through the kind seam
// against a real API server serving the training operator's CRD: the
// webhook suspends a PyTorchJob created running and pins both replica
// templates to the queue's flavor; the ledger admits all four pods at
// once with one write, holds a second PyTorchJob that does not fit with
// no write to it, lets no one else un-suspend it, preempts for a
// higher-priority one, and admits the next when one finishes.
func TestIntegrationPyTorchJob(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const ns = "ptj"
	bindManaged(t, ns, "pytorch")

	// Every write to a is counted from its creation on: each admission
	// and each preemption must be one write.
	wc, err := client.NewWithWatch(envCfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kinds.PyTorchJob.GVK().GroupVersion().WithKind("PyTorchJobList"))
	watcher, err := wc.Watch(ctx, list, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "a")})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	writesToA := func() int {
		n := 0
		for {
			select {
			case ev := <-watcher.ResultChan():
				if ev.Type == watch.Modified {
					n++
				}
			case <-time.After(time.Second):
				return n
			}
		}
	}

	// Created running: the webhook suspends it.
	a := newPyTorchJob(ns, "a", 3, nil)
	if err := k8s.Create(ctx, a); err != nil {
		t.Fatalf("create PyTorchJob a: %v", err)
	}
	if got := a.GetLabels()[queues.LabelQueue]; got != "pytorch" {
		t.Fatalf("PyTorchJob a queued in %q, want pytorch", got)
	}
	if s, _, _ := unstructured.NestedBool(a.Object, "spec", "runPolicy", "suspend"); !s {
		t.Fatal("the webhook did not suspend a PyTorchJob created running")
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		o := getPyTorchJob(t, ns, "a")
		return !o.Suspended && o.Meta.Labels[queues.LabelState] == "admitted", fmt.Sprintf("a: suspended %v, state %q", o.Suspended, o.Meta.Labels[queues.LabelState])
	})
	admitted := getPyTorchJob(t, ns, "a")
	if got := admitted.Meta.Annotations[queues.AnnotationFlavors]; got != "master=gpu,worker=gpu" {
		t.Errorf("flavors annotation %q, want master=gpu,worker=gpu", got)
	}
	for _, ps := range admitted.PodSets {
		terms := queues.RequiredTerms(&ps.Template.Spec)
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != "accel" || terms[0].MatchExpressions[0].Values[0] != "gpu" {
			t.Errorf("pod set %s: required affinity %+v, want accel=gpu", ps.Name, terms)
		}
		if len(ps.Template.Spec.Tolerations) != 1 || ps.Template.Spec.Tolerations[0].Key != "gpu" {
			t.Errorf("pod set %s: tolerations %+v, want the gpu flavor's", ps.Name, ps.Template.Spec.Tolerations)
		}
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		return pyTorchJobEvent(t, ns, "a", "Admitted", "Admitted by ClusterQueue pytorch in flavor gpu (cpu=4, nvidia.com/gpu=4; master 1 pod, worker 3 pods)")
	})

	// Does not fit beside a: it waits, and nothing writes to it.
	if err := k8s.Create(ctx, newPyTorchJob(ns, "b", 3, nil)); err != nil {
		t.Fatalf("create PyTorchJob b: %v", err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return pyTorchJobEvent(t, ns, "b", "Pending", "Waiting for quota: needs nvidia.com/gpu=4 in flavor gpu; ClusterQueue pytorch uses 4 of 4")
	})
	waiting := getPyTorchJob(t, ns, "b")
	if !waiting.Suspended || waiting.Meta.Labels[queues.LabelState] != "pending" {
		t.Fatalf("b: suspended %v, state %q; want a suspended pending PyTorchJob", waiting.Suspended, waiting.Meta.Labels[queues.LabelState])
	}

	// A user cannot un-suspend it.
	cfg := rest.CopyConfig(envCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:masters"}}
	mallory, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	victimRef := kinds.PyTorchJob.New()
	victimRef.SetNamespace(ns)
	victimRef.SetName("b")
	err = mallory.Patch(ctx, victimRef, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"runPolicy":{"suspend":false}}}`)))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.runPolicy.suspend: only tally may un-suspend a PyTorchJob") {
		t.Errorf("un-suspending a waiting PyTorchJob: got %v, want Forbidden on spec.runPolicy.suspend", err)
	}
	if rv := getPyTorchJob(t, ns, "b").Meta.ResourceVersion; rv != waiting.Meta.ResourceVersion {
		t.Errorf("a pending PyTorchJob was written to: resourceVersion %s -> %s", waiting.Meta.ResourceVersion, rv)
	}

	// A higher-priority one preempts a; with no operator to report pods,
	// a's quota is free once it is suspended.
	if err := k8s.Create(ctx, newPyTorchJob(ns, "c", 3, map[string]string{queues.LabelKueuePriorityClass: "high"})); err != nil {
		t.Fatalf("create PyTorchJob c: %v", err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		a, c := getPyTorchJob(t, ns, "a"), getPyTorchJob(t, ns, "c")
		return a.Suspended && !c.Suspended, fmt.Sprintf("a suspended %v, c suspended %v", a.Suspended, c.Suspended)
	})
	eventually(t, 5*time.Second, func() (bool, string) { return pyTorchJobEvent(t, ns, "a", "Preempted", "") })
	eventually(t, 5*time.Second, func() (bool, string) { return pyTorchJobEvent(t, ns, "c", "Preempting", "") })
	if b := getPyTorchJob(t, ns, "b"); !b.Suspended {
		t.Error("b was admitted while c held the quota")
	}

	// c finishes: the quota goes to a or b, whichever is first in line,
	// and only to one of them.
	finishPyTorchJob(t, ns, "c")
	eventually(t, 20*time.Second, func() (bool, string) {
		a, b := getPyTorchJob(t, ns, "a"), getPyTorchJob(t, ns, "b")
		return a.Suspended != b.Suspended, fmt.Sprintf("a suspended %v, b suspended %v", a.Suspended, b.Suspended)
	})
	eventually(t, 5*time.Second, func() (bool, string) {
		return pyTorchJobEvent(t, ns, "c", "QuotaReleased", "Finished; released cpu=4, nvidia.com/gpu=4 in flavor gpu")
	})
	eventually(t, 10*time.Second, func() (bool, string) {
		s := getPyTorchJob(t, ns, "c").Meta.Labels[queues.LabelState]
		return s == "finished", "c state " + s
	})
	// a was admitted, preempted and, if it was first in line, admitted
	// again: one write each.
	want := 2
	if !getPyTorchJob(t, ns, "a").Suspended {
		want = 3
	}
	if got := writesToA(); got != want {
		t.Errorf("%d writes to PyTorchJob a, want %d (one per admission and per preemption)", got, want)
	}
}
