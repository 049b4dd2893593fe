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

usage() {
  sed -n '2,3p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
cmd=$1
kubeconfig=$2
k() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }
[ -x "$TOOLS/ray-operator" ] || { cluster_log "no ray-operator in $TOOLS (run: bash e2e/toolchain/build.sh $TOOLS ray-operator)"; exit 1; }

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  for r in rayclusters rayjobs rayservices; do
    # Server-side: the CRDs are larger than client-side apply's annotation.
    k apply --server-side --force-conflicts -f "$TOOLS/crds/ray-operator/ray.io_$r.yaml" >/dev/null
  done
  deadline=$((SECONDS + 60))
  for r in rayclusters rayjobs rayservices; do
    # kubectl wait fails, rather than waits, while a CRD has no status yet.
    until [ "$(k get crd "$r.ray.io" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]; do
      [ $SECONDS -lt $deadline ] || { cluster_log "CRD $r.ray.io is not established after 60s"; exit 1; }
      sleep 0.2
    done
  done
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
