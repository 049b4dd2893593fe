package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// TestEventQueue records Events through an EventQueue on a real API
// server: each arrives as client-go's recorders write it, a repeat counts
// on its first copy, and an Event recorded while EventQueueLength wait is
// dropped and counted, never queued.
func TestEventQueue(t *testing.T) {
	cfg := startAPIServer(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A namespace of the test's own: the API server records Events of its
	// own in default (ClusterIPNotAllocated, for one).
	const ns = "eventqueue"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	reg := prometheus.NewRegistry()
	// In protobuf, as Setup's client speaks.
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	q := NewEventQueue(&corev1client.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(pcfg).CoreV1().Events("")}, clientgoscheme.Scheme, "tally", reg, logr.Discard())

	// Not started: the queue fills, and then drops.
	for i := range EventQueueLength {
		q.Eventf(cm, corev1.EventTypeNormal, "Filled", "event %d", i)
	}
	if q.Full() != true || q.drops.Load() != 0 {
		t.Fatalf("after %d Events: full %v, dropped %v; want full, none dropped", EventQueueLength, q.Full(), q.drops.Load())
	}
	q.Event(cm, corev1.EventTypeWarning, "Late", "dropped")
	q.Eventf(cm, corev1.EventTypeWarning, "Late", "dropped %d", 2)
	if got := q.drops.Load(); got != 2 || counterOf(t, reg, "tally_events_dropped_total") != 2 {
		t.Fatalf("dropped %v Events recorded on a full queue; want 2", got)
	}
	if got := len(q.queue); got != EventQueueLength {
		t.Fatalf("%d queued; want %d", got, EventQueueLength)
	}
	// Empty it unsent, then start it.
	for len(q.queue) > 0 {
		<-q.queue
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Start(ctx) }()

	q.Event(cm, corev1.EventTypeNormal, "Admitted", "once")
	q.Event(cm, corev1.EventTypeWarning, "Preempted", "twice")
	q.Event(cm, corev1.EventTypeWarning, "Preempted", "twice")
	q.Event(&corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: ns, Name: "j", UID: "u1"}, corev1.EventTypeNormal, "Queued", "by reference")

	var events []corev1.Event
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events = list.Items
		counts := map[string]int32{}
		for _, e := range events {
			counts[e.Reason] += e.Count
		}
		return counts["Admitted"] == 1 && counts["Preempted"] == 2 && counts["Queued"] == 1, nil
	})
	if err != nil {
		t.Fatalf("Events not written as recorded: %v; have %s", err, describeEvents(events))
	}
	for _, e := range events {
		switch e.Reason {
		case "Admitted", "Preempted":
			if e.InvolvedObject.Kind != "ConfigMap" || e.InvolvedObject.Name != "c" || e.InvolvedObject.UID != cm.UID {
				t.Errorf("%s: on %+v; want the ConfigMap c", e.Reason, e.InvolvedObject)
			}
		case "Queued":
			if e.InvolvedObject.Kind != "Job" || e.InvolvedObject.UID != "u1" {
				t.Errorf("Queued: on %+v; want the Job j", e.InvolvedObject)
			}
		}
		if e.Source.Component != "tally" || e.ReportingController != "tally" || e.FirstTimestamp.IsZero() {
			t.Errorf("%s: source %+v, reporting controller %q, first %v; want tally's, with a time", e.Reason, e.Source, e.ReportingController, e.FirstTimestamp)
		}
		if e.Reason == "Preempted" && (e.Type != corev1.EventTypeWarning || e.Message != "twice") {
			t.Errorf("Preempted: type %s, message %q", e.Type, e.Message)
		}
	}
	cancel()
	<-done
}

func describeEvents(events []corev1.Event) string {
	s := ""
	for _, e := range events {
		s += fmt.Sprintf("[%s %s/%s x%d %q] ", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message)
	}
	return s
}

// counterOf reads the counter name from reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
