{{/* The labels of every object: deploy/'s app.kubernetes.io/part-of, and Helm's. */}}
{{- define "tally.labels" -}}
app.kubernetes.io/part-of: tally
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The webhooks' namespaceSelector exclusions. */}}
{{- define "tally.excluded" -}}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: [kube-system, {{ .Release.Namespace }}]
{{- end }}

{{/* cert-manager's CA injection annotation, in cert-manager mode. */}}
{{- define "tally.webhookAnnotations" -}}
{{- if eq .Values.certMode "cert-manager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/tally-webhook
{{- end }}
{{- end }}

{{- define "tally.checkCertMode" -}}
{{- if not (has .Values.certMode (list "builtin" "cert-manager")) }}
{{- fail (printf "certMode must be builtin or cert-manager, not %q" .Values.certMode) }}
{{- end }}
{{- end }}
