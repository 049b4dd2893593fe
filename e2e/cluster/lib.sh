# shellcheck shell=bash disable=SC2034
# Shared settings for the cluster scripts. Sourced, not run.

TOOLS=${TOOLS:-$HOME/.cache/tally/tools-v1.37.0}
KWOKCTL="$TOOLS/kwokctl"
KUBECTL="$TOOLS/kubectl"
CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cluster_log() { printf 'cluster: %s\n' "$*" >&2; }

cluster_require_tools() {
  local b missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl; do
    [ -x "$TOOLS/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    cluster_log "missing in $TOOLS: ${missing[*]} (run: make toolchain TOOLS=$TOOLS)"
    return 1
  fi
}

# cluster_exists NAME: kwokctl knows a cluster of that name.
cluster_exists() {
  "$KWOKCTL" get clusters 2>/dev/null | grep -qx "$1"
}

# cluster_delete NAME: stops the cluster's processes and removes its files.
# kwokctl wants a kubeconfig to remove the context from; give it a scratch
# one so the user's ~/.kube/config is never touched.
cluster_delete() {
  local scratch rc=0
  scratch=$(mktemp)
  "$KWOKCTL" delete cluster --name "$1" --kubeconfig "$scratch" >"$scratch.log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || cat "$scratch.log" >&2
  rm -f "$scratch" "$scratch.log"
  return $rc
}
