package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"tally.dev/tally/kinds"
	"tally.dev/tally/queues"
)

// ConfigMapValidatePath is where the config validating webhook is served.
const ConfigMapValidatePath = "/validate-v1-configmap"

// ConfigValidator denies a config ConfigMap that kinds.Accept refuses,
// with every error and its field path.
type ConfigValidator struct {
	Namespace string
	Name      string
	Decoder   admission.Decoder
}

// Handle implements admission.Handler.
func (v *ConfigValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.Namespace != v.Namespace || req.Name != v.Name {
		return admission.Allowed("")
	}
	cm := &corev1.ConfigMap{}
	if err := v.Decoder.DecodeRaw(req.Object, cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("tally: decoding ConfigMap: %w", err))
	}
	data, ok := cm.Data[queues.ConfigKey]
	if !ok {
		return admission.Denied(fmt.Sprintf("data[%s]: required: the config documents live under this key", queues.ConfigKey))
	}
	// Offline: the handler asks the API server nothing; the ledger's
	// loader finds which declared kinds are served.
	acc := kinds.Accept(ctx, kinds.Text(data), kinds.API{})
	if len(acc.Errs) > 0 {
		return admission.Denied(fmt.Sprintf("data[%s]: invalid config: %s", queues.ConfigKey, strings.Join(queues.FormatErrors(acc.Errs), "; ")))
	}
	return admission.Allowed("").WithWarnings(acc.Warnings...)
}
