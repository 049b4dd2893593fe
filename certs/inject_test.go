package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The integration tests share one API server (envtest: a real
// kube-apiserver and etcd) started by TestMain; without
// KUBEBUILDER_ASSETS they skip and only the unit tests run.
var (
	k8s    client.WithWatch
	testNS = "certs-test"
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		os.Exit(m.Run())
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // a failed Start may have started the control plane
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		os.Exit(1)
	}
	code := func() int {
		k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
		if err != nil {
			fmt.Fprintf(os.Stderr, "client: %v\n", err)
			return 1
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}
		if err := k8s.Create(context.Background(), ns); err != nil {
			fmt.Fprintf(os.Stderr, "creating namespace: %v\n", err)
			return 1
		}
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
	}
	os.Exit(code)
}

func needAPIServer(t *testing.T) context.Context {
	t.Helper()
	if k8s == nil {
		t.Skip("KUBEBUILDER_ASSETS not set; run make test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// webhookConfigurations creates a Mutating and a Validating configuration
// named name, two webhooks each, without caBundle. They call a URL nobody
// serves, fail open, and select no namespace, so they never get in the way.
func webhookConfigurations(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"certs.test/never": "true"}}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1" + path)}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	ignore, none := ptr.To(admissionregistrationv1.Ignore), ptr.To(admissionregistrationv1.SideEffectClassNone)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i := range 2 {
		m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: fmt.Sprintf("m%d.certs.test", i), ClientConfig: cc(fmt.Sprintf("/m%d", i)), Rules: rules,
			FailurePolicy: ignore, SideEffects: none, NamespaceSelector: never, AdmissionReviewVersions: []string{"v1"},
		})
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: fmt.Sprintf("v%d.certs.test", i), ClientConfig: cc(fmt.Sprintf("/v%d", i)), Rules: rules,
			FailurePolicy: ignore, SideEffects: none, NamespaceSelector: never, AdmissionReviewVersions: []string{"v1"},
		})
	}
	for _, obj := range []client.Object{m, v} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
}

// caBundles returns the caBundle of every webhook of both configurations
// named name, and their resourceVersions.
func caBundles(t *testing.T, ctx context.Context, name string) (bundles [][]byte, versions string) {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, v); err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles, m.ResourceVersion + "/" + v.ResourceVersion
}

func assertAllBundles(t *testing.T, ctx context.Context, name string, want []byte) {
	t.Helper()
	bundles, _ := caBundles(t, ctx, name)
	if len(bundles) != 4 {
		t.Fatalf("found %d webhooks, want 4", len(bundles))
	}
	for i, got := range bundles {
		if !bytes.Equal(got, want) {
			t.Errorf("webhook %d: caBundle = %.40q, want the CA", i, got)
		}
	}
}

func TestInjectCABundle(t *testing.T) {
	ctx := needAPIServer(t)
	webhookConfigurations(t, ctx, "inject")
	ca := mustGenerate(t, hosts, t0).CACert

	if err := InjectCABundle(ctx, k8s, "inject", "inject", ca); err != nil {
		t.Fatalf("InjectCABundle: %v", err)
	}
	assertAllBundles(t, ctx, "inject", ca)

	t.Run("the same CA again writes nothing", func(t *testing.T) {
		_, before := caBundles(t, ctx, "inject")
		if err := InjectCABundle(ctx, k8s, "inject", "inject", ca); err != nil {
			t.Fatal(err)
		}
		if _, after := caBundles(t, ctx, "inject"); after != before {
			t.Errorf("resourceVersions %s -> %s: the configurations were rewritten", before, after)
		}
	})
	t.Run("a new CA replaces the old one", func(t *testing.T) {
		ca2 := mustGenerate(t, hosts, t0).CACert
		if err := InjectCABundle(ctx, k8s, "inject", "inject", ca2); err != nil {
			t.Fatal(err)
		}
		assertAllBundles(t, ctx, "inject", ca2)
	})
	t.Run("empty names skip", func(t *testing.T) {
		if err := InjectCABundle(ctx, k8s, "", "", ca); err != nil {
			t.Errorf("InjectCABundle with no names: %v", err)
		}
	})
	t.Run("an empty CA is refused", func(t *testing.T) {
		if err := InjectCABundle(ctx, k8s, "inject", "inject", nil); err == nil {
			t.Error("want an error")
		}
	})
	t.Run("a missing configuration is an error naming it", func(t *testing.T) {
		for _, tc := range []struct{ mutating, validating, kind string }{
			{"no-such-config", "", "MutatingWebhookConfiguration"},
			{"", "no-such-config", "ValidatingWebhookConfiguration"},
			{"inject", "no-such-config", "ValidatingWebhookConfiguration"},
		} {
			err := InjectCABundle(ctx, k8s, tc.mutating, tc.validating, ca)
			if err == nil || !strings.Contains(err.Error(), `"no-such-config"`) || !strings.Contains(err.Error(), tc.kind) || !apierrors.IsNotFound(err) {
				t.Errorf("InjectCABundle(%q, %q) = %v, want a NotFound error naming %s \"no-such-config\"", tc.mutating, tc.validating, err, tc.kind)
			}
		}
	})
}

