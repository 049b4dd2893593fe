package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/e2e/framework"
)

// injectCAFrom is cert-manager's annotation naming the Certificate whose
// CA its cainjector writes into a webhook configuration's caBundle.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// TestCertManager installs tally as deploy/cert-manager does, against
// cert-manager's own controllers and cainjector (e2e/toolchain/cert-manager),
// and checks what the overlay promises: cert-manager issues the serving
// certificate from the overlay's Issuers and Certificates, its cainjector
// puts the CA into both webhook configurations, tally (run with the
// Deployment's arguments and the Secret as a Secret volume) serves that
// certificate, and a renewal reaches the webhook server without a restart
// while the caBundle stays.
//
// tally runs on the host, as in every e2e test, so the webhook
// configurations call https://127.0.0.1:PORT instead of the Service, and
// the Certificate gets the IP SAN 127.0.0.1 besides its DNS names. The
// test plays the kubelet's part: it writes the Secret into the
// certificate directory as a Secret volume is written (WriteSecretVolume).
// The suite's tally is stopped meanwhile; its webhook configurations are
// the overlay's.
func TestCertManager(t *testing.T) {
	s := setup(t)
	// The first run builds cert-manager (a few minutes on a cold cache).
	ctx := testContext(t, 15*time.Minute)
	dir := t.TempDir()

	objs, err := s.env.Kustomize(ctx, "deploy/cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	o := overlayOf(t, objs)

	if err := s.cluster.InstallCertManagerCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := framework.NewCertManager(ctx, s.cluster, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.tally.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Runs last: the suite's tally registers its own webhooks again.
	t.Cleanup(func() {
		if err := s.tally.Start(); err != nil {
			t.Errorf("restarting the suite's tally: %v", err)
			return
		}
		if err := s.tally.WaitReady(context.Background(), time.Minute); err != nil {
			t.Errorf("the suite's tally is not ready again: %v", err)
		}
	})
	startOperator(ctx, t, cm, time.Minute)

	tally, err := framework.NewTally(s.env.Bin, s.tally.Kubeconfig, filepath.Join(dir, "tally"))
	if err != nil {
		t.Fatal(err)
	}
	tally.Name = "tally with cert-manager"
	tally.CertDir = filepath.Join(dir, "serving-certs")
	tally.ExtraArgs = o.args

	// The Certificates' Secrets go once the Certificates have gone.
	t.Cleanup(func() {
		for _, name := range o.secrets {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tallyNamespace, Name: name}}
			if err := s.client.Delete(context.Background(), sec); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting Secret %s: %v", name, err)
			}
		}
	})
	// The overlay's cert-manager objects, the serving Certificate also for
	// 127.0.0.1.
	for _, obj := range o.certObjects {
		obj = obj.DeepCopy()
		if obj.GetKind() == "Certificate" && obj.GetName() == o.certificate {
			if err := unstructured.SetNestedStringSlice(obj.Object, []string{"127.0.0.1"}, "spec", "ipAddresses"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() {
			if err := s.client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		})
	}
	useOverlayWebhooks(ctx, t, s, o, fmt.Sprintf("https://127.0.0.1:%d", tally.WebhookPort))

	start := time.Now()
	secret := waitIssued(ctx, t, s, o, nil)
	t.Logf("cert-manager issued %s in %s: serial %s", o.secretName, time.Since(start).Round(time.Millisecond), serialOf(t, secret.Data["tls.crt"]))
	ca := secret.Data["ca.crt"]
	waitCABundles(ctx, t, s, ca)

	if err := framework.WriteSecretVolume(tally.CertDir, secret.Data); err != nil {
		t.Fatal(err)
	}
	if err := tally.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tally.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping %s: %v", tally.Name, err)
		}
		if t.Failed() {
			printTail(tally.Log, 40)
		}
	})
	if err := tally.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("%s is not ready: %v", tally.Name, err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", tally.WebhookPort)
	if got, want := servedSerial(ctx, t, addr, ca), serialOf(t, secret.Data["tls.crt"]); got.Cmp(want) != 0 {
		t.Fatalf("tally serves the certificate of serial %s, the Secret holds %s", got, want)
	}

	// A Job of a managed namespace goes through the Job webhook, which
	// fails closed: the API server trusts tally's certificate through the
	// injected caBundle.
	const queue = "e2e-cert-manager"
	useQueues(ctx, t, s, []string{queue}, cpuQueue(queue, 4, ""))
	ns := "e2e-cert-manager"
	if err := framework.BindNamespace(ctx, s.client, ns, queue); err != nil {
		t.Fatal(err)
	}
	createSuspended(ctx, t, s, ns, "before-renewal")

	// Renew as `cmctl renew` does: the Issuing condition on the Certificate.
	pid := tally.Pid()
	old := secret
	if err := renew(ctx, s, o.certificate); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	secret = waitIssued(ctx, t, s, o, old)
	newSerial := serialOf(t, secret.Data["tls.crt"])
	t.Logf("cert-manager renewed %s in %s: serial %s", o.secretName, time.Since(start).Round(time.Millisecond), newSerial)
	if !bytes.Equal(secret.Data["ca.crt"], ca) {
		t.Fatalf("the renewal changed the CA in %s; the overlay's CA Issuer should have kept it", o.secretName)
	}
	if err := framework.WriteSecretVolume(tally.CertDir, secret.Data); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	var served *big.Int
	if err := framework.Poll(ctx, 100*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		served = servedSerial(ctx, t, addr, ca)
		return served.Cmp(newSerial) == 0, "serving serial " + served.String(), nil
	}); err != nil {
		t.Fatalf("tally does not serve the renewed certificate %s: %v", newSerial, err)
	}
	t.Logf("tally serves the renewed certificate %s after %s", newSerial, time.Since(start).Round(time.Millisecond))
	if !tally.Running() || tally.Pid() != pid {
		t.Fatalf("tally restarted: pid %d, was %d", tally.Pid(), pid)
	}
	waitCABundles(ctx, t, s, ca)
	createSuspended(ctx, t, s, ns, "after-renewal")
	waitJobFinished(ctx, t, s, ns, "after-renewal")
	// With --cert-manager, tally needs no more than deploy/base/rbac.yaml.
	if lines, err := framework.Forbidden(tally.Log); err != nil || len(lines) > 0 {
		t.Errorf("requests tally's role forbids (%v):\n%s", err, strings.Join(lines, "\n"))
	}
}

