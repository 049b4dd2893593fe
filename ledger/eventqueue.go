package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"tally.dev/tally/ledger/metrics"
)

// EventQueueLength is how many Events wait to be sent, as many as
// client-go's recorders hold.
const EventQueueLength = 1000

// eventRetry is how long a write that could not reach the API server
// waits before it is tried again (the first wait a random part of it).
const eventRetry = 10 * time.Second

// EventQueue is tally's Event recorder (record.EventRecorder). It does what
// client-go's recorders do, one Event at a time from a queue of
// EventQueueLength, through client-go's EventCorrelator (which counts
// repeats of an Event on its first copy and holds back a flood on one
// object), each write tried up to 12 times 10 seconds apart while the API
// server cannot be reached; when the queue is full, the new Event is
// dropped. What it does not do is build an Event only to drop it: a
// recorder's queue fills whenever Events come faster than the API server
// takes them one by one (tens of thousands of Jobs arriving at once), and
// client-go builds each Event before it drops it, logs in full those that
// find its first queue full, and hands the others to a goroutine that
// drops them for each of its two watchers (the sender and a logger) whose
// own queue is full. Here an Event that finds the queue full costs a
// counter (tally_events_dropped_total) and, at most once a minute, a line
// in the log.
type EventQueue struct {
	// Sink writes the Events: the API server's, in the Event's namespace.
	Sink record.EventSink
	// Scheme names the kinds of the objects Events are recorded on that
	// are not object references already.
	Scheme *runtime.Scheme
	// Component is the Events' source.
	Component string
	Log       logr.Logger

	queue      chan *corev1.Event
	correlator *record.EventCorrelator
	dropped    prometheus.Counter
	drops      atomic.Int64
}

// NewEventQueue returns an EventQueue whose Events come from component,
// whose count of dropped Events is registered with reg (controller-runtime's
// registry when nil).
func NewEventQueue(sink record.EventSink, scheme *runtime.Scheme, component string, reg prometheus.Registerer, log logr.Logger) *EventQueue {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	return &EventQueue{
		Sink: sink, Scheme: scheme, Component: component, Log: log,
		queue:      make(chan *corev1.Event, EventQueueLength),
		correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}),
		dropped: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_events_dropped_total",
			Help: "Events dropped unsent because EventQueueLength Events were already waiting to be sent.",
		})),
	}
}

// Event queues an Event on object, a runtime.Object or an
// *corev1.ObjectReference; it never waits.
func (q *EventQueue) Event(object runtime.Object, eventtype, reason, message string) {
	if q.Full() {
		q.Drop()
		return
	}
	ref, err := reference.GetReference(q.Scheme, object)
	if err != nil {
		q.Log.Error(err, "no reference to the object of an Event; not recorded", "reason", reason, "message", message)
		return
	}
	if !util.ValidateEventType(eventtype) {
		q.Log.Error(nil, "unknown Event type; not recorded", "type", eventtype, "reason", reason)
		return
	}
	now := metav1.Now()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: namespace},
		InvolvedObject: *ref,
		Reason:         reason, Message: message, Type: eventtype,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              corev1.EventSource{Component: q.Component},
		ReportingController: q.Component,
	}
	select {
	case q.queue <- ev:
	default:
		q.Drop()
	}
}

// Eventf is Event with a formatted message.
func (q *EventQueue) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if q.Full() {
		q.Drop()
		return
	}
	q.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf is Eventf; tally sets no annotations on its Events.
func (q *EventQueue) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	q.Eventf(object, eventtype, reason, messageFmt, args...)
}

// Full says whether an Event recorded now would be dropped: a caller
// that has work to do to make one may skip it and call Drop instead.
func (q *EventQueue) Full() bool { return len(q.queue) == cap(q.queue) }

// Drop counts an Event dropped because the queue is full. Start logs the
// count once a minute.
func (q *EventQueue) Drop() {
	q.dropped.Inc()
	q.drops.Add(1)
}

// NeedLeaderElection is false: every replica records its own Events.
func (q *EventQueue) NeedLeaderElection() bool { return false }

// Start sends the queued Events until ctx ends; those still queued then
// are not sent.
func (q *EventQueue) Start(ctx context.Context) error {
	var last int64
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if now := q.drops.Load(); now > last {
				q.Log.Info("Events dropped: more were recorded than the API server took", "dropped", now-last, "queue", EventQueueLength)
				last = now
			}
		case ev := <-q.queue:
			q.send(ctx, ev)
		}
	}
}

// send writes ev, as correlated, trying again while the API server cannot
// be reached, at most 12 times.
func (q *EventQueue) send(ctx context.Context, ev *corev1.Event) {
	res, err := q.correlator.EventCorrelate(ev)
	if err != nil {
		q.Log.Error(err, "correlating an Event")
	}
	if res == nil || res.Skip {
		return
	}
	for tries := 1; ; tries++ {
		if q.write(res.Event, res.Patch) {
			return
		}
		if tries == 12 {
			q.Log.Error(nil, "Event not written after 12 tries", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "namespace", ev.Namespace)
			return
		}
		wait := eventRetry
		if tries == 1 {
			wait = time.Duration(rand.Float64() * float64(eventRetry))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// write writes ev once: a patch of the Event it repeats (patch), or a
// create when it repeats none or that one is gone. It says whether it is
// done with ev: written, or refused for good.
func (q *EventQueue) write(ev *corev1.Event, patch []byte) bool {
	var written *corev1.Event
	var err error
	if ev.Count > 1 {
		written, err = q.Sink.Patch(ev, patch)
	}
	if ev.Count <= 1 || apierrors.IsNotFound(err) {
		ev.ResourceVersion = ""
		written, err = q.Sink.Create(ev)
	}
	if err == nil {
		q.correlator.UpdateState(written)
		return true
	}
	if _, refused := err.(*apierrors.StatusError); refused {
		if !apierrors.IsAlreadyExists(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			q.Log.Error(err, "the API server refused an Event", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "namespace", ev.Namespace)
		}
		return true
	}
	q.Log.Error(err, "writing an Event; trying again", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "namespace", ev.Namespace)
	return false
}
