#!/usr/bin/env bash
# Usage: cert-manager.sh crds KUBECONFIG
#        cert-manager.sh run KUBECONFIG
#
# cert-manager's controllers and cainjector of the toolchain (the main
# built from e2e/toolchain/cert-manager), run as a host process, as the
# scheduler and controller manager are.
#
#   crds  installs cert-manager's CRDs (those of its release) and waits
#         until the API server serves them.
#   run   becomes cert-manager (exec), so the caller's pid is its own: the
#         Issuer controller, the self-signed and CA signers, the approver,
#         the Certificate controllers and the webhook-configuration
#         injectors, in all namespaces, without leader election. It logs
#         "cert-manager started" once every controller runs.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

operator_init cert-manager "$@"

case $cmd in
crds)
  [ $# -eq 2 ] || usage
  install_crds cert-manager cert-manager.io_certificaterequests cert-manager.io_certificates \
    cert-manager.io_clusterissuers cert-manager.io_issuers acme.cert-manager.io_orders acme.cert-manager.io_challenges
  cluster_log "cert-manager's CRDs established"
  ;;
run)
  [ $# -eq 2 ] || usage
  exec "$TOOLS/cert-manager" --kubeconfig "$kubeconfig"
  ;;
*)
  usage
  ;;
esac
