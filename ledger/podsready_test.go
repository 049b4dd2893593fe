package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"tally.dev/tally/kinds"
	"tally.dev/tally/ledger/machine"
	"tally.dev/tally/ledger/metrics"
	"tally.dev/tally/queues"
)

// readyPods delivers n running pods of workload name, ready of them Ready.
// A RayJob's pods are its RayCluster's, as KubeRay makes them.
func (s *scenario) readyPods(name string, n, ready int) {
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
	if o, ok := s.objects[name]; ok && o.GetObjectKind().GroupVersionKind().Kind == "RayJob" {
		owner = metav1.OwnerReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: name, UID: types.UID("uid-" + name + "-cluster"), Controller: ptr.To(true)}
	}
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", name, i),
			UID: types.UID(fmt.Sprintf("pod-%s-%d", name, i)), Labels: map[string]string{queues.LabelWorkload: "uid-" + name},
			OwnerReferences: []metav1.OwnerReference{owner}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		status := corev1.ConditionFalse
		if i < ready {
			status = corev1.ConditionTrue
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		s.l.onPod(pod)
	}
	s.pods[name] = n
}

// timeOut runs workload name's PodsReady deadline now and lands the
// eviction it decides, as the API server would apply it.
func (s *scenario) timeOut(name string) (msg string, ann map[string]any) {
	s.t.Helper()
	s.l.mu.Lock()
	w, ann, ok := s.l.timeOutLocked(types.UID("uid-" + name))
	s.l.mu.Unlock()
	if !ok {
		s.t.Fatalf("%s: no eviction at its deadline", name)
	}
	ev, err := s.l.target(w).Evict(ann)
	if err != nil {
		s.t.Fatal(err)
	}
	s.update(name, func(m map[string]any) { mergePatch(m, ev.Patch, s.t) })
	s.l.requeued(w, metrics.EvictedPodsReady)
	return w.message, ann
}

// entry is a copy of workload name's entry, taken under the lock.
func (s *scenario) entry(name string) entry {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return *s.l.jobs[types.UID("uid-"+name)]
}

