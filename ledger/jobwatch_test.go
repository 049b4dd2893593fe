package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/kinds"
)

// watchedJob is a Job as the API server sends it: with managedFields,
// labels, a pod template with requests, and status.
func watchedJob(name, rv string) *batchv1.Job {
	parallelism := int32(4)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name), ResourceVersion: rv, Generation: 2,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)),
			Labels:            map[string]string{"tally.dev/state": "admitted", "kueue.x-k8s.io/queue-name": "user-queue"},
			Annotations:       map[string]string{"tally.dev/admitted": "cq-1/default"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "runner", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "batch/v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:parallelism":{},"f:template":{"f:spec":{"f:containers":{}}}}}`)}},
				{Manager: "tally-admission", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "batch/v1", FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:suspend":{}}}`)}},
			}},
		Spec: batchv1.JobSpec{Parallelism: &parallelism, Suspend: new(bool),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{"flavor": "on-demand"},
				Containers: []corev1.Container{{Name: "main", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}}},
		Status: batchv1.JobStatus{Active: 4},
	}
}

// encodeWatch writes events as the API server writes a protobuf watch:
// each object in its envelope, inside a length-prefixed WatchEvent.
func encodeWatch(t testing.TB, events []watch.Event) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	var out bytes.Buffer
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&out), info.StreamSerializer.Serializer)
	for _, ev := range events {
		var obj bytes.Buffer
		gv := batchv1.SchemeGroupVersion
		if _, isStatus := ev.Object.(*metav1.Status); isStatus {
			gv = metav1.SchemeGroupVersion
		}
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, gv).Encode(ev.Object.DeepCopyObject(), &obj); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: obj.Bytes()}}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// clientGoWatch decodes stream as client-go's watch of a typed informer
// does (the reference JobWatch keeps to).
func clientGoWatch(stream []byte) watch.Interface {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	objects := serializer.WithoutConversionCodecFactory{CodecFactory: scheme.Codecs}.DecoderToVersion(info.Serializer, batchv1.SchemeGroupVersion)
	return watch.NewStreamWatcher(restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), objects),
		apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding"))
}

