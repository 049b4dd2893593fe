#!/usr/bin/env bash
# The demo behind `make demo KARPENTER=1`: the GPU training example on GPU
# nodes that an autoscaler makes.
#
# Starts (or reuses) a local kwok cluster "tally-demo-karpenter" with one CPU
# node and no GPU node, and runs on the host, in the background, the training
# operator, Karpenter with its KWOK cloud provider (e2e/cluster/karpenter.sh;
# built into the toolchain the first time) and tally with the GPU training
# example's manifests (examples/gpu-training/) unchanged as its config. A
# NodePool "gpu" makes nodes of the GPU training example's flavor (its label
# and taint) from the instance types of
# e2e/cluster/karpenter-instance-types.json. It then submits the GPU training
# example's PyTorchJob and shows it admitted, Karpenter making a node for it,
# the PyTorchJob finishing, and Karpenter removing the empty node. It shares
# .demo/ (kubeconfig, logs, pid files) and the ports with make demo, so it
# stops that demo's tally and training operator; e2e/demo/down.sh (make
# demo-down) removes both demos.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export TOOLS=${TOOLS:-$HOME/.cache/tally/tools-v1.37.0}
TALLY_BIN=${TALLY_BIN:-$root/bin/tally}
CLUSTER=tally-demo-karpenter
DEMO=.demo
KUBECONFIG_FILE=$DEMO/kubeconfig
NAMESPACE=tally-system
WEBHOOK_PORT=9443
METRICS_ADDR=127.0.0.1:8080
PROBE_ADDR=127.0.0.1:8081
DASHBOARD_ADDR=127.0.0.1:8090
OPERATOR_METRICS_ADDR=127.0.0.1:8082
OPERATOR_WEBHOOK_PORT=9444
# Karpenter takes ports only and listens on every interface.
KARPENTER_PROBE_PORT=8086
KARPENTER_METRICS_PORT=8087

# shellcheck source=e2e/demo/lib.sh
. e2e/demo/lib.sh

# --- tools -------------------------------------------------------------------
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl training-operator karpenter; do
  if [ ! -x "$TOOLS/$b" ]; then
    say "Building the local control plane and Karpenter into $TOOLS (once; Karpenter alone about 2 minutes)"
    bash e2e/toolchain/build.sh "$TOOLS" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl training-operator karpenter
    break
  fi
done
if [ ! -x "$TALLY_BIN" ]; then
  say "Building $TALLY_BIN"
  go build -o "$TALLY_BIN" .
fi
mkdir -p "$DEMO"
stop_tally
stop_operator
stop_karpenter

# --- cluster -----------------------------------------------------------------
say "Starting the local cluster $CLUSTER: one CPU node, no GPU node"
bash e2e/cluster/up.sh "$CLUSTER" "$KUBECONFIG_FILE" e2e/cluster/karpenter-nodes.yaml
k get nodes -L node-type

# --- operators ---------------------------------------------------------------
say "Starting the Kubeflow training operator for PyTorchJobs (log: $DEMO/training-operator.log)"
bash e2e/cluster/training-operator.sh crds "$KUBECONFIG_FILE"
setsid bash e2e/cluster/training-operator.sh run "$KUBECONFIG_FILE" \
  "$OPERATOR_PROBE_ADDR" "$OPERATOR_METRICS_ADDR" "$OPERATOR_WEBHOOK_PORT" \
  >"$DEMO/training-operator.log" 2>&1 </dev/null &
echo $! >"$DEMO/training-operator.pid"
wait_ready 120 "$OPERATOR_PROBE_ADDR" operator_running "the training operator"
k apply -f examples/gpu-training/priority-classes.yaml

say "Starting Karpenter (KWOK provider) with a NodePool of GPU nodes of the GPU training example's flavor (log: $DEMO/karpenter.log)"
bash e2e/cluster/karpenter.sh crds "$KUBECONFIG_FILE"
k apply -f - <<'EOF'
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    metadata:
      labels:
        kueue.x-k8s.io/default-flavor: "true"
    spec:
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [gpu-4x-amd64-linux, gpu-8x-amd64-linux]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      taints:
      - {key: kueue.x-k8s.io/gpu, value: "true", effect: NoSchedule}
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 10s
EOF
setsid bash e2e/cluster/karpenter.sh run "$KUBECONFIG_FILE" "$KARPENTER_PROBE_PORT" "$KARPENTER_METRICS_PORT" \
  >"$DEMO/karpenter.log" 2>&1 </dev/null &
