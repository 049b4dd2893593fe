package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"tally.dev/tally/kinds/kindstest"
)

// TestResourceVersionOf reads the resourceVersion of answers encoded as
// the API server encodes them, and refuses what is not one.
func TestResourceVersionOf(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u", ResourceVersion: "12345",
			Labels: map[string]string{"tally.dev/state": "admitted"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tally-admission", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:suspend":{}}}`)}}}}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	pb := buf.Bytes()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		want              string
		wantErr           bool
	}{
		{"protobuf", runtime.ContentTypeProtobuf, pb, "12345", false},
		{"json", runtime.ContentTypeJSON, js, "12345", false},
		{"truncated protobuf", runtime.ContentTypeProtobuf, pb[:len(pb)/2], "", true},
		{"protobuf without its envelope", runtime.ContentTypeProtobuf, pb[4:], "", true},
		{"JSON sent as protobuf", runtime.ContentTypeProtobuf, js, "", true},
		{"bad JSON", runtime.ContentTypeJSON, []byte(`{"metadata":`), "", true},
	} {
		got, err := resourceVersionOf(tc.body, tc.contentType)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestVersionPatches sends the ledger's patches to a real API server
// (envtest): each sets the object's resourceVersion to the one the
// server stored, the patch options reach the server, its errors keep
// their kind, the write budget is drawn on, and a typed object goes
// through the embedded client whole.
func TestVersionPatches(t *testing.T) {
	cfg := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, Mapper: mapper, HTTPClient: h})
	if err != nil {
		t.Fatal(err)
	}
	counted := rest.CopyConfig(cfg)
	limiter := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	counted.RateLimiter = limiter
	cl, err := newVersionPatches(plain, counted, h, mapper)
	if err != nil {
		t.Fatal(err)
	}

	job := kindstest.Job("default", "j").Suspend(true).Request(corev1.ResourceCPU, "1").Obj()
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.Spec.Template.Spec.Containers[0].Image = "busybox"
	if err := plain.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}}
	if err := plain.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	ref := func(obj client.Object, gvk string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
		switch gvk {
		case "Job":
			m.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
		default:
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		}
		return m
	}
	stored := func(obj client.Object) client.Object {
		t.Helper()
		if err := plain.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}

	// A merge patch of a Job (apis/batch/v1) and of a ConfigMap (api/v1),
	// with its field manager.
	for _, tc := range []struct {
		obj  client.Object
		kind string
	}{{job, "Job"}, {cm, "ConfigMap"}} {
		r := ref(tc.obj, tc.kind)
		before := limiter.n
		if err := cl.Patch(ctx, r, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tally.dev/state":"admitted"}}}`)),
			client.FieldOwner("tally-state")); err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		got := stored(tc.obj)
		if r.ResourceVersion == "" || r.ResourceVersion != got.GetResourceVersion() {
			t.Errorf("%s: patch set resourceVersion %q, the server holds %q", tc.kind, r.ResourceVersion, got.GetResourceVersion())
		}
		if got.GetLabels()["tally.dev/state"] != "admitted" {
			t.Errorf("%s: the label was not written: %v", tc.kind, got.GetLabels())
		}
		// (envtest's API server keeps no managedFields for this ConfigMap,
		// not even its creator's.)
		if tc.kind == "Job" && !managedBy(got, "tally-state") {
			t.Errorf("%s: no managedFields entry of tally-state: %v", tc.kind, got.GetManagedFields())
		}
		if limiter.n != before+1 {
			t.Errorf("%s: the patch drew %d tokens from the write budget, want 1", tc.kind, limiter.n-before)
		}
	}

	// Server-side apply with forced ownership, as the admission writes
	// in apply mode.
	r := ref(job, "Job")
	apply := []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"default","annotations":{"tally.dev/flavors":"x"}}}`)
	if err := cl.Patch(ctx, r, client.RawPatch(types.ApplyPatchType, apply), client.FieldOwner("tally-admission"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if got := stored(job); r.ResourceVersion != got.GetResourceVersion() || !managedBy(got, "tally-admission") {
		t.Errorf("apply: resourceVersion %q (server %q), managers %v", r.ResourceVersion, got.GetResourceVersion(), got.GetManagedFields())
	}

	// A patch guarded by an old resourceVersion conflicts; one of a
	// missing object is not found; one the API server refuses is invalid.
	stale := []byte(`{"metadata":{"resourceVersion":"1","labels":{"x":"y"}}}`)
	if err := cl.Patch(ctx, ref(job, "Job"), client.RawPatch(types.MergePatchType, stale)); !apierrors.IsConflict(err) {
		t.Errorf("stale patch: got %v, want a Conflict", err)
	}
	gone := ref(job, "Job")
	gone.Name = "gone"
	if err := cl.Patch(ctx, gone, client.RawPatch(types.MergePatchType, []byte(`{}`))); !apierrors.IsNotFound(err) {
		t.Errorf("missing Job: got %v, want NotFound", err)
	}
	if err := cl.Patch(ctx, ref(job, "Job"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"parallelism":-1}}`))); !apierrors.IsInvalid(err) {
		t.Errorf("invalid patch: got %v, want Invalid", err)
	}

	// A typed object is the embedded client's: decoded whole.
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}}
	if err := cl.Patch(ctx, typed, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v"}}`))); err != nil {
		t.Fatal(err)
	}
	if typed.Data["k"] != "v" || typed.UID == "" {
		t.Errorf("typed patch: the answer was not decoded: %+v", typed)
	}
}

