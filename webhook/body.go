package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

func limit(h http.Handler, maxBytes int64, timeout time.Duration) http.Handler {
	tooLarge := fmt.Errorf("tally: the request body is larger than the %d-byte limit", maxBytes)
	bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBytes {
			writeReview(w, admission.Errored(http.StatusRequestEntityTooLarge, tooLarge))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &boundedBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBytes), tooLarge: tooLarge}
		}
		h.ServeHTTP(w, r)
	})
	return http.TimeoutHandler(bounded, timeout, fmt.Sprintf("tally: the webhook did not answer within %s", timeout))
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
