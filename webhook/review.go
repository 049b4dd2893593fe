package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// Reading requests in one pass.
//
// The API machinery's decoder reads a JSON document twice: once to learn
// its apiVersion and kind, and once to decode it into the type they name.
// controller-runtime's admission webhook decodes each AdmissionReview that
// way, and then each handler decodes the object inside it that way again.
// The API server sends a v1 AdmissionReview (Configurations asks for no
// other) holding a typed object, and knows both kinds in advance, so
// review and decodeObject read them in one pass each, into the type the
// request names. Anything else (another version, a partial or foreign
// kind, a body that does not decode, or an unstructured object) goes to
// controller-runtime's decoder, so a malformed request gets the answer
// controller-runtime's webhook gives it.
//
// A handler that names the Go type of its requests' objects (objectMaker)
// gets the object decoded with the request, in the same pass, rather
// than its bytes to decode again: when the request names its kind before
// its object, as the API server writes it, and no text of the body is a
// hostile quantity (see checkQuantities), which the decoder must not be
// handed. Any other request goes the way above.

// Review serves wh's handler, reading the requests that the API server
// sends in one pass (see above) and giving every other request to
// wh.ServeHTTP. Either way the handler's answer goes through wh.Handle,
// which recovers its panics and completes the response.
func Review(wh *admission.Webhook) http.Handler {
	maker, _ := wh.Handler.(objectMaker)
	return review{wh, maker}
}

type review struct {
	wh    *admission.Webhook
	maker objectMaker
}

// objectMaker is a handler that takes the object of its requests decoded
// with them: it makes the new typed object that decodes one of kind gvk,
// or returns nil for a kind whose object it decodes itself. Such a
// request's Object has the decoded object and no bytes.
type objectMaker interface {
	newObject(gvk schema.GroupVersionKind) runtime.Object
}

// v1Review is a v1 AdmissionReview as the API server sends it.
var v1Review = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

func (rv review) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Type") != "application/json" {
		rv.wh.ServeHTTP(w, r)
		return
	}
	buf := bodies.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledBody {
			bodies.Put(buf)
		}
	}()
	body, err := readBody(r, (*buf)[:0])
	*buf = body[:0]
	if err != nil || len(body) >= MaxRequestBytes {
		// The webhook answers a body it cannot read whole, or one at its
		// own cap, with its own errors: it reads the same bytes again.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		rv.wh.ServeHTTP(w, r)
		return
	}
	if rv.maker != nil && !scan(body) {
		if req, ok := rv.typed(body); ok {
			rv.answer(w, r, req)
			return
		}
	}
	req := admission.Request{}
	in := struct {
		APIVersion string                        `json:"apiVersion"`
		Kind       string                        `json:"kind"`
		Request    *admissionv1.AdmissionRequest `json:"request"`
	}{Request: &req.AdmissionRequest}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in) != nil ||
		in.APIVersion != v1Review.GroupVersion().String() || in.Kind != v1Review.Kind || in.Request == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		rv.wh.ServeHTTP(w, r)
		return
	}
	rv.answer(w, r, req)
}

// answer writes wh's answer to req.
func (rv review) answer(w http.ResponseWriter, r *http.Request, req admission.Request) {
	resp := rv.wh.Handle(r.Context(), req)
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	out.SetGroupVersionKind(v1Review)
	w.Header().Set("Content-Type", "application/json")
	// An answer that cannot be written has lost its connection; there is
	// no one left to tell.
	_ = json.NewEncoder(w).Encode(out)
}

// typedRequest is an AdmissionRequest whose object is decoded, as it is
// read, into the object rv.maker makes for the kind read before it.
type typedRequest struct {
	admissionv1.AdmissionRequest
	Kind   kindFirst `json:"kind"`
	Object any       `json:"object"`
}

// kindFirst reads a request's kind and, the first time, sets its
// request's Object to the object to decode its object into.
type kindFirst struct {
	gvk   metav1.GroupVersionKind
	req   *typedRequest
	maker objectMaker
	obj   runtime.Object
	seen  int
}

func (k *kindFirst) UnmarshalJSON(b []byte) error {
	k.seen++
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(b, &k.gvk); err != nil {
		return err
	}
	if k.seen == 1 && k.req.Object == nil {
		if k.obj = k.maker.newObject(schema.GroupVersionKind(k.gvk)); k.obj != nil {
			k.req.Object = k.obj
		}
	}
	return nil
}

// typed reads body, a v1 AdmissionReview, with its object decoded into
// the object rv.maker makes for its kind. It says false when the body is
// anything else, or not so read: its kind once, before its object, and
// an object that names that kind or none.
func (rv review) typed(body []byte) (admission.Request, bool) {
	tr := &typedRequest{}
	tr.Kind = kindFirst{req: tr, maker: rv.maker}
	in := struct {
		APIVersion string        `json:"apiVersion"`
		Kind       string        `json:"kind"`
		Request    *typedRequest `json:"request"`
	}{Request: tr}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in) != nil ||
		in.APIVersion != v1Review.GroupVersion().String() || in.Kind != v1Review.Kind || in.Request != tr {
		return admission.Request{}, false
	}
	k := &tr.Kind
	gvk := schema.GroupVersionKind(k.gvk)
	// A zero object was not in the body (or was {}): controller-runtime's
	// decoder says which.
	if k.seen != 1 || k.obj == nil || tr.Object != any(k.obj) || reflect.ValueOf(k.obj).Elem().IsZero() {
		return admission.Request{}, false
	}
	if got := k.obj.GetObjectKind().GroupVersionKind(); got != gvk && !got.Empty() {
		return admission.Request{}, false
	}
	req := admission.Request{AdmissionRequest: tr.AdmissionRequest}
	req.Kind = k.gvk
	req.Object = runtime.RawExtension{Object: k.obj}
	return req, true
}

// bodies holds the buffers requests' bodies are read into, none larger
// than maxPooledBody: nothing decoded from a body keeps its bytes.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 64 << 10

// readBody reads a request's body as io.ReadAll does, but into b, grown
// at most once to the length the request declares, as the API server's
// do. On an error it returns what it read before it.
func readBody(r *http.Request, b []byte) ([]byte, error) {
	defer func() { _ = r.Body.Close() }()
	size := 512
	if n := r.ContentLength; n > 0 && n < MaxRequestBytes {
		size = int(n) + 1 // room to see the end of the body
	}
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	for {
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// errReader returns err once the bytes before it are read, or io.EOF.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// decodeObject decodes raw into obj, a new typed object of kind gvk, in
// one pass when raw names gvk or no kind at all; otherwise, or for an
// unstructured object, d decodes it. Either way obj ends as the decoder
// leaves it, with the apiVersion and kind that raw gives.
func decodeObject(d admission.Decoder, raw runtime.RawExtension, obj runtime.Object, gvk schema.GroupVersionKind) error {
	if _, unstructured := obj.(runtime.Unstructured); !unstructured && len(raw.Raw) > 0 {
		if sigsjson.UnmarshalCaseSensitivePreserveInts(raw.Raw, obj) == nil {
			if got := obj.GetObjectKind().GroupVersionKind(); got == gvk || got.Empty() {
				return nil
			}
		}
		// Start over from an empty object, as the decoder expects.
		v := reflect.ValueOf(obj).Elem()
		v.SetZero()
	}
	return d.DecodeRaw(raw, obj)
}
