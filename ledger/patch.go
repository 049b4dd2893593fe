package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// versionPatches is the ledger's write client: its patches of a
// workload's metadata (a metav1.PartialObjectMetadata, as kinds.Ref makes
// for every admission, eviction and label write) are sent as plain HTTP
// requests, and read back from the API server's answer only the
// resourceVersion, the one field the ledger uses. The admission storm is
// tens of thousands of such writes, and client-go's request machinery
// (its URL building, metrics templates and body decoding) cost more than
// sending them. What client-go does for a patch is kept: the rate
// limiter (the write budget) is waited on before each attempt, an answer
// of 429 or 5xx with a Retry-After is tried again after it (up to
// maxPatchRetries times), an error answer becomes the same StatusError,
// and rest_client_requests_total counts each answer. Every other call is
// the embedded client's.
type versionPatches struct {
	client.Client
	http    *http.Client
	base    string // the API server's URL, without a trailing slash
	host    string // for rest_client_requests_total
	limiter flowcontrol.RateLimiter
	mapper  meta.RESTMapper
	warn    rest.WarningHandlerWithContext
	// agent is the config's User-Agent, sent as its transport would send
	// it: a request that has one already is not copied to add it.
	agent string
}

// maxPatchRetries is client-go's default number of retries of a request
// answered with a Retry-After.
const maxPatchRetries = 10

// metadataAccept asks for the answer as PartialObjectMetadata, in
// protobuf where the server can, as client-go's metadata client does.
const metadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// newVersionPatches wraps cl, whose config cfg (its rate limiter, or its
// QPS and burst, as client-go reads them) and HTTP client h the patches
// share.
func newVersionPatches(cl client.Client, cfg *rest.Config, h *http.Client, mapper meta.RESTMapper) (client.Client, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	// The rate limiter as client-go reads cfg.
	limiter := cfg.RateLimiter
	if limiter == nil {
		qps, burst := cfg.QPS, cfg.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		limiter = flowcontrol.NewFakeAlwaysRateLimiter()
		if qps > 0 {
			limiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		}
	}
	// cfg's warning handler, or client-go's default: it logs them.
	var warn rest.WarningHandlerWithContext = rest.WarningLogger{}
	if cfg.WarningHandlerWithContext != nil {
		warn = cfg.WarningHandlerWithContext
	} else if cfg.WarningHandler != nil {
		warn = warningHandler{cfg.WarningHandler}
	}
	return versionPatches{Client: cl, http: h, base: strings.TrimSuffix(base.String(), "/"), host: base.Host,
		limiter: limiter, mapper: mapper, warn: warn, agent: cfg.UserAgent}, nil
}

// warningHandler is a rest.WarningHandler as a WarningHandlerWithContext.
type warningHandler struct{ rest.WarningHandler }

func (w warningHandler) HandleWarningHeaderWithContext(_ context.Context, code int, agent, text string) {
	w.HandleWarningHeader(code, agent, text)
}

// Patch sends patch. For a PartialObjectMetadata it sets only obj's
// resourceVersion from the answer, and leaves it empty when the answer
// has none it can read (the write was made all the same).
func (p versionPatches) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return p.Client.Patch(ctx, obj, patch, opts...)
	}
	gvk := m.GroupVersionKind()
	mapping, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	target := p.base + pathOf(mapping.Resource, m.Namespace, m.Name) + patchQuery((&client.PatchOptions{}).ApplyOptions(opts).AsPatchOptions())
	for retries := 0; ; retries++ {
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		rv, wait, retry, err := p.send(ctx, target, patch.Type(), data, mapping.Resource.GroupResource(), m.Name)
		if retry && retries < maxPatchRetries {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			return err
		}
		m.SetResourceVersion(rv)
		return nil
	}
}