// TestInjectCABundleRetriesConflicts makes another writer change each
// configuration between InjectCABundle's read and its first update: the
// update conflicts, is retried, and both changes survive.
func TestInjectCABundleRetriesConflicts(t *testing.T) {
	ctx := needAPIServer(t)
	webhookConfigurations(t, ctx, "conflict")
	ca := mustGenerate(t, hosts, t0).CACert

	var interfered sync.Map
	c := interceptor.NewClient(k8s, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			kind := fmt.Sprintf("%T", obj)
			if _, done := interfered.LoadOrStore(kind, true); !done {
				fresh := obj.DeepCopyObject().(client.Object)
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
					return err
				}
				fresh.SetLabels(map[string]string{"other-writer": "was-here"})
				if err := c.Update(ctx, fresh); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	if err := InjectCABundle(ctx, c, "conflict", "conflict", ca); err != nil {
		t.Fatalf("InjectCABundle: %v", err)
	}
	assertAllBundles(t, ctx, "conflict", ca)
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := k8s.Get(ctx, client.ObjectKey{Name: "conflict"}, obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetLabels()["other-writer"] != "was-here" {
			t.Errorf("%T: the other writer's change was lost", obj)
		}
	}
}

// barrier makes the first n calls of one kind wait until all n arrived, so
// that n callers really race.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: int32(n), all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) {
	switch k := b.arrived.Add(1); {
	case k == b.n:
		close(b.all)
	case k > b.n:
		return
	}
	select {
	case <-b.all:
	case <-ctx.Done():
	}
}

// racing runs EnsureSecret from n callers at once and returns what each
// got. The clients make all n reach the given write (Create or Update)
// before any of them sends it; exactly one write must succeed.
func racing(t *testing.T, ctx context.Context, n int, write string, key client.ObjectKey, now time.Time) []*Bundle {
	t.Helper()
	b := newBarrier(n)
	var wins atomic.Int32
	count := func(err error) error {
		if err == nil {
			wins.Add(1)
		}
		return err
	}
	funcs := interceptor.Funcs{}
	switch write {
	case "create":
		funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			b.wait(ctx)
			return count(c.Create(ctx, obj, opts...))
		}
	case "update":
		funcs.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			b.wait(ctx)
			return count(c.Update(ctx, obj, opts...))
		}
	}
	c := interceptor.NewClient(k8s, funcs)
	got := make([]*Bundle, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = EnsureSecret(ctx, c, key, hosts, now) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: EnsureSecret: %v", i, err)
		}
	}
	if w := wins.Load(); w != 1 {
		t.Errorf("%d callers' %s succeeded, want exactly 1", w, write)
	}
	return got
}

// secretKey names a Secret for one test; it is deleted when the test ends,
// so that the shared API server starts each test without it.
func secretKey(t *testing.T, name string) client.ObjectKey {
	t.Helper()
	key := client.ObjectKey{Namespace: testNS, Name: name}
	t.Cleanup(func() {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := k8s.Delete(context.Background(), s); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Secret %s: %v", key, err)
		}
	})
	return key
}

func secretOf(t *testing.T, ctx context.Context, key client.ObjectKey) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, key, s); err != nil {
		t.Fatalf("reading Secret %s: %v", key, err)
	}
	return s
}

func TestEnsureSecretConcurrentCreate(t *testing.T) {
	ctx := needAPIServer(t)
	key := secretKey(t, "race-create")

	got := racing(t, ctx, 3, "create", key, t0)
	for i, b := range got[1:] {
		if !b.equal(got[0]) {
			t.Errorf("caller %d returned a different bundle than caller 0", i+1)
		}
	}
	s := secretOf(t, ctx, key)
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type = %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	if !secretBundle(s).equal(got[0]) {
		t.Error("the Secret does not hold the bundle the callers returned")
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt", "ca.key"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("Secret key %s is empty", k)
		}
	}
	if got[0].NeedsRenewal(hosts, t0, RenewBefore) {
		t.Error("the bundle in force needs renewal")
	}
}