// TestPodsReadyTimeout: an admitted Job whose pods are not ready by the
// timeout is evicted with its count and backoff in the same write, waits
// out of its queue until the backoff is over, and is set aside as
// inadmissible once evicted more often than backoffLimitCount allows.
// With blockAdmission its queue admits nothing else meanwhile.
func TestPodsReadyTimeout(t *testing.T) {
	s := newScenario(t)
	// The deadlines' timers do nothing once the ledger stopped, nor does
	// it start an eviction's write: the test runs each deadline itself
	// and lands its write (timeOut), on the fake clock.
	s.l.writer.stop()
	limit := int32(1)
	s.l.cfg.PodsReady = &queues.PodsReady{Timeout: time.Minute, BlockAdmission: true, BackoffLimitCount: &limit,
		BackoffBase: 10 * time.Second, BackoffMax: time.Hour}
	s.step([]string{"create", "a", "pytorch", "workers=1"})
	s.step([]string{"pass"})
	s.step([]string{"landed", "a"})
	s.readyPods("a", 2, 1)
	s.step([]string{"running", "a"})
	s.step([]string{"create", "b"})

	// a waits for its second pod: its queue admits nothing else.
	if decided := s.l.decide(); len(decided) != 0 {
		t.Fatalf("blockAdmission: the pass decided %d writes while a's pods are not ready", len(decided))
	}
	s.l.mu.Lock()
	_, _, early := s.l.timeOutLocked("uid-a")
	s.l.mu.Unlock()
	if early {
		t.Fatal("evicted before its timeout")
	}

	s.clock.Step(time.Minute)
	msg, ann := s.timeOut("a")
	at := s.clock.Now().Add(10 * time.Second).UTC().Format(time.RFC3339)
	if ann[queues.AnnotationRequeues] != "1" || ann[queues.AnnotationRequeueAt] != at ||
		!strings.HasPrefix(msg, "PodsReadyTimeout: 1 of 2 pods ready 1m0s after its admission; requeued, not admitted again before "+at) {
		t.Fatalf("first eviction: annotations %v, message %q", ann, msg)
	}
	if got := s.read("a").Meta.Labels[queues.LabelState]; got != string(queues.StatePending) {
		t.Errorf("evicted, state label %q", got)
	}
	s.step([]string{"stopped", "a"})
	s.setPods("a", 0)
	if e := s.entry("a"); e.Phase() != machine.Pending || e.InTree || e.Charged != nil {
		t.Fatalf("backing off: %s, in tree %v, charged %v; want pending, out of its queue, holding nothing", e.Phase(), e.InTree, e.Charged)
	}
	// b may go now; a may not before its backoff is over.
	decided := s.l.decide()
	if len(decided) != 1 || decided[0].w.Name != "b" {
		t.Fatalf("after a's eviction the pass decided %v, want b alone", decided)
	}
	s.l.rollback(decided[0], context.Canceled)

	s.clock.Step(10 * time.Second)
	s.runTimers()
	if e := s.entry("a"); !e.InTree {
		t.Fatal("a did not queue again when its backoff ended")
	}

	// Admitted again, its pods not ready again: past the limit.
	s.writes = map[string]write{}
	s.step([]string{"pass"})
	s.step([]string{"landed", "a"})
	s.readyPods("a", 2, 0)
	s.clock.Step(time.Minute)
	msg, ann = s.timeOut("a")
	if ann[queues.AnnotationRequeues] != "2" ||
		!strings.Contains(msg, "evicted 2 times, more than backoffLimitCount 1 allows: set aside as inadmissible (its pods did not start in flavor default)") {
		t.Fatalf("second eviction: annotations %v, message %q", ann, msg)
	}
	s.step([]string{"stopped", "a"})
	s.setPods("a", 0)
	if e := s.entry("a"); e.Phase() != machine.Inadmissible || e.InTree {
		t.Fatalf("past the limit: %s, in tree %v; want inadmissible", e.Phase(), e.InTree)
	}
}

