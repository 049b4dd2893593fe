package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tally.dev/tally/certs"
)

// SidecarInjector is a mutating admission webhook of the test's own, as
// a service mesh installs one: it adds a container to every pod created
// in one namespace. Its configuration's name sorts after tally's, so the
// API server calls it after tally's pod gate, and calls the gate again
// for the pod it changed.
type SidecarInjector struct {
	c      client.Client
	srv    *http.Server
	config string
	// Injected counts the pods it added the container to.
	injected chan struct{}
}

// InjectSidecar starts a SidecarInjector that adds sidecar to the pods
// of namespace ns, and claims to their resource claims (for the
// sidecar's resources.claims to name). Stop removes it.
func InjectSidecar(ctx context.Context, c client.Client, ns string, sidecar corev1.Container, claims ...corev1.PodResourceClaim) (*SidecarInjector, error) {
	bundle, err := certs.Generate([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	s := &SidecarInjector{c: c, config: "zz-e2e-sidecar-" + ns, injected: make(chan struct{}, 1000)}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, sidecar, claims) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	url := fmt.Sprintf("https://%s/inject", ln.Addr().(*net.TCPAddr).String())
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: s.config},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "sidecar.e2e.tally.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: bundle.CACert},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := c.Create(ctx, cfg); err != nil {
		_ = s.srv.Close()
		return nil, fmt.Errorf("registering the sidecar injector: %w", err)
	}
	return s, nil
}

// Injected counts the pods the injector changed so far.
func (s *SidecarInjector) Injected() int { return len(s.injected) }

func (s *SidecarInjector) serve(w http.ResponseWriter, r *http.Request, sidecar corev1.Container, claims []corev1.PodResourceClaim) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	review := &admissionv1.AdmissionReview{}
	if err == nil {
		err = json.Unmarshal(body, review)
	}
	if err == nil && review.Request == nil {
		err = errors.New("no request")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(review.Request.Object.Raw, pod); err == nil {
		has := false
		for _, c := range pod.Spec.Containers {
			has = has || c.Name == sidecar.Name
		}
		if !has {
			ops := []map[string]any{{"op": "add", "path": "/spec/containers/-", "value": sidecar}}
			for i, c := range claims {
				if i == 0 && len(pod.Spec.ResourceClaims) == 0 {
					ops = append(ops, map[string]any{"op": "add", "path": "/spec/resourceClaims", "value": []corev1.PodResourceClaim{c}})
					continue
				}
				ops = append(ops, map[string]any{"op": "add", "path": "/spec/resourceClaims/-", "value": c})
			}
			patch, _ := json.Marshal(ops)
			resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
			select {
			case s.injected <- struct{}{}:
			default:
			}
		}
	}
	review.Response, review.Request = resp, nil
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Stop removes the injector's configuration and stops its server.
func (s *SidecarInjector) Stop(ctx context.Context) error {
	err := s.c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.config}})
	return errors.Join(err, s.srv.Close())
}