// startAPIServer starts envtest's API server and etcd for t, or skips t
// where make test has not set them up.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS not set; run make test")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	t.Cleanup(func() { _ = env.Stop() }) // a failed Start may have started the control plane
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func managedBy(obj client.Object, manager string) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

// countingLimiter counts the tokens the requests take.
type countingLimiter struct {
	flowcontrol.RateLimiter
	n int
}

func (c *countingLimiter) Wait(ctx context.Context) error { c.n++; return c.RateLimiter.Wait(ctx) }

// TestPatchRetryAfter tries a patch again, after waiting on the write
// budget, while the answer is a 429 or 5xx with a Retry-After, as
// client-go does, up to maxPatchRetries times; an error answer without
// one is returned at once, with its kind.
func TestPatchRetryAfter(t *testing.T) {
	answer := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", ResourceVersion: "77"}}
	var ok bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(answer, &ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		refusals int    // answers of code before a 200
		code     int    // the refusals' code
		after    string // their Retry-After
		attempts int
		check    func(error) bool
	}{
		{"429 with Retry-After, twice", 2, http.StatusTooManyRequests, "0", 3, func(err error) bool { return err == nil }},
		{"503 with Retry-After", 1, http.StatusServiceUnavailable, "0", 2, func(err error) bool { return err == nil }},
		{"429 always", 100, http.StatusTooManyRequests, "0", maxPatchRetries + 1, apierrors.IsTooManyRequests},
		{"500 without Retry-After", 1, http.StatusInternalServerError, "", 1, apierrors.IsInternalError},
		{"409 with Retry-After", 1, http.StatusConflict, "0", 1, apierrors.IsConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var attempts int
			var query, contentType, agent string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts++
				query, contentType, agent = r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("User-Agent")
				if r.Method != http.MethodPatch || r.URL.Path != "/apis/batch/v1/namespaces/ns/jobs/j" {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
					return
				}
				if attempts <= tc.refusals {
					if tc.after != "" {
						w.Header().Set("Retry-After", tc.after)
					}
					http.Error(w, "refused", tc.code)
					return
				}
				w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
				_, _ = w.Write(ok.Bytes())
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL, UserAgent: "tally/test"}
			limiter := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
			cfg.RateLimiter = limiter
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(batchv1.SchemeGroupVersion.WithKind("Job"), meta.RESTScopeNamespace)
			cl, err := newVersionPatches(nil, cfg, srv.Client(), mapper)
			if err != nil {
				t.Fatal(err)
			}
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}}
			m.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
			err = cl.Patch(context.Background(), m, client.RawPatch(types.MergePatchType, []byte(`{}`)), client.FieldOwner("tally-state"))
			if !tc.check(err) {
				t.Errorf("got %v", err)
			}
			if attempts != tc.attempts || limiter.n != tc.attempts {
				t.Errorf("%d attempts, %d tokens drawn; want %d of each", attempts, limiter.n, tc.attempts)
			}
			if err == nil && m.ResourceVersion != "77" {
				t.Errorf("resourceVersion %q, want 77", m.ResourceVersion)
			}
			if query != "fieldManager=tally-state" || contentType != string(types.MergePatchType) || agent != "tally/test" {
				t.Errorf("sent query %q, content type %q and User-Agent %q", query, contentType, agent)
			}
		})
	}
}

// TestPatchQuery encodes patch options as client-go's parameter codec
// does.
func TestPatchQuery(t *testing.T) {
	yes := true
	for _, opts := range []*metav1.PatchOptions{
		{},
		{FieldManager: "tally-admission"},
		{FieldManager: "tally-admission", Force: &yes},
		{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict", FieldManager: "a b&c"},
	} {
		want, err := metav1.ParameterCodec.EncodeParameters(opts, metav1.SchemeGroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		wantQuery := ""
		if len(want) > 0 {
			wantQuery = "?" + want.Encode()
		}
		if got := patchQuery(opts); got != wantQuery {
			t.Errorf("%+v: got %q, want %q", opts, got, wantQuery)
		}
	}
}

// BenchmarkVersionPatch sends label patches of a Job to a server that
// answers each as the API server does (a PartialObjectMetadata in
// protobuf, over TLS and HTTP/2): the client's cost of one write.
func BenchmarkVersionPatch(b *testing.B) {
	answer := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: watchedJob("j", "77").ObjectMeta}
	var ok bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(answer, &ok); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(ok.Bytes())
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(batchv1.SchemeGroupVersion.WithKind("Job"), meta.RESTScopeNamespace)
	cl, err := newVersionPatches(nil, cfg, srv.Client(), mapper)
	if err != nil {
		b.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tally.dev/state":"finished"}}}`))
	b.ReportAllocs()
	for b.Loop() {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "j"}}
		m.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
		if err := cl.Patch(context.Background(), m, patch, client.FieldOwner("tally-state")); err != nil || m.ResourceVersion != "77" {
			b.Fatal(err, m.ResourceVersion)
		}
	}
}
