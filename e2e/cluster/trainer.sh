#!/usr/bin/env bash
# Usage: trainer.sh crds KUBECONFIG
#        trainer.sh run KUBECONFIG PROBE_ADDR METRICS_ADDR WEBHOOK_PORT
#
# Kubeflow Trainer v2's controller manager (github.com/kubeflow/trainer/v2)
# of the toolchain, run as a host process for TrainJobs, as the scheduler
# and controller manager are. It runs a TrainJob as a JobSet, so JobSet's
# controller (jobset.sh) must run beside it.
#
#   crds  installs the TrainJob, TrainingRuntime and ClusterTrainingRuntime
#         CRDs and waits until the API server serves them.
#   run   registers the controller's webhooks with the API server and then
#         becomes the controller (exec), so the caller's pid is the
#         controller's. It is ready when PROBE_ADDR/readyz answers 200.
#
# Its webhooks are registered as in a release (failurePolicy Fail): the
# configurations defaulter.trainer.kubeflow.org (TrainJobs) and
# validator.trainer.kubeflow.org (TrainJobs, TrainingRuntimes,
# ClusterTrainingRuntimes; a TrainJob whose runtime does not exist is
# refused). They call the host process at https://127.0.0.1:WEBHOOK_PORT.
# Its own certificate rotator issues a certificate for the name of a
# Service, so it is off (certManagement.enable: false) and this script
# makes a CA and a serving certificate for IP 127.0.0.1 with openssl, kept
# in trainer/ beside KUBECONFIG (reused by a restart). The controller reads
# them from controller-runtime's default directory under TMPDIR, which
# points there. Leader election is off; the metrics endpoint listens on
# METRICS_ADDR.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

operator_init trainer-controller "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds trainer trainer.kubeflow.org_trainjobs trainer.kubeflow.org_trainingruntimes trainer.kubeflow.org_clustertrainingruntimes
  cluster_log "TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs established"
  ;;
run)
  [ $# -eq 5 ] || usage
  probe=$3 metrics=$4 port=$5
  dir=$(cd "$(dirname "$kubeconfig")" && pwd)/trainer
  certs=$dir/tmp/k8s-webhook-server/serving-certs
  mkdir -p "$certs"
  if [ ! -s "$certs/tls.crt" ] || [ ! -s "$dir/ca.crt" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj "/CN=tally-e2e-trainer-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj "/CN=127.0.0.1" -keyout "$certs/tls.key" -out "$dir/tls.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$dir/ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 3650 -extfile "$dir/ext" -out "$certs/tls.crt.tmp" 2>/dev/null
    mv "$certs/tls.crt.tmp" "$certs/tls.crt"
  fi
  ca=$(base64 -w0 <"$dir/ca.crt")
  # webhook NAME PATH RESOURCE: one webhook entry, for CREATE and UPDATE.
  webhook() {
    cat <<EOW
- name: $1
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    url: https://127.0.0.1:$port$2
    caBundle: $ca
  rules:
  - apiGroups: [trainer.kubeflow.org]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE]
    resources: [$3]
EOW
  }
  {
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: MutatingWebhookConfiguration"
    echo "metadata: {name: defaulter.trainer.kubeflow.org}"
    echo "webhooks:"
    webhook defaulter.trainjob.trainer.kubeflow.org /mutate-trainer-kubeflow-org-v1alpha1-trainjob trainjobs
    echo "---"
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: ValidatingWebhookConfiguration"
    echo "metadata: {name: validator.trainer.kubeflow.org}"
    echo "webhooks:"
    webhook validator.clustertrainingruntime.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime clustertrainingruntimes
    webhook validator.trainingruntime.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-trainingruntime trainingruntimes
    webhook validator.trainjob.trainer.kubeflow.org /validate-trainer-kubeflow-org-v1alpha1-trainjob trainjobs
  } >"$dir/webhooks.yaml"
  k apply -f "$dir/webhooks.yaml" >/dev/null
  cat >"$dir/config.yaml" <<EOF2
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
certManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $port
metrics:
  bindAddress: $metrics
  secureServing: false
health:
  healthProbeBindAddress: $probe
clientConnection:
  qps: 200
  burst: 400
EOF2
  export KUBECONFIG=$kubeconfig TMPDIR=$dir/tmp
  exec "$TOOLS/trainer-controller" --config "$dir/config.yaml" --zap-devel=false --zap-encoder=console --zap-log-level=info
  ;;
*)
  usage
  ;;
esac
