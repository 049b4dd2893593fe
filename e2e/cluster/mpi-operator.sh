#!/usr/bin/env bash
# Usage: mpi-operator.sh crds KUBECONFIG
#        mpi-operator.sh run KUBECONFIG MONITORING_PORT
#
# The Kubeflow MPI operator (v2) of the toolchain, run as a host process for
# MPIJobs of kubeflow.org/v2beta1, as the scheduler and controller manager
# are.
#
#   crds  installs the MPIJob CRD of kubeflow.org/v2beta1 (the training
#         operator's v1 MPIJob CRD has the same name, and this one replaces
#         it) and waits until the API server serves it. The operator exits
#         at its start when the CRD is not served.
#   run   makes the namespace of its leader election Lease (mpi-operator)
#         and then becomes the operator (exec), so the caller's pid is the
#         operator's. It watches MPIJobs in all namespaces, without gang
#         scheduling; its metrics listen on MONITORING_PORT of every
#         address. It is ready when its log says "Started workers".
#
# The operator cannot be told where to answer its health check: it listens
# on :8080 (all addresses), and exits when that port is taken. So one runs
# at a time on a machine: run holds /tmp/tally-mpi-operator.lock for the
# operator's life and fails at once when another holds it. Leader election
# cannot be turned off either: it takes the Lease mpi-operator/mpi-operator
# (15s) and does not release it when it stops, so a restarted operator
# waits until the old Lease expires.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OPERATOR_NAMESPACE=mpi-operator
operator_init mpi-operator "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds mpi-operator kubeflow.org_mpijobs
  # A replaced v1 CRD is established already: wait for v2beta1 too.
  deadline=$((SECONDS + 60))
  until k get --raw /apis/kubeflow.org/v2beta1 2>/dev/null | grep -q '"mpijobs"'; do
    [ $SECONDS -lt $deadline ] || { cluster_log "the MPIJob CRD (v2beta1) is not established after 60s"; exit 1; }
    sleep 0.2
  done
  cluster_log "MPIJob CRD (v2beta1) established"
  ;;
run)
  [ $# -eq 3 ] || usage
  exec 8>/tmp/tally-mpi-operator.lock
  flock -n 8 || { cluster_log "another MPI operator runs on this machine (it holds /tmp/tally-mpi-operator.lock and port 8080)"; exit 1; }
  k create namespace "$OPERATOR_NAMESPACE" --dry-run=client -o yaml | k apply -f - >/dev/null
  export KUBECONFIG=$kubeconfig
  # The lock's descriptor stays open in the operator, which holds it until
  # it exits.
  exec "$TOOLS/mpi-operator" --kubeConfig "$kubeconfig" --lock-namespace "$OPERATOR_NAMESPACE" \
    --monitoring-port "$3" --kube-api-qps 200 --kube-api-burst 400
  ;;
*)
  usage
  ;;
esac