// overlay is what the test takes from the rendered deploy/cert-manager.
type overlay struct {
	// certObjects are the cert-manager Issuers and Certificates.
	certObjects []*unstructured.Unstructured
	// certificate is the serving Certificate the webhooks' inject-ca-from
	// names; secretName the Secret it writes, which the Deployment
	// mounts; secrets every Certificate's Secret.
	certificate, secretName string
	secrets                 []string
	// webhooks are the two webhook configurations.
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
	// args are the Deployment's arguments after serve.
	args []string
}

// overlayOf checks the overlay's wiring (the annotations name a
// Certificate of the overlay, whose Secret the Deployment mounts, and the
// Deployment runs tally with --cert-manager) and returns its parts.
func overlayOf(t *testing.T, objs []*unstructured.Unstructured) overlay {
	t.Helper()
	var o overlay
	var deployment *unstructured.Unstructured
	for _, obj := range objs {
		var err error
		switch obj.GetKind() {
		case "Issuer", "Certificate":
			o.certObjects = append(o.certObjects, obj)
			if obj.GetKind() == "Certificate" {
				name, _, _ := unstructured.NestedString(obj.Object, "spec", "secretName")
				o.secrets = append(o.secrets, name)
			}
		case "MutatingWebhookConfiguration":
			o.mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, o.mutating)
		case "ValidatingWebhookConfiguration":
			o.validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, o.validating)
		case "Deployment":
			deployment = obj
		}
		if err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	if o.mutating == nil || o.validating == nil || deployment == nil {
		t.Fatalf("deploy/cert-manager renders no webhook configurations or no Deployment")
	}
	from := o.mutating.Annotations[injectCAFrom]
	if v := o.validating.Annotations[injectCAFrom]; from == "" || v != from {
		t.Fatalf("the webhook configurations' %s: mutating %q, validating %q", injectCAFrom, from, v)
	}
	for _, obj := range o.certObjects {
		if obj.GetKind() == "Certificate" && obj.GetNamespace()+"/"+obj.GetName() == from {
			o.certificate = obj.GetName()
			o.secretName, _, _ = unstructured.NestedString(obj.Object, "spec", "secretName")
		}
	}
	if o.certificate == "" {
		t.Fatalf("%s %s names no Certificate of the overlay", injectCAFrom, from)
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	volumes, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "volumes")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if len(args) == 0 || args[0] != "serve" || !slices.Contains(args, "--cert-manager") || !slices.Contains(args, "--register-webhooks=false") {
		t.Fatalf("the Deployment's arguments %v: want serve with --cert-manager and --register-webhooks=false", args)
	}
	o.args = args[1:]
	mounted, _, _ := unstructured.NestedString(volumes[0].(map[string]any), "secret", "secretName")
	if mounted != o.secretName {
		t.Fatalf("the Deployment mounts Secret %q, the Certificate %s writes %q", mounted, o.certificate, o.secretName)
	}
	return o
}

