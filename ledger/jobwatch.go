package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// WatchFunc opens a watch: a ListWatch's WatchFuncWithContext.
type WatchFunc = toolscache.WatchFuncWithContext

// JobWatch is a watch of every namespace's batch/v1 Jobs, over httpClient
// and cfg's server and credentials, that reads the protobuf stream itself.
// client-go's watch copies each event's object twice before it decodes it
// (the watch event's RawExtension, then the envelope's runtime.Unknown),
// and decodes its managedFields, which the informer then drops. Here each
// frame is read into one buffer kept between events, the Job's
// managedFields are cut out of its bytes, and the rest is decoded once.
// What the informer gets is what client-go's watch would give it, less
// the managedFields and the object's (empty, as client-go leaves it)
// TypeMeta; an ERROR event carries its metav1.Status.
//
// The watch opens with the informer's options as they are: the Jobs'
// informer has no selector and no namespace (CacheOptions), so none is
// added. Like client-go's watches, its opening is not throttled by the
// client's rate limiter.
func JobWatch(cfg *rest.Config, httpClient *http.Client) (WatchFunc, error) {
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
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.Watch = true
		body, err := rc.Get().Resource("jobs").VersionedParams(&opts, metav1.ParameterCodec).
			SetHeader("Accept", jobWatchMediaType).Stream(ctx)
		if err != nil {
			return nil, err
		}
		return watch.NewStreamWatcher(&jobFrames{r: body},
			apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
	}, nil
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
	job := &batchv1.Job{}
	d.meta, body = withoutManagedFields(d.meta[:0], body)
	if err := job.Unmarshal(body); err != nil {
		return "", nil, fmt.Errorf("decoding a watched Job: %w", err)
	}
	return typ, job, nil
}

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
