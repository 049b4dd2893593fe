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

# operator_init TOOL "$@": the start of an operator's script (jobset.sh,
# mpi-operator.sh, ray-operator.sh, training-operator.sh). It defines
# usage (lines 2 and 3 of the script), sets cmd and kubeconfig from the
# first two arguments and k() to kubectl on that kubeconfig, and fails
# when TOOLS lacks the operator's binary TOOL.
operator_init() {
  local tool=$1
  shift
  script=${BASH_SOURCE[-1]}
  usage() {
    sed -n '2,3p' "$script" | sed 's/^# *//' >&2
    exit 2
  }
  [ $# -ge 2 ] || usage
  cmd=$1
  kubeconfig=$2
  k() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }
  [ -x "$TOOLS/$tool" ] || { cluster_log "no $tool in $TOOLS (run: bash e2e/toolchain/build.sh $TOOLS $tool)"; exit 1; }
}

# install_crds DIR NAME...: applies each CRD DIR/NAME.yaml of the
# toolchain's crds/ (server-side: they are larger than client-side apply's
# annotation) and waits until the API server serves each.
install_crds() {
  local dir=$TOOLS/crds/$1 f crd
  shift
  for f in "$@"; do
    k apply --server-side --force-conflicts -f "$dir/$f.yaml" >/dev/null
  done
  for f in "$@"; do
    crd=${f#*_}.${f%%_*}
    wait_established "$crd"
  done
}

# wait_established CRD: waits until the API server serves the CRD
# (kubectl wait fails, rather than waits, while it has no status yet).
wait_established() {
  local deadline=$((SECONDS + 60))
  until [ "$(k get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]; do
    [ $SECONDS -lt $deadline ] || { cluster_log "CRD $1 is not established after 60s"; exit 1; }
    sleep 0.2
  done
}