func TestEnsureSecretRotates(t *testing.T) {
	ctx := needAPIServer(t)
	key := secretKey(t, "rotate")
	first, err := EnsureSecret(ctx, k8s, key, hosts, t0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a valid Secret is kept as it is", func(t *testing.T) {
		rv := secretOf(t, ctx, key).ResourceVersion
		got, err := EnsureSecret(ctx, k8s, key, hosts, t0.Add(100*day))
		if err != nil {
			t.Fatal(err)
		}
		if !got.equal(first) {
			t.Error("a valid bundle was replaced")
		}
		if now := secretOf(t, ctx, key).ResourceVersion; now != rv {
			t.Errorf("resourceVersion %s -> %s: the Secret was rewritten", rv, now)
		}
	})

	now := t0.Add(340 * day)
	var renewed *Bundle
	t.Run("an expiring Secret is renewed once by racing replicas", func(t *testing.T) {
		got := racing(t, ctx, 2, "update", key, now)
		renewed = got[0]
		if !got[1].equal(renewed) {
			t.Error("the replicas returned different bundles")
		}
		if bytes.Equal(renewed.Cert, first.Cert) {
			t.Error("the serving certificate was not renewed")
		}
		if !bytes.Equal(renewed.CACert, first.CACert) {
			t.Error("renewing the serving certificate changed the CA")
		}
		if renewed.NeedsRenewal(hosts, now, RenewBefore) {
			t.Error("the renewed bundle needs renewal")
		}
		if !secretBundle(secretOf(t, ctx, key)).equal(renewed) {
			t.Error("the Secret does not hold the renewed bundle")
		}
	})

	t.Run("a broken Secret is repaired", func(t *testing.T) {
		s := secretOf(t, ctx, key)
		s.Data["tls.crt"] = []byte("junk")
		s.Data["extra"] = []byte("kept")
		if err := k8s.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		got, err := EnsureSecret(ctx, k8s, key, hosts, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.NeedsRenewal(hosts, now, RenewBefore) || !bytes.Equal(got.CACert, first.CACert) {
			t.Error("want a valid bundle from the same CA")
		}
		if string(secretOf(t, ctx, key).Data["extra"]) != "kept" {
			t.Error("a key EnsureSecret does not own was dropped")
		}
	})
}

// TestRotatorSharedSecret runs two replicas' Rotators against one Secret:
// both serve certificates from the same CA, and the webhook
// configurations carry it.
func TestRotatorSharedSecret(t *testing.T) {
	ctx := needAPIServer(t)
	webhookConfigurations(t, ctx, "rotator")
	key := secretKey(t, "tally-webhook-tls")
	clk := clocktesting.NewFakeClock(t0)
	replica := func() *Rotator {
		return &Rotator{
			Client: k8s, Dir: t.TempDir(), Hosts: hosts, Secret: &key,
			Mutating: "rotator", Validating: "rotator", Clock: clk,
		}
	}
	a, b := replica(), replica()
	ba, err := a.Ensure(ctx)
	if err != nil {
		t.Fatalf("replica a: %v", err)
	}
	bb, err := b.Ensure(ctx)
	if err != nil {
		t.Fatalf("replica b: %v", err)
	}
	if !ba.equal(bb) {
		t.Error("the replicas hold different bundles")
	}
	for _, r := range []*Rotator{a, b} {
		onDisk, err := LoadDir(r.Dir)
		if err != nil || !onDisk.equal(ba) {
			t.Errorf("dir %s does not hold the Secret's bundle (%v)", r.Dir, err)
		}
	}
	assertAllBundles(t, ctx, "rotator", ba.CACert)

	// Near expiry, replica a renews; replica b picks the new certificate
	// up from the Secret on its next round.
	clk.SetTime(t0.Add(340 * day))
	na, err := a.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if na.equal(ba) || !na.equal(nb) {
		t.Error("want both replicas on one new bundle")
	}
	if onDisk, err := LoadDir(b.Dir); err != nil || !onDisk.equal(na) {
		t.Errorf("replica b's dir does not hold the renewed bundle (%v)", err)
	}
	assertAllBundles(t, ctx, "rotator", na.CACert)
}