// TestPodsReadyInTime: pods all ready before the timeout, even when one
// has succeeded since, leave the workload admitted.
func TestPodsReadyInTime(t *testing.T) {
	s := newScenario(t)
	s.l.writer.stop()
	s.l.cfg.PodsReady = &queues.PodsReady{Timeout: time.Minute, BackoffBase: time.Minute}
	s.step([]string{"create", "a", "pytorch", "workers=1"})
	s.step([]string{"pass"})
	s.step([]string{"landed", "a"})
	s.readyPods("a", 2, 2)
	// One pod succeeds: it still counts as ready.
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-0", UID: "pod-a-0",
		Labels:          map[string]string{queues.LabelWorkload: "uid-a"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "a", UID: "uid-a", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	s.l.onPod(done)
	s.clock.Step(2 * time.Minute)
	s.l.mu.Lock()
	_, _, evicted := s.l.timeOutLocked("uid-a")
	s.l.mu.Unlock()
	if evicted {
		t.Fatal("evicted with all its pods ready")
	}
	if e := s.entry("a"); e.Phase() != machine.Admitted {
		t.Fatalf("%s, want admitted", e.Phase())
	}
}

// TestPodsReadyAutoscaling: waitForPodsReady waits for the pods the
// workload's controller starts, not for all it is charged for: an
// autoscaling RayJob is charged its groups' maxReplicas, but KubeRay
// starts replicas, and the autoscaler adds the others when it needs them.
// Once those it starts are ready it is not evicted, and its cohort admits
// again; one of them not ready is evicted, the message counting against
// what was started.
func TestPodsReadyAutoscaling(t *testing.T) {
	for _, tc := range []struct {
		name          string
		create        []string
		pods, ready   int
		evicted       string // the eviction's message starts so; "" for none
		admitsAnother bool
	}{
		{name: "autoscaling, the started pods ready", create: []string{"ray", "cpu=500m", "workers=1", "max=4"},
			pods: 3, ready: 3, admitsAnother: true},
		{name: "autoscaling, scaled up, all ready", create: []string{"ray", "cpu=500m", "workers=1", "max=4"},
			pods: 5, ready: 5, admitsAnother: true},
		{name: "autoscaling, a started worker not ready", create: []string{"ray", "cpu=500m", "workers=1", "max=4"},
			pods: 3, ready: 2, evicted: "PodsReadyTimeout: 2 of 3 pods ready 1m0s after its admission; requeued"},
		{name: "autoscaling from no workers, head and submitter ready", create: []string{"ray", "cpu=500m", "workers=0", "max=4"},
			pods: 2, ready: 2, admitsAnother: true},
		{name: "a fixed cluster waits for all its workers", create: []string{"ray", "cpu=500m", "workers=2"},
			pods: 4, ready: 3, evicted: "PodsReadyTimeout: 3 of 4 pods ready 1m0s after its admission; requeued"},
		{name: "a fixed cluster, all ready", create: []string{"ray", "cpu=500m", "workers=2"},
			pods: 4, ready: 4, admitsAnother: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t)
			s.l.writer.stop()
			s.l.cfg.PodsReady = &queues.PodsReady{Timeout: time.Minute, BlockAdmission: true, BackoffBase: time.Minute, BackoffMax: time.Hour}
			s.step(append([]string{"create", "a"}, tc.create...))
			s.step([]string{"pass"})
			s.step([]string{"landed", "a"})
			if e := s.entry("a"); e.Phase() != machine.Admitted {
				t.Fatalf("a: %s, want admitted", e.Phase())
			}
			s.readyPods("a", tc.pods, tc.ready)
			s.step([]string{"create", "b", "cpu=500m"})
			decided := s.l.decide()
			if admits := len(decided) == 1 && decided[0].w.Name == "b"; admits != tc.admitsAnother {
				t.Errorf("blockAdmission with %d of a's %d pods ready: the pass decided %v, want b admitted: %v", tc.ready, tc.pods, decided, tc.admitsAnother)
			}
			for _, w := range decided {
				s.l.rollback(w, context.Canceled)
			}

			s.clock.Step(time.Minute)
			s.l.mu.Lock()
			w, _, evicted := s.l.timeOutLocked("uid-a")
			s.l.mu.Unlock()
			switch {
			case tc.evicted == "" && evicted:
				t.Fatalf("evicted at its timeout with %d of %d pods ready: %s", tc.ready, tc.pods, w.message)
			case tc.evicted != "" && !evicted:
				t.Fatalf("not evicted at its timeout with %d of %d pods ready", tc.ready, tc.pods)
			case evicted && !strings.HasPrefix(w.message, tc.evicted):
				t.Fatalf("message %q, want it to start %q", w.message, tc.evicted)
			case !evicted:
				if e := s.entry("a"); e.Phase() != machine.Admitted {
					t.Fatalf("%s, want admitted", e.Phase())
				}
			}
		})
	}
}

// TestPodsReadyEvictionPatch: the eviction's one write suspends the
// workload, sets it pending and records the count and backoff.
func TestPodsReadyEvictionPatch(t *testing.T) {
	tg := kinds.Target{Kind: kinds.Job{}, Suspend: []string{"spec", "suspend"}}
	ev, err := tg.Evict(map[string]any{queues.AnnotationRequeues: "1", queues.AnnotationRequeueAt: "2030-01-01T00:00:10Z"})
	if err != nil || ev.Delete {
		t.Fatal(ev, err)
	}
	var got batchv1.Job
	if err := json.Unmarshal(ev.Patch, &got); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(got.Spec.Suspend, false) || got.Labels[queues.LabelState] != string(queues.StatePending) ||
		got.Annotations[queues.AnnotationRequeues] != "1" || got.Annotations[queues.AnnotationRequeueAt] != "2030-01-01T00:00:10Z" {
		t.Errorf("patch %s", ev.Patch)
	}
}
