#!/usr/bin/env bash
# Usage: ray-operator.sh crds KUBECONFIG
#        ray-operator.sh run KUBECONFIG PROBE_ADDR METRICS_ADDR
#
# KubeRay's operator of the toolchain, run as a host process for RayJobs,
# RayClusters and RayServices, as the scheduler and controller manager are.
#
#   crds  installs the RayCluster, RayJob and RayService CRDs (the operator
#         watches all three and does not start without them) and waits
#         until the API server serves them.
#   run   becomes the operator (exec), so the caller's pid is the
#         operator's: all namespaces, no leader election, no batch
#         scheduler, no webhook, RayCronJobs off (their feature gate's
#         default). It is ready when PROBE_ADDR/readyz answers 200.
#
# The simulated nodes run no Ray: a RayJob's cluster comes up and its
# submitter Job finishes, but the operator never reaches the cluster's
# dashboard, so the RayJob ends Failed (see e2e/operators_test.go).
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

operator_init ray-operator "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds ray-operator ray.io_rayclusters ray.io_rayjobs ray.io_rayservices
  cluster_log "RayCluster, RayJob and RayService CRDs established"
  ;;
run)
  [ $# -eq 4 ] || usage
  export KUBECONFIG=$kubeconfig
  exec "$TOOLS/ray-operator" --health-probe-bind-address "$3" --metrics-addr "$4" \
    --enable-leader-election=false --log-stdout-encoder console --qps 200 --burst 400
  ;;
*)
  usage
  ;;
esac