echo $! >"$DEMO/karpenter.pid"
wait_ready 120 "127.0.0.1:$KARPENTER_PROBE_PORT" karpenter_running Karpenter

# --- tally -------------------------------------------------------------------
CONFIG=$DEMO/queues.yaml
for f in resource-flavor cluster-queue local-queue; do
  printf '%s\n' '---'
  cat "examples/gpu-training/$f.yaml"
done >"$CONFIG"
say "Loading the GPU training example's resource-flavor.yaml, cluster-queue.yaml and local-queue.yaml, unchanged, into ConfigMap $NAMESPACE/tally-config"
load_config
start_tally
k create namespace team-a --dry-run=client -o yaml | k apply -f - >/dev/null
ns_managed() { [ "$(k get namespace team-a -o jsonpath='{.metadata.labels.tally\.dev/managed}')" = true ]; }
wait_until 30 "namespace team-a (named by LocalQueue team-a-queue) labelled tally.dev/managed=true" ns_managed
wait_until 30 "service account default in team-a" k get serviceaccount default -n team-a

# --- the GPU training example's PyTorchJob -----------------------------------
k delete -f examples/gpu-training/pytorch-job.yaml --ignore-not-found --wait=true >/dev/null
show() {
  echo
  echo "--- $(date +%T)"
  k get pytorchjob -n team-a pytorch-dist-mnist -L tally.dev/state --no-headers 2>/dev/null || true
  k get nodes -l karpenter.sh/nodepool --no-headers 2>/dev/null \
    -o 'custom-columns=NODE:.metadata.name,TYPE:.metadata.labels.node\.kubernetes\.io/instance-type,GPUS:.status.allocatable.nvidia\.com/gpu' |
    awk '{print "node " $1 " " $2 ", " $3 " GPUs"}' || true
  k get pods -n team-a -o wide --no-headers 2>/dev/null | awk '{print "pod " $1 " " $3 " on " $7}' || true
}
say "Submitting the GPU training example's PyTorchJob unchanged (1 master + 3 workers, 1 GPU each): no node can run it yet"
k apply -f examples/gpu-training/pytorch-job.yaml
pytorchjob_succeeded() {
  [ "$(k get pytorchjob -n team-a pytorch-dist-mnist -o jsonpath='{.status.conditions[?(@.type=="Succeeded")].status}')" = True ]
}
deadline=$((SECONDS + 180))
until pytorchjob_succeeded; do
  show
  [ $SECONDS -lt $deadline ] || die "the GPU training example's PyTorchJob did not succeed in 180s"
  sleep 2
done
show
say "The GPU training example's PyTorchJob Succeeded on Karpenter's node; its Events:"
k describe pytorchjob -n team-a pytorch-dist-mnist | sed -n '/^Events:/,$p'
say "Waiting for Karpenter to remove the empty node (consolidateAfter: 10s)"
no_karpenter_nodes() { [ -z "$(k get nodes -l karpenter.sh/nodepool -o name)" ]; }
started=$SECONDS
until no_karpenter_nodes; do
  [ $((SECONDS - started)) -lt 180 ] || die "Karpenter did not remove its node in 180s"
  sleep 2
done
echo "removed after about $((SECONDS - started))s"
k get nodes -L node-type

cat <<EOF

$(printf '\033[1m')The Karpenter demo cluster is up; tally and Karpenter keep running.$(printf '\033[0m')

  export KUBECONFIG=$root/$KUBECONFIG_FILE
  alias kubectl=$TOOLS/kubectl
  kubectl apply -f examples/gpu-training/pytorch-job.yaml   # (after deleting it) again
  kubectl get nodeclaims,nodes -L karpenter.sh/nodepool,node.kubernetes.io/instance-type
  tail -f .demo/karpenter.log .demo/tally.log

make demo-down removes it all (both demos).
EOF