// useOverlayWebhooks gives the webhook configurations (which the suite
// created, see PrepareWebhookConfigurations) the overlay's webhooks and
// annotations, each calling url and the webhook's path rather than the
// Service. When the test ends it removes the annotations, so that the
// suite's tally registers its own CA undisturbed.
func useOverlayWebhooks(ctx context.Context, t *testing.T, s *suite, o overlay, url string) {
	t.Helper()
	toURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u := url + *cc.Service.Path
		cc.URL, cc.Service, cc.CABundle = &u, nil, nil
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, obj := range []client.Object{m, v} {
		if err := s.client.Get(ctx, client.ObjectKey{Name: o.mutating.Name}, obj); err != nil {
			t.Fatal(err)
		}
	}
	m.Annotations, m.Webhooks = o.mutating.Annotations, o.mutating.Webhooks
	for i := range m.Webhooks {
		toURL(&m.Webhooks[i].ClientConfig)
	}
	v.Annotations, v.Webhooks = o.validating.Annotations, o.validating.Webhooks
	for i := range v.Webhooks {
		toURL(&v.Webhooks[i].ClientConfig)
	}
	for _, obj := range []client.Object{m, v} {
		if err := s.client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, injectCAFrom))
			if err := s.client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				t.Errorf("removing %s from %s: %v", injectCAFrom, obj.GetName(), err)
			}
		})
	}
}

// waitIssued waits until the serving Certificate is Ready and its Secret
// holds a certificate other than old's (when old is not nil), and returns
// the Secret.
func waitIssued(ctx context.Context, t *testing.T, s *suite, o overlay, old *corev1.Secret) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{}
	if err := framework.Poll(ctx, 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		crt := &unstructured.Unstructured{}
		crt.SetAPIVersion("cert-manager.io/v1")
		crt.SetKind("Certificate")
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: tallyNamespace, Name: o.certificate}, crt); err != nil {
			return false, err.Error(), nil
		}
		ready, issuing := framework.ConditionStatus(crt, "Ready"), framework.ConditionStatus(crt, "Issuing")
		if ready != "True" || issuing == "True" {
			return false, fmt.Sprintf("Certificate %s Ready=%q Issuing=%q", o.certificate, ready, issuing), nil
		}
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: tallyNamespace, Name: o.secretName}, secret); err != nil {
			return false, err.Error(), nil
		}
		if old != nil && bytes.Equal(secret.Data["tls.crt"], old.Data["tls.crt"]) {
			return false, "Secret " + o.secretName + " still holds the old certificate", nil
		}
		return len(secret.Data["tls.crt"]) > 0 && len(secret.Data["ca.crt"]) > 0, "Secret " + o.secretName + " without tls.crt or ca.crt", nil
	}); err != nil {
		t.Fatalf("cert-manager did not issue %s: %v", o.certificate, err)
	}
	return secret
}

// renew sets the Certificate's Issuing condition, as `cmctl renew` does;
// cert-manager then issues it again.
func renew(ctx context.Context, s *suite, name string) error {
	crt := &unstructured.Unstructured{}
	crt.SetAPIVersion("cert-manager.io/v1")
	crt.SetKind("Certificate")
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: tallyNamespace, Name: name}, crt); err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
	conds = append(conds, map[string]any{
		"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
		"message":            "Certificate re-issuance manually triggered",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"observedGeneration": crt.GetGeneration(),
	})
	if err := unstructured.SetNestedSlice(crt.Object, conds, "status", "conditions"); err != nil {
		return err
	}
	return s.client.Status().Update(ctx, crt)
}

// waitCABundles waits until every webhook of both configurations trusts
// exactly ca.
func waitCABundles(ctx context.Context, t *testing.T, s *suite, ca []byte) {
	t.Helper()
	if err := framework.Poll(ctx, 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: "tally"}, m); err != nil {
			return false, err.Error(), nil
		}
		if err := s.client.Get(ctx, client.ObjectKey{Name: "tally"}, v); err != nil {
			return false, err.Error(), nil
		}
		var wrong []string
		for _, w := range m.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				wrong = append(wrong, w.Name)
			}
		}
		for _, w := range v.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				wrong = append(wrong, w.Name)
			}
		}
		return len(wrong) == 0, "caBundle other than the issuer's CA in " + strings.Join(wrong, ", "), nil
	}); err != nil {
		t.Fatalf("cainjector: %v", err)
	}
}

// servedSerial is the serial of the certificate served at addr, which must
// verify against ca for the IP 127.0.0.1.
func servedSerial(ctx context.Context, t *testing.T, addr string, ca []byte) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("ca.crt holds no certificate")
	}
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("TLS to tally's webhook server: %v", err)
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
}

// serialOf is the serial of the first certificate of a PEM bundle.
func serialOf(t *testing.T, pemData []byte) *big.Int {
	t.Helper()
	b, _ := pem.Decode(pemData)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}

// createSuspended creates a Job in ns and checks that it comes back from
// the API server suspended and queued by tally's webhook.
func createSuspended(ctx context.Context, t *testing.T, s *suite, ns, name string) {
	t.Helper()
	j := framework.NewJob(ns, name).Request("cpu", "1").Obj()
	if err := framework.CreateJobs(ctx, s.client, j); err != nil {
		t.Fatal(err)
	}
	if !framework.Suspended(j) || j.Labels[framework.LabelState] != framework.StatePending {
		t.Fatalf("Job %s/%s created: suspend=%v labels=%v; want suspended and pending", ns, name, j.Spec.Suspend, j.Labels)
	}
}
