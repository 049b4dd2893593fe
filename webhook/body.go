package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Bounds on each webhook request.
const (
	// MaxRequestBytes bounds a request's body. An AdmissionReview carries
	// the object and, on an update, the old object; the API server stores
	// none larger than about 1.5 MiB, and the Job guard decodes objects of
	// up to maxGuardedObject (3 MiB) each, so 7 MiB holds two with their
	// envelope. It equals controller-runtime's own cap; a body declared
	// larger is refused here before it is read.
	MaxRequestBytes = 7 << 20
	// RequestTimeout bounds the time to answer a request. The API server
	// waits each webhook's timeoutSeconds (5 s in Configurations) and no
	// more, so a later answer is of no use to anyone. The handler's
	// context is cancelled then, but a handler that ignores it runs on:
	// the checks above are what keeps decoding short.
	RequestTimeout = 5 * time.Second
)

// Limit bounds each request h serves to MaxRequestBytes of body and
// RequestTimeout of time. A body declared larger is refused with a 413
// AdmissionReview before it is read, and one that turns out larger fails
// to read, which the admission webhook answers with a 400 that says so; a
// request not answered in time gets a 503.
func Limit(h http.Handler) http.Handler { return limit(h, MaxRequestBytes, RequestTimeout) }

// limit does what http.TimeoutHandler does, on goroutines kept between
// requests (see workers): the handler runs on one, with a context that
// ends at the timeout, and writes into an answer held until it returns;
// one that has not returned by then is answered 503 and runs on, into an
// answer no one reads.
func limit(h http.Handler, maxBytes int64, timeout time.Duration) http.Handler {
	tooLarge := fmt.Errorf("tally: the request body is larger than the %d-byte limit", maxBytes)
	late := fmt.Sprintf("tally: the webhook did not answer within %s", timeout)
	run := newWorkers(maxIdleWorkers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBytes {
			writeReview(w, admission.Errored(http.StatusRequestEntityTooLarge, tooLarge))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		out := heldAnswers.Get().(*heldAnswer)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &boundedBody{ReadCloser: http.MaxBytesReader(out, r.Body, maxBytes), tooLarge: tooLarge}
		}
		if err := run.within(ctx, func() { h.ServeHTTP(out, r) }); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			if errors.Is(err, context.DeadlineExceeded) {
				_, _ = io.WriteString(w, late)
			}
			return
		}
		out.send(w)
		if out.body.Cap() <= maxPooledBody {
			out.reset()
			heldAnswers.Put(out)
		}
	})
}

// maxIdleWorkers is how many goroutines each path keeps for its next
// requests (see workers).
const maxIdleWorkers = 16

// heldAnswer is a handler's response, held until the handler returns.
type heldAnswer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

var heldAnswers = sync.Pool{New: func() any { return &heldAnswer{header: http.Header{}} }}

func (a *heldAnswer) Header() http.Header { return a.header }

func (a *heldAnswer) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if a.code == 0 {
		a.code = code
	}
}

func (a *heldAnswer) Write(b []byte) (int, error) {
	if a.code == 0 {
		a.code = http.StatusOK
	}
	return a.body.Write(b)
}

// send writes the answer to w, as the handler wrote it.
func (a *heldAnswer) send(w http.ResponseWriter) {
	maps.Copy(w.Header(), a.header)
	if a.code == 0 {
		a.code = http.StatusOK
	}
	w.WriteHeader(a.code)
	_, _ = w.Write(a.body.Bytes())
}

func (a *heldAnswer) reset() {
	clear(a.header)
	a.code = 0
	a.body.Reset()
}

// boundedBody is a body cut off by http.MaxBytesReader, whose error says
// what the limit is.
type boundedBody struct {
	io.ReadCloser
	tooLarge error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		err = b.tooLarge
	}
	return n, err
}

// writeReview answers with an AdmissionReview, as the admission webhook
// answers requests it refuses before reading them.
func writeReview(w http.ResponseWriter, resp admission.Response) {
	review := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	review.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}