func jobFramesWatch(stream []byte) watch.Interface {
	return watch.NewStreamWatcher(&jobFrames{r: io.NopCloser(bytes.NewReader(stream))},
		apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding"))
}

func drain(w watch.Interface) []watch.Event {
	var out []watch.Event
	for ev := range w.ResultChan() {
		out = append(out, ev)
	}
	return out
}

// TestJobFramesLikeClientGo decodes one stream both ways: every event
// JobWatch's decoder gives is the one client-go's gives, less the Job's
// managedFields.
func TestJobFramesLikeClientGo(t *testing.T) {
	noFields := watchedJob("plain", "12")
	noFields.ManagedFields = nil
	bookmark := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "40", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	events := []watch.Event{
		{Type: watch.Added, Object: watchedJob("a", "10")},
		{Type: watch.Modified, Object: watchedJob("a", "11")},
		{Type: watch.Added, Object: noFields},
		{Type: watch.Deleted, Object: watchedJob("a", "13")},
		{Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (40)"}},
	}
	stream := encodeWatch(t, events)
	want := drain(clientGoWatch(stream))
	if len(want) != len(events) {
		t.Fatalf("client-go decoded %d events of %d", len(want), len(events))
	}
	for _, ev := range want {
		if job, ok := ev.Object.(*batchv1.Job); ok {
			if job.Name == "a" && len(job.ManagedFields) != 2 {
				t.Fatalf("client-go's Job %s has %d managedFields; the test needs them sent", job.Name, len(job.ManagedFields))
			}
			job.ManagedFields = nil
		}
	}
	got := drain(jobFramesWatch(stream))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobWatch's events differ from client-go's less managedFields (-client-go +JobWatch):\n%s", diff)
	}
	// The Status is what the reflector reads a watch error from.
	if err := apierrors.FromObject(got[len(got)-1].Object); !apierrors.IsResourceExpired(err) {
		t.Errorf("the ERROR event reads as %v, want an expired resource version", err)
	}
}

// TestWithoutManagedFields keeps every other field, in order, and returns
// a Job with none as it is, without copying it.
func TestWithoutManagedFields(t *testing.T) {
	job := watchedJob("a", "10")
	b, err := job.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	scratch, out := withoutManagedFields(make([]byte, 0, 8), b)
	var got batchv1.Job
	if err := got.Unmarshal(out); err != nil {
		t.Fatal(err)
	}
	job.ManagedFields = nil
	if diff := cmp.Diff(job, &got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if want, _ := job.Marshal(); !bytes.Equal(out, want) {
		t.Errorf("the bytes differ from the Job's own encoding without managedFields")
	}
	if &scratch[:1][0] != &out[:1][0] {
		t.Errorf("the Job was not written into the scratch buffer")
	}
	none, _ := job.Marshal()
	if _, same := withoutManagedFields(nil, none); &same[0] != &none[0] {
		t.Errorf("a Job without managedFields was copied")
	}
	for _, bad := range [][]byte{{0xff}, b[:len(b)/3], {0x0a, 0x05, 0x01}} {
		if _, same := withoutManagedFields(nil, bad); !bytes.Equal(same, bad) {
			t.Errorf("malformed bytes %x were changed", bad)
		}
	}
}

// TestJobFramesRefuse says what is wrong with a stream that is not a
// protobuf watch of objects, and stops at a stream cut short.
func TestJobFramesRefuse(t *testing.T) {
	good := encodeWatch(t, []watch.Event{{Type: watch.Added, Object: watchedJob("a", "10")}})
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	badType := encodeWatch(t, []watch.Event{{Type: "CHANGED", Object: watchedJob("a", "10")}})
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"cut in the prefix", string(good[:2]), "unexpected EOF"},
		{"cut in the frame", string(good[:len(good)-5]), "unexpected EOF"},
		{"JSON", `{"type":"ADDED","object":{}}`, "not a protobuf watch stream"},
		{"no envelope", string(frame([]byte("\x0a\x05ADDED\x12\x04\x0a\x02{}"))), "not in protobuf"},
		{"not a message", string(frame([]byte{0x0a, 0x7f})), "decoding a watch event's type"},
		{"unknown type", string(badType), `invalid watch event type: "CHANGED"`},
		{"not a Job", string(frame([]byte("\x0a\x05ADDED\x12\x0a\x0a\x08k8s\x00\x12\x02\x0a\xff"))), "decoding a watched Job"},
	} {
		d := &jobFrames{r: io.NopCloser(strings.NewReader(tc.stream))}
		_, _, err := d.Decode()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	d := &jobFrames{r: io.NopCloser(bytes.NewReader(good))}
	if _, _, err := d.Decode(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Decode(); err != io.EOF {
		t.Errorf("at the end of the stream: got %v, want io.EOF", err)
	}
}

// TestJobWatchAPIServer watches a real API server's Jobs (envtest): the
// events name the Jobs written, at the versions written, without
// managedFields the API server keeps; its errors keep their kind. With
// the events stored as the informer stores them, a label's change takes
// the stored spec, and a change of the spec does not.
func TestJobWatchAPIServer(t *testing.T) {
	cfg := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	jw, err := NewJobWatch(cfg, httpClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	jw.KnownFrom(store)
	var list batchv1.JobList
	if err := cl.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	w, err := jw.Open(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	job := watchedJob("a", "")
	job.ManagedFields, job.Status, job.UID, job.CreationTimestamp, job.Generation = nil, batchv1.JobStatus{}, "", metav1.Time{}, 0
	patch := func(p string) func() error {
		return func() error { return cl.Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(p))) }
	}
	// Each write waits for the event of the one before it to be stored,
	// as the informer would have stored it: the watch decodes an event as
	// soon as it arrives.
	steps := []struct {
		write       func() error
		typ         watch.EventType
		parallelism int32
		knownSpec   bool // the spec is the stored one: its container has no image
	}{
		{func() error { return cl.Create(ctx, job) }, watch.Added, 4, false},
		{patch(`{"metadata":{"labels":{"tally.dev/state":"finished"}}}`), watch.Modified, 4, true},
		{patch(`{"spec":{"parallelism":2}}`), watch.Modified, 2, false},
		{func() error { return cl.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)) }, watch.Deleted, 2, true},
	}
	for i, step := range steps {
		if err := step.write(); err != nil {
			t.Fatal(err)
		}
		if i == 0 && len(job.ManagedFields) == 0 {
			t.Fatal("the API server kept no managedFields; the test needs some")
		}
		version := job.ResourceVersion // the delete leaves the last one
		var got *batchv1.Job
		for got == nil {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch closed")
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				j, isJob := ev.Object.(*batchv1.Job)
				if ev.Type != step.typ || !isJob || j.Name != "a" || j.Namespace != "team-a" {
					t.Fatalf("event %d: %s %T %v, want %s of Job team-a/a", i, ev.Type, ev.Object, ev.Object, step.typ)
				}
				got = j
			case <-ctx.Done():
				t.Fatalf("waited for event %d (%s)", i, step.typ)
			}
		}
		if got.ManagedFields != nil {
			t.Errorf("event %d: the Job kept its managedFields", i)
		}
		if step.typ != watch.Deleted && got.ResourceVersion != version {
			t.Errorf("event %d: resourceVersion %s, want %s", i, got.ResourceVersion, version)
		}
		c := got.Spec.Template.Spec.Containers[0]
		if c.Resources.Requests.Cpu().MilliValue() != 500 || *got.Spec.Parallelism != step.parallelism {
			t.Errorf("event %d: parallelism %d and requests %v, want %d and 500m CPU", i, *got.Spec.Parallelism, c.Resources.Requests, step.parallelism)
		}
		if known := c.Image == ""; known != step.knownSpec {
			t.Errorf("event %d (generation %d): the stored spec taken: %t, want %t", i, got.Generation, known, step.knownSpec)
		}
		stripped, _ := kinds.StripJob(got)
		if err := store.Update(stripped); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jw.Open(ctx, metav1.ListOptions{FieldSelector: "spec.no.such.field=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a watch the API server refuses: got %v, want a BadRequest error", err)
	}
}

