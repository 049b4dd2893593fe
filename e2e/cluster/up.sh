#!/usr/bin/env bash
# Usage: up.sh NAME KUBECONFIG_OUT [NODES_FILE]
#
# Creates (or reuses, when it already answers) a local kwok cluster NAME with
# a real etcd, kube-apiserver, kube-controller-manager and kube-scheduler run
# as host processes from $TOOLS, writes its kubeconfig to KUBECONFIG_OUT and
# applies the fake nodes of NODES_FILE (default: nodes.yaml next to this
# script). Job pods finish after the duration in their annotation
# tally.dev/e2e-runtime (default 1s); see stages.yaml.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 NAME KUBECONFIG_OUT [NODES_FILE]" >&2
  exit 2
fi
name=$1
kubeconfig=$2
nodes=${3:-$CLUSTER_DIR/nodes.yaml}
[ -f "$nodes" ] || { cluster_log "no such nodes file: $nodes"; exit 2; }
cluster_require_tools

mkdir -p "$(dirname "$kubeconfig")"
start=$(date +%s)

if cluster_exists "$name"; then
  "$KWOKCTL" get kubeconfig --name "$name" >"$kubeconfig.tmp" && mv "$kubeconfig.tmp" "$kubeconfig"
  if "$KUBECTL" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    cluster_log "reusing running cluster $name"
  else
    cluster_log "cluster $name exists but does not answer; recreating it"
    cluster_delete "$name" || true
  fi
fi

if ! cluster_exists "$name"; then
  cluster_log "creating cluster $name"
  createlog=$(mktemp)
  if ! "$KWOKCTL" create cluster --name "$name" --runtime binary \
    --kubeconfig "" \
    --config "$CLUSTER_DIR/stages.yaml" \
    --etcd-binary "$TOOLS/etcd" \
    --kube-apiserver-binary "$TOOLS/kube-apiserver" \
    --kube-controller-manager-binary "$TOOLS/kube-controller-manager" \
    --kube-scheduler-binary "$TOOLS/kube-scheduler" \
    --kwok-controller-binary "$TOOLS/kwok" \
    --disable-qps-limits \
    --wait 2m >"$createlog" 2>&1; then
    cat "$createlog" >&2
    rm -f "$createlog"
    cluster_log "kwokctl create cluster $name failed; see ${KWOK_WORKDIR:-$HOME/.kwok}/clusters/$name/logs"
    exit 1
  fi
  rm -f "$createlog"
fi

"$KWOKCTL" get kubeconfig --name "$name" >"$kubeconfig.tmp"
mv "$kubeconfig.tmp" "$kubeconfig"
k() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }

# The API server answers before every controller has started; wait for the
# pieces a Job needs.
deadline=$((SECONDS + 120))
until k get --raw /readyz >/dev/null 2>&1 && k get serviceaccount default -n default >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { cluster_log "cluster $name not ready after 120s"; exit 1; }
  sleep 0.5
done
k apply -f "$nodes" >/dev/null
k wait --for=condition=Ready node --all --timeout=120s >/dev/null
cluster_log "cluster $name ready in $(( $(date +%s) - start ))s; kubeconfig $kubeconfig"
