package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"tally.dev/tally/kinds"
)

// WatchFunc opens a watch: a ListWatch's WatchFuncWithContext.
type WatchFunc = toolscache.WatchFuncWithContext

// JobWatch opens watches of every namespace's batch/v1 Jobs, over
// httpClient and cfg's server and credentials, that read the protobuf
// stream themselves. client-go's watch copies each event's object twice
// before it decodes it (the watch event's RawExtension, then the
// envelope's runtime.Unknown), and decodes its managedFields, which the
// informer then drops. Here each frame is read into one buffer kept
// between events, the Job's managedFields are cut out of its bytes, and
// the rest is decoded once. What the informer gets is what client-go's
// watch would give it, less the managedFields and the object's (empty, as
// client-go leaves it) TypeMeta; an ERROR event carries its
// metav1.Status.
//
// Once told the informer's store (KnownFrom), a Job's event whose Job the
// store holds at the same UID and generation takes the stored Job's spec
// and leaves its own spec's bytes undecoded: the API server raises a
// Job's generation with every change of its spec, and no client sets it,
// so the two specs are the same. Most of a Job's events change its status
// or labels only, and its spec is most of what decoding it costs. The
// store holds specs through the informer's transform (kinds.StripJob),
// which makes of a spec what it made of it before, and writes to none it
// shares: what the informer stores is what decoding the spec would give.
//
// The watches open with the informer's options and the label selector
// the cache gives the Jobs' informer (CacheOptions' JobSelector), which
// they are opened in place of; the Jobs' informer has no namespace. Like
// client-go's watches, their opening is not throttled by the client's
// rate limiter.
type JobWatch struct {
	open  WatchFunc
	store atomic.Pointer[toolscache.KeyGetter]
}

// NewJobWatch returns a JobWatch over cfg's server and credentials and
// httpClient, whose watches select the Jobs selector selects (all if nil).
func NewJobWatch(cfg *rest.Config, httpClient *http.Client, selector labels.Selector) (*JobWatch, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &batchv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = jobWatchMediaType
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion() // for the API server's errors
	c.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("the Jobs' watch client: %w", err)
	}
	jw := &JobWatch{}
	jw.open = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.Watch = true
		if selector != nil {
			opts.LabelSelector = selector.String()
		}
		body, err := rc.Get().Resource("jobs").VersionedParams(&opts, metav1.ParameterCodec).
			SetHeader("Accept", jobWatchMediaType).Stream(ctx)
		if err != nil {
			return nil, err
		}
		return watch.NewStreamWatcher(&jobFrames{r: body, known: jw.known},
			apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
	}
	return jw, nil
}

// Open opens one watch: the Jobs' ListWatch's WatchFuncWithContext.
func (jw *JobWatch) Open(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return jw.open(ctx, opts)
}

// KnownFrom has the watches take the specs of unchanged generations from
// store, the informer's, whose keys are namespace/name.
func (jw *JobWatch) KnownFrom(store toolscache.KeyGetter) { jw.store.Store(&store) }

// known is the Job namespace/name in the store, or nil.
func (jw *JobWatch) known(namespace, name string) *batchv1.Job {
	store := jw.store.Load()
	if store == nil {
		return nil
	}
	obj, ok, err := (*store).GetByKey(namespace + "/" + name)
	if !ok || err != nil {
		return nil
	}
	job, _ := obj.(*batchv1.Job)
	return job
}

// jobWatchMediaType is the only answer JobWatch accepts: a stream of
// length-prefixed protobuf watch events.
const jobWatchMediaType = runtime.ContentTypeProtobuf + ";stream=watch"

// maxJobFrame bounds one event's frame: the API server refuses objects
// over about 1.5 MiB, so a larger length is not a Job's event but a
// stream in another encoding.
const maxJobFrame = 16 << 20

// jobFrames decodes one watch stream of Jobs (watch.Decoder).
type jobFrames struct {
	r    io.ReadCloser
	buf  []byte // the frame being decoded; kept for the next
	meta []byte // the Job's bytes without its managedFields; kept for the next
	// known finds a stored Job (JobWatch.known); nil if none are.
	known func(namespace, name string) *batchv1.Job
}

func (d *jobFrames) Close() { d.r.Close() }

func (d *jobFrames) Decode() (watch.EventType, runtime.Object, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(d.r, prefix[:]); err != nil {
		return "", nil, err // io.EOF: the API server ended the watch
	}
	size := binary.BigEndian.Uint32(prefix[:])
	if size > maxJobFrame {
		return "", nil, fmt.Errorf("watch frame of %d bytes, more than %d: not a protobuf watch stream", size, maxJobFrame)
	}
	if cap(d.buf) < int(size) {
		d.buf = make([]byte, size)
	}
	frame := d.buf[:size]
	if _, err := io.ReadFull(d.r, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, err
	}
	typ, body, err := splitWatchEvent(frame)
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %q", typ)
	}
	if typ == watch.Error {
		status := &metav1.Status{}
		if err := status.Unmarshal(body); err != nil {
			return "", nil, fmt.Errorf("decoding a watch error's status: %w", err)
		}
		return typ, status, nil
	}
	d.meta, body = withoutManagedFields(d.meta[:0], body)
	job := &batchv1.Job{}
	if !d.decodeParts(job, body) {
		*job = batchv1.Job{}
		if err := job.Unmarshal(body); err != nil {
			return "", nil, fmt.Errorf("decoding a watched Job: %w", err)
		}
	}
	return typ, job, nil
}

