#!/usr/bin/env bash
# Usage: jobset.sh crds KUBECONFIG
#        jobset.sh run KUBECONFIG PROBE_ADDR METRICS_ADDR WEBHOOK_PORT
#
# JobSet's controller (sigs.k8s.io/jobset) of the toolchain, run as a host
# process for JobSets, as the scheduler and controller manager are.
#
#   crds  installs the JobSet CRD and waits until the API server serves it.
#   run   registers the controller's webhooks with the API server and then
#         becomes the controller (exec), so the caller's pid is the
#         controller's. It is ready when PROBE_ADDR/readyz answers 200.
#
# JobSet's defaults and validation live in its webhooks (failurePolicy
# Fail), so they are registered as in a release: the configurations
# jobset-mutating-webhook-configuration and
# jobset-validating-webhook-configuration, each for JobSets and for the pods
# of JobSets (label jobset.sigs.k8s.io/jobset-name). They call the host
# process at https://127.0.0.1:WEBHOOK_PORT. The controller's own certificate
# rotator would issue a certificate for the name of a Service, which no URL
# of 127.0.0.1 matches, so it is off (internalCertManagement.enable: false)
# and this script makes a CA and a serving certificate for IP 127.0.0.1
# with openssl, kept in jobset/ beside KUBECONFIG (reused by a restart, so
# the registered caBundle stays valid). Leader election is off; the metrics
# endpoint (HTTPS, with the same certificate) listens on METRICS_ADDR.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

operator_init jobset-controller "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds jobset jobset.x-k8s.io_jobsets
  cluster_log "JobSet CRD established"
  ;;
run)
  [ $# -eq 5 ] || usage
  probe=$3 metrics=$4 port=$5
  dir=$(cd "$(dirname "$kubeconfig")" && pwd)/jobset
  mkdir -p "$dir"
  if [ ! -s "$dir/tls.crt" ] || [ ! -s "$dir/ca.crt" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj "/CN=tally-e2e-jobset-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj "/CN=127.0.0.1" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$dir/ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 3650 -extfile "$dir/ext" -out "$dir/tls.crt.tmp" 2>/dev/null
    mv "$dir/tls.crt.tmp" "$dir/tls.crt"
  fi
  ca=$(base64 -w0 <"$dir/ca.crt")
  url="https://127.0.0.1:$port"
  # webhook NAME PATH GROUP RESOURCE OPERATIONS [pods]: one webhook entry.
  webhook() {
    cat <<EOF
- name: $1
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    url: $url$2
    caBundle: $ca
  rules:
  - apiGroups: ["$3"]
    apiVersions: [$([ "$3" = "" ] && echo v1 || echo v1alpha2)]
    operations: [$5]
    resources: [$4]
EOF
    if [ "${6:-}" = pods ]; then
      cat <<EOF
  objectSelector:
    matchExpressions:
    - key: jobset.sigs.k8s.io/jobset-name
      operator: Exists
EOF
    fi
  }
  {
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: MutatingWebhookConfiguration"
    echo "metadata: {name: jobset-mutating-webhook-configuration}"
    echo "webhooks:"
    webhook mjobset.kb.io /mutate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io jobsets CREATE
    webhook mpod.kb.io /mutate--v1-pod "" pods CREATE pods
    echo "---"
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: ValidatingWebhookConfiguration"
    echo "metadata: {name: jobset-validating-webhook-configuration}"
    echo "webhooks:"
    webhook vjobset.kb.io /validate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io jobsets "CREATE, UPDATE"
    webhook vpod.kb.io /validate--v1-pod "" pods CREATE pods
  } >"$dir/webhooks.yaml"
  k apply -f "$dir/webhooks.yaml" >/dev/null
  cat >"$dir/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $port
  certDir: $dir
metrics:
  bindAddress: $metrics
  certDir: $dir
health:
  healthProbeBindAddress: $probe
clientConnection:
  qps: 200
  burst: 400
EOF
  export KUBECONFIG=$kubeconfig
  exec "$TOOLS/jobset-controller" --config "$dir/config.yaml" --zap-devel=false --zap-encoder=console --zap-log-level=info
  ;;
*)
  usage
  ;;
esac