// patchBodies keeps the buffers answers are read into.
var patchBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// send makes one attempt at a patch. It returns the answer's
// resourceVersion, or its error, and whether and after how long its
// Retry-After asks for another attempt.
func (p versionPatches) send(ctx context.Context, target string, pt types.PatchType, data []byte, gr schema.GroupResource, name string) (rv string, wait time.Duration, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, target, bytes.NewReader(data))
	if err != nil {
		return "", 0, false, err
	}
	req.Header.Set("Content-Type", string(pt))
	req.Header.Set("Accept", metadataAccept)
	if p.agent != "" {
		req.Header.Set("User-Agent", p.agent)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		clientmetrics.RequestResult.Increment(ctx, "<error>", http.MethodPatch, p.host)
		return "", 0, false, err
	}
	defer resp.Body.Close()
	clientmetrics.RequestResult.Increment(ctx, strconv.Itoa(resp.StatusCode), http.MethodPatch, p.host)
	if warnings, _ := utilnet.ParseWarningHeaders(resp.Header["Warning"]); len(warnings) > 0 {
		for _, w := range warnings {
			p.warn.HandleWarningHeaderWithContext(ctx, w.Code, w.Agent, w.Text)
		}
	}
	buf := patchBodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			patchBodies.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return "", 0, false, err
	}
	contentType := resp.Header.Get("Content-Type")
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		rv, _ = resourceVersionOf(buf.Bytes(), contentType)
		return rv, 0, false, nil
	}
	retryAfter := 0
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		var parseErr error
		retryAfter, parseErr = strconv.Atoi(resp.Header.Get("Retry-After"))
		retry = parseErr == nil && retryAfter >= 0
	}
	return "", time.Duration(retryAfter) * time.Second, retry, statusError(buf.Bytes(), resp.StatusCode, gr, name, retryAfter)
}

// statusError is the error of an answer with code: the metav1.Status its
// body holds, or, as client-go makes it, one of the code alone.
func statusError(body []byte, code int, gr schema.GroupResource, name string, retryAfter int) error {
	if obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), body); err == nil {
		if status, ok := obj.(*metav1.Status); ok && status.Status != metav1.StatusSuccess {
			return &apierrors.StatusError{ErrStatus: *status}
		}
	}
	return apierrors.NewGenericServerResponse(code, http.MethodPatch, gr, name, strings.TrimSpace(string(body)), retryAfter, true)
}

// patchQuery is the query of a patch with opts, as client-go encodes it.
func patchQuery(opts *metav1.PatchOptions) string {
	q := url.Values{}
	for _, d := range opts.DryRun {
		q.Add("dryRun", d)
	}
	if opts.Force != nil {
		q.Set("force", strconv.FormatBool(*opts.Force))
	}
	if opts.FieldManager != "" {
		q.Set("fieldManager", opts.FieldManager)
	}
	if opts.FieldValidation != "" {
		q.Set("fieldValidation", opts.FieldValidation)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// pathOf is the path of object name of resource r in namespace ns ("" for
// a cluster-scoped one), from the API server's root.
func pathOf(r schema.GroupVersionResource, ns, name string) string {
	var b strings.Builder
	if r.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(url.PathEscape(r.Group))
		b.WriteByte('/')
	}
	b.WriteString(url.PathEscape(r.Version))
	if ns != "" {
		b.WriteString("/namespaces/")
		b.WriteString(url.PathEscape(ns))
	}
	b.WriteByte('/')
	b.WriteString(url.PathEscape(r.Resource))
	b.WriteByte('/')
	b.WriteString(url.PathEscape(name))
	return b.String()
}

// protobufMagic starts every protobuf body of the API server (its
// runtime.Unknown envelope follows).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// resourceVersionOf reads metadata.resourceVersion of the object in an
// answer of content type contentType: protobuf (a runtime.Unknown whose
// raw bytes, field 2, hold the object, whose field 1 is its ObjectMeta,
// whose field 6 is the resourceVersion) or JSON.
func resourceVersionOf(body []byte, contentType string) (string, error) {
	if !strings.HasPrefix(contentType, runtime.ContentTypeProtobuf) {
		var v struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		err := json.Unmarshal(body, &v)
		return v.Metadata.ResourceVersion, err
	}
	b, ok := bytes.CutPrefix(body, protobufMagic)
	if !ok {
		return "", errors.New("a protobuf answer without its envelope")
	}
	for _, field := range []protowire.Number{2, 1, 6} {
		var err error
		if b, err = bytesField(b, field); err != nil {
			return "", err
		}
	}
	return string(b), nil
}

// bytesField returns the value of the first length-delimited field num
// of protobuf message b.
func bytesField(b []byte, num protowire.Number) ([]byte, error) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil, protowire.ParseError(l)
			}
			return v, nil
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return nil, protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil, fmt.Errorf("no field %d", num)
}