// decodeParts decodes b, a Job's bytes, into job as job.Unmarshal does,
// part by part, with the spec of the known Job of its UID and generation
// if there is one (see JobWatch), and says whether it did. It does not
// when b is not the metadata, spec and status, in that order, once each,
// as the API server writes a Job, or when a part does not decode.
func (d *jobFrames) decodeParts(job *batchv1.Job, b []byte) bool {
	if d.known == nil {
		return false
	}
	var parts [3][]byte
	n := 0
	if eachField(b, func(num protowire.Number, v, _ []byte) error {
		if n == len(parts) || int(num) != n+1 || v == nil {
			return errNotParts
		}
		parts[n] = v
		n++
		return nil
	}) != nil || n != len(parts) {
		return false
	}
	if job.ObjectMeta.Unmarshal(parts[0]) != nil || job.Status.Unmarshal(parts[2]) != nil {
		return false
	}
	known := d.known(job.Namespace, job.Name)
	if known == nil || known.UID != job.UID {
		return job.Spec.Unmarshal(parts[1]) == nil
	}
	// The same Job: its name and UID are the stored strings, which its
	// workload holds too, not copies of them.
	job.Name, job.UID = known.Name, known.UID
	if job.Generation != 0 && known.Generation == job.Generation && (kinds.Ended(job) || !kinds.Ended(known)) {
		job.Spec = known.Spec
		return true
	}
	return job.Spec.Unmarshal(parts[1]) == nil
}

// errNotParts stops decodeParts at a field it does not take apart.
var errNotParts = errors.New("not a Job's three parts")

// splitWatchEvent reads a metav1.WatchEvent's type (field 1) and its
// object's bytes (field 2, a RawExtension whose field 1 holds them), and
// the object's own bytes inside its runtime.Unknown envelope (field 2),
// without copying any of them.
func splitWatchEvent(b []byte) (watch.EventType, []byte, error) {
	typ, err := bytesField(b, 1)
	if err != nil {
		return "", nil, fmt.Errorf("decoding a watch event's type: %w", err)
	}
	obj, err := bytesField(b, 2)
	if err == nil {
		obj, err = bytesField(obj, 1)
	}
	if err != nil {
		return "", nil, fmt.Errorf("decoding a watch event's object: %w", err)
	}
	obj, ok := bytes.CutPrefix(obj, protobufMagic)
	if !ok {
		return "", nil, errors.New("a watched object is not in protobuf: no envelope")
	}
	if obj, err = bytesField(obj, 2); err != nil {
		return "", nil, fmt.Errorf("decoding a watched object's envelope: %w", err)
	}
	return watch.EventType(typ), obj, nil
}

// managedFieldsField is ObjectMeta's field number of managedFields.
const managedFieldsField = 17

// withoutManagedFields returns job's bytes (a batch/v1 Job in protobuf)
// with its metadata's managedFields left out, written after scratch's
// length when any are there, and scratch for the next call. It returns
// job as it is if it holds none or does not parse: Unmarshal then says
// what is wrong with it.
func withoutManagedFields(scratch, job []byte) ([]byte, []byte) {
	var meta []byte
	start, end, off := 0, 0, 0
	if eachField(job, func(num protowire.Number, v, field []byte) error {
		if num == 1 && meta == nil {
			meta, start, end = v, off, off+len(field)
		}
		off += len(field)
		return nil
	}) != nil || meta == nil {
		return scratch, job
	}
	kept, found := 0, false
	if eachField(meta, func(num protowire.Number, _, field []byte) error {
		if num == managedFieldsField {
			found = true
		} else {
			kept += len(field)
		}
		return nil
	}) != nil || !found {
		return scratch, job
	}
	out := append(scratch, job[:start]...)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(kept))
	_ = eachField(meta, func(num protowire.Number, _, field []byte) error {
		if num != managedFieldsField {
			out = append(out, field...)
		}
		return nil
	})
	out = append(out, job[end:]...)
	return out, out[len(scratch):]
}

// eachField calls f with each field of the message b: its number, its
// value if it is of the bytes wire type (nil if not), and the whole field,
// tag included, all slices of b.
func eachField(b []byte, f func(num protowire.Number, v, field []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		var v []byte
		var m int
		if typ == protowire.BytesType {
			v, m = protowire.ConsumeBytes(b[n:])
		} else {
			m = protowire.ConsumeFieldValue(num, typ, b[n:])
		}
		if m < 0 {
			return protowire.ParseError(m)
		}
		if err := f(num, v, b[:n+m]); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}
