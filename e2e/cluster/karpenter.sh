#!/usr/bin/env bash
# Usage: karpenter.sh crds KUBECONFIG
#        karpenter.sh run KUBECONFIG PROBE_PORT METRICS_PORT [INSTANCE_TYPES_FILE]
#
# Karpenter of the toolchain with its KWOK cloud provider
# (sigs.k8s.io/karpenter/kwok), run as a host process against a kwok
# cluster, as the scheduler and controller manager are. For each NodeClaim
# it creates a Node object with the annotation kwok.x-k8s.io/node: fake,
# which is what kwokctl's kwok selects the nodes it runs by (its default
# --manage-nodes-with-annotation-selector), so kwok makes the node Ready
# and runs its pods like the fake nodes of nodes.yaml.
#
#   crds  installs the NodePool, NodeClaim and KWOKNodeClass CRDs and waits
#         until the API server serves them. Install them before Karpenter
#         starts: its readiness check waits for NodePool and NodeClaim.
#   run   becomes Karpenter (exec), so the caller's pid is its pid: no
#         leader election (nor its namespace), its health probes on
#         PROBE_PORT and metrics on METRICS_PORT (both on every interface:
#         Karpenter takes only ports), the instance types of
#         INSTANCE_TYPES_FILE (default: karpenter-instance-types.json next
#         to this script: two GPU types and a CPU one). It has no webhooks.
#         It is ready when PROBE_PORT/readyz answers 200.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

operator_init karpenter "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds karpenter karpenter.sh_nodepools karpenter.sh_nodeclaims karpenter.kwok.sh_kwoknodeclasses
  cluster_log "NodePool, NodeClaim and KWOKNodeClass CRDs established"
  ;;
run)
  [ $# -eq 4 ] || [ $# -eq 5 ] || usage
  types=${5:-$CLUSTER_DIR/karpenter-instance-types.json}
  [ -f "$types" ] || { cluster_log "no such instance types file: $types"; exit 2; }
  export KUBECONFIG=$kubeconfig
  export DISABLE_LEADER_ELECTION=true HEALTH_PROBE_PORT=$3 METRICS_PORT=$4 INSTANCE_TYPES_FILE_PATH=$types
  exec "$TOOLS/karpenter"
  ;;
*)
  usage
  ;;
esac
