#!/usr/bin/env bash
# Usage: training-operator.sh crds KUBECONFIG
#        training-operator.sh run KUBECONFIG PROBE_ADDR METRICS_ADDR WEBHOOK_PORT
#
# The Kubeflow training operator (v1) of the toolchain, run as a host
# process for PyTorchJobs, as the scheduler and controller manager are.
#
#   crds  installs the PyTorchJob CRD (only it: the training operator's v1
#         MPIJob CRD would stand in the MPI operator's way) and waits until
#         the API server serves it. tally watches the workload kinds the
#         API server serves when it starts, so run this before tally.
#   run   gives the operator what its certificate rotator wants (namespace
#         kubeflow, Secret training-operator-webhook-cert, and that Secret's
#         certificate as files in /tmp/k8s-webhook-server/serving-certs) and
#         then becomes the operator (exec), so the caller's pid is the
#         operator's. Its webhook only validates and stays unregistered. It
#         is ready when PROBE_ADDR/readyz answers 200.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OPERATOR_NAMESPACE=kubeflow
operator_init training-operator "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds training-operator kubeflow.org_pytorchjobs
  cluster_log "PyTorchJob CRD established"
  ;;
run)
  [ $# -eq 5 ] || usage
  k create namespace "$OPERATOR_NAMESPACE" --dry-run=client -o yaml | k apply -f - >/dev/null
  k create secret generic training-operator-webhook-cert -n "$OPERATOR_NAMESPACE" --dry-run=client -o yaml | k apply -f - >/dev/null
  # The rotator fills the Secret and expects to find it mounted as files,
  # as in a pod: copy it to the operator's fixed certificate directory once
  # it holds a certificate.
  certs=/tmp/k8s-webhook-server/serving-certs
  rm -rf "$certs"
  (
    deadline=$((SECONDS + 120))
    until crt=$(k get secret training-operator-webhook-cert -n "$OPERATOR_NAMESPACE" -o 'jsonpath={.data.tls\.crt}' 2>/dev/null) &&
      key=$(k get secret training-operator-webhook-cert -n "$OPERATOR_NAMESPACE" -o 'jsonpath={.data.tls\.key}' 2>/dev/null) &&
      [ -n "$crt" ] && [ -n "$key" ]; do
      [ $SECONDS -lt $deadline ] || { cluster_log "the training operator wrote no certificate in 120s"; exit 1; }
      sleep 0.2
    done
    mkdir -p "$certs"
    base64 -d <<<"$key" >"$certs/tls.key"
    base64 -d <<<"$crt" >"$certs/tls.crt.tmp" && mv "$certs/tls.crt.tmp" "$certs/tls.crt"
  ) </dev/null &
  export KUBECONFIG=$kubeconfig MY_POD_NAMESPACE=$OPERATOR_NAMESPACE
  exec "$TOOLS/training-operator" --enable-scheme=pytorchjob \
    --health-probe-bind-address "$3" --metrics-bind-address "$4" --webhook-server-port "$5" \
    --kube-api-qps 200 --kube-api-burst 400
  ;;
*)
  usage
  ;;
esac