// TestJobFramesKnownSpecs decodes events of Jobs the store holds: the
// spec is the stored one exactly when the UID and generation are the
// stored ones, the name and UID strings exactly when the UID is, and
// the informer stores what it would store from client-go's watch either
// way.
func TestJobFramesKnownSpecs(t *testing.T) {
	job := func(uid string, generation int64, rv string, mutate func(*batchv1.Job)) *batchv1.Job {
		j := watchedJob("a", rv)
		j.UID, j.Generation = types.UID(uid), generation
		if mutate != nil {
			mutate(j)
		}
		return j
	}
	finished := func(j *batchv1.Job) {
		j.Labels["tally.dev/state"] = "finished"
		j.Status = batchv1.JobStatus{Succeeded: 4, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Message: "done"}}}
	}
	two := func(j *batchv1.Job) { j.Spec.Parallelism = new(int32(2)) }
	events := []struct {
		job   *batchv1.Job
		known bool
	}{
		{job("u1", 1, "10", nil), false},                                          // not stored yet
		{job("u1", 1, "11", finished), true},                                      // its status and labels changed
		{job("u1", 2, "12", func(j *batchv1.Job) { finished(j); two(j) }), false}, // its spec changed
		{job("u1", 2, "13", func(j *batchv1.Job) { finished(j); two(j); j.Labels["x"] = "y" }), true},
		// The store holds an ended Job's spec without its template, which
		// is not the spec of a view in which it has not ended.
		{job("u1", 2, "14", func(j *batchv1.Job) { two(j); j.Status.Active = 1 }), false},
		{job("u1", 2, "15", func(j *batchv1.Job) { two(j); j.Status.Active = 2 }), true},
		{job("u2", 2, "16", two), false}, // another Job of that name
		{job("u2", 0, "17", two), false}, // no generation to go by
	}
	var stream []watch.Event
	for _, ev := range events {
		stream = append(stream, watch.Event{Type: watch.Modified, Object: ev.job})
	}
	b := encodeWatch(t, stream)
	want := drain(clientGoWatch(b))
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	jw := &JobWatch{}
	jw.KnownFrom(store)
	d := &jobFrames{r: io.NopCloser(bytes.NewReader(b)), known: jw.known}
	for i, ev := range events {
		_, obj, err := d.Decode()
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*batchv1.Job)
		var stored *batchv1.Job
		if item, ok, _ := store.Get(got); ok {
			stored = item.(*batchv1.Job)
		}
		if known := stored != nil && got.Spec.Parallelism == stored.Spec.Parallelism; known != ev.known {
			t.Errorf("event %d (%s, generation %d): took the stored spec: %t, want %t", i, got.UID, got.Generation, known, ev.known)
		}
		reused := stored != nil && unsafe.StringData(string(got.UID)) == unsafe.StringData(string(stored.UID)) &&
			unsafe.StringData(got.Name) == unsafe.StringData(stored.Name)
		if same := stored != nil && stored.UID == got.UID; reused != same {
			t.Errorf("event %d (%s): took the stored name and UID: %t, want %t", i, got.UID, reused, same)
		}
		gotStripped, _ := kinds.StripJob(got)
		wantStripped, _ := kinds.StripJob(want[i].Object.(*batchv1.Job))
		if diff := cmp.Diff(wantStripped, gotStripped); diff != "" {
			t.Errorf("event %d: the informer stores another Job than from client-go's watch (-client-go +JobWatch):\n%s", i, diff)
		}
		if err := store.Update(gotStripped); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkJobWatchDecode decodes a stream of Job events as client-go's
// watch does and as JobWatch's does, with the Job not stored and stored
// at the events' generation; each op is one event.
func BenchmarkJobWatchDecode(b *testing.B) {
	events := make([]watch.Event, 1000)
	for i := range events {
		events[i] = watch.Event{Type: watch.Modified, Object: watchedJob("a", "10")}
	}
	stream := encodeWatch(b, events)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	stored, _ := kinds.StripJob(watchedJob("a", "9"))
	if err := store.Add(stored); err != nil {
		b.Fatal(err)
	}
	jw := &JobWatch{}
	jw.KnownFrom(store)
	withStore := func(stream []byte) watch.Interface {
		return watch.NewStreamWatcher(&jobFrames{r: io.NopCloser(bytes.NewReader(stream)), known: jw.known},
			apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding"))
	}
	for _, bc := range []struct {
		name string
		open func([]byte) watch.Interface
	}{{"client-go", clientGoWatch}, {"JobWatch", jobFramesWatch}, {"JobWatch/spec-stored", withStore}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for n := 0; n < b.N; {
				w := bc.open(stream)
				for ev := range w.ResultChan() {
					if bc.name == "JobWatch/spec-stored" && ev.Object.(*batchv1.Job).Spec.Template.Spec.Containers[0].Image != "" {
						b.Fatal("the stored spec was not taken")
					}
					if n++; n == b.N {
						w.Stop()
						break
					}
				}
			}
		})
	}
}
