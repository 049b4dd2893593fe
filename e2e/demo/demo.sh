#!/usr/bin/env bash
# The demo behind `make demo`.
#
# Starts (or reuses) a local kwok cluster "tally-demo", runs tally against it
# in the background with self-signed certificates and registered webhooks,
# loads examples/demo/queues.yaml with the GPU training example's ClusterQueue
# and LocalQueue, binds namespace team-a by its LocalQueues and team-b by
# annotation, and submits the plain Jobs of e2e/demo/jobs/ and the GPU
# training example's PyTorchJob (examples/gpu-training/pytorch-job.yaml, run
# by the Kubeflow training operator). It then shows them queue, borrow, get
# preempted and finish, and leaves everything running:
#   .demo/kubeconfig              the cluster's kubeconfig
#   .demo/tally.log               tally's log (pid in .demo/tally.pid)
#   .demo/training-operator.log   the training operator's log (pid in
#                                 .demo/training-operator.pid)
# Running it again restarts tally and re-applies the examples and Jobs.
# e2e/demo/down.sh (make demo-down) removes it all.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export TOOLS=${TOOLS:-$HOME/.cache/tally/tools-v1.37.0}
TALLY_BIN=${TALLY_BIN:-$root/bin/tally}
CLUSTER=tally-demo
DEMO=.demo
KUBECONFIG_FILE=$DEMO/kubeconfig
NAMESPACE=tally-system
WEBHOOK_PORT=9443
METRICS_ADDR=127.0.0.1:8080
PROBE_ADDR=127.0.0.1:8081
DASHBOARD_ADDR=127.0.0.1:8090
OPERATOR_METRICS_ADDR=127.0.0.1:8082
OPERATOR_WEBHOOK_PORT=9444
WAIT_SECONDS=${DEMO_WAIT_SECONDS:-300}
JOBS_DIR=e2e/demo/jobs
SELECTOR=app.kubernetes.io/part-of=tally-demo

# shellcheck source=e2e/demo/lib.sh
. e2e/demo/lib.sh
# KARPENTER=1 (make demo KARPENTER=1): the GPU training example's PyTorchJob
# on GPU nodes that Karpenter makes, instead (e2e/demo/karpenter.sh).
[ "${KARPENTER:-}" != 1 ] || exec bash e2e/demo/karpenter.sh

# --- tools -------------------------------------------------------------------
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl training-operator; do
  if [ ! -x "$TOOLS/$b" ]; then
    say "Building the local control plane into $TOOLS (once; about 10 minutes)"
    bash e2e/toolchain/build.sh "$TOOLS"
    break
  fi
done
if [ ! -x "$TALLY_BIN" ]; then
  say "Building $TALLY_BIN"
  go build -o "$TALLY_BIN" .
fi
mkdir -p "$DEMO"

# --- cluster -----------------------------------------------------------------
say "Starting the local cluster $CLUSTER (real API server, controller manager and scheduler; kwok nodes)"
bash e2e/cluster/up.sh "$CLUSTER" "$KUBECONFIG_FILE"
# Two racks of GPU nodes for the topology step (examples/topology/).
k apply -f examples/topology/nodes.yaml >/dev/null
k get nodes -L kueue.x-k8s.io/default-flavor,node-type,cloud.provider.com/topology-rack

# --- training operator ---------------------------------------------------------
# Its CRD is served before tally starts: tally watches the workload kinds
# the API server serves when it starts.
stop_operator
say "Starting the Kubeflow training operator for PyTorchJobs (log: $DEMO/training-operator.log)"
bash e2e/cluster/training-operator.sh crds "$KUBECONFIG_FILE"
setsid bash e2e/cluster/training-operator.sh run "$KUBECONFIG_FILE" \
  "$OPERATOR_PROBE_ADDR" "$OPERATOR_METRICS_ADDR" "$OPERATOR_WEBHOOK_PORT" \
  >"$DEMO/training-operator.log" 2>&1 </dev/null &
echo $! >"$DEMO/training-operator.pid"
wait_ready 120 "$OPERATOR_PROBE_ADDR" operator_running "the training operator"
k apply -f examples/gpu-training/priority-classes.yaml

# --- config ------------------------------------------------------------------
stop_tally
# The demo's queues, then the GPU training example's ClusterQueue and
# LocalQueue unchanged (its ResourceFlavor is the demo's nvidia-gpu-flavor,
# with the same labels).
CONFIG=$DEMO/queues.yaml
{
  cat examples/demo/queues.yaml
  for f in gpu-training/cluster-queue gpu-training/local-queue topology/queues; do
    printf '%s\n' '---'
    cat "examples/$f.yaml"
  done
} >"$CONFIG"
say "Loading examples/demo/queues.yaml, the GPU training example's cluster-queue.yaml and local-queue.yaml, and examples/topology/queues.yaml into ConfigMap $NAMESPACE/tally-config"
load_config

# --- tally -------------------------------------------------------------------
start_tally
echo "tally is ready (pid $(cat "$DEMO/tally.pid"))"
# Re-apply now that the validating webhook is up, so it checks the config too.
load_config >/dev/null

# --- namespaces --------------------------------------------------------------
say "Binding namespaces: team-a by its LocalQueues (default -> team-a-cq, team-a-queue -> cluster-queue-a), team-b by annotation (-> team-b-cq), team-c by its LocalQueue (tas-queue -> tas-cq)"
for t in a b c; do
  k create namespace "team-$t" --dry-run=client -o yaml | k apply -f - >/dev/null
done
# team-a has no annotation: the LocalQueue documents of the config name it.
k annotate namespace team-a tally.dev/cluster-queue- >/dev/null 2>&1 || true
k annotate namespace team-b --overwrite tally.dev/cluster-queue=team-b-cq
ns_managed() { [ "$(k get namespace "$1" -o jsonpath='{.metadata.labels.tally\.dev/managed}')" = true ]; }
for t in a b c; do
  # The Job webhook only sees namespaces with this label.
  wait_until 30 "namespace team-$t labelled tally.dev/managed=true" ns_managed "team-$t"
  wait_until 30 "service account default in team-$t" k get serviceaccount default -n "team-$t"
done
k get namespaces team-a team-b team-c -L tally.dev/cluster-queue,tally.dev/managed

# --- jobs --------------------------------------------------------------------
if [ -n "$(k get jobs -A -l "$SELECTOR" -o name)" ]; then
  say "Removing the Jobs of the previous run"
  k delete jobs -A -l "$SELECTOR" --cascade=foreground --wait=true >/dev/null
fi
k delete -f examples/gpu-training/pytorch-job.yaml -f examples/topology/pytorch-job.yaml --ignore-not-found --wait=true >/dev/null

count_state() { # NAMESPACE STATE: how many demo Jobs have that tally.dev/state
  k get jobs -n "$1" -l "$SELECTOR,tally.dev/state=$2" -o name | wc -l
}
admitted_at_least() { [ "$(count_state "$1" admitted)" -ge "$2" ]; }

show() {
  echo
  echo "--- $(date +%T)  kubectl get jobs -A -L tally.dev/state,tally.dev/cluster-queue"
  k get jobs -A -l "$SELECTOR" -L tally.dev/state,tally.dev/cluster-queue
}

say "Submitting team A's eight 1-GPU training Jobs and the CPU Jobs (plain batch/v1, no labels: team A's go to its LocalQueue default)"
k apply -f "$JOBS_DIR/10-team-a-training.yaml" -f "$JOBS_DIR/20-cpu.yaml"
say "Submitting a Job labelled kueue.x-k8s.io/queue-name: team-a-queue, as in the GPU training example (-> cluster-queue-a, 7 of its 10 GPUs)"
k apply -f "$JOBS_DIR/50-team-a-queue-name.yaml"
say "Submitting the GPU training example's PyTorchJob unchanged (1 master + 3 workers, 1 GPU each, to team-a-queue): it waits until all four pods fit"
k apply -f examples/gpu-training/pytorch-job.yaml
wait_until 60 "tally admitting team A's Jobs" admitted_at_least team-a 6
show

say "Submitting team B's three 2-GPU training Jobs: team B takes back what team A borrowed"
k apply -f "$JOBS_DIR/30-team-b-training.yaml"
wait_until 60 "tally admitting team B's Jobs" admitted_at_least team-b 1
show
say "tally status: each ClusterQueue's Jobs, usage, quota and borrowing"
"$TALLY_BIN" status --kubeconfig "$KUBECONFIG_FILE" --tally-namespace "$NAMESPACE"

say "Submitting an urgent 2-GPU Job for team A (tally.dev/priority-class: high)"
k apply -f "$JOBS_DIR/40-team-a-urgent.yaml"

say "Waiting for every Job to finish (at most ${WAIT_SECONDS}s)"
total=$(k get jobs -A -l "$SELECTOR" -o name | wc -l)
deadline=$((SECONDS + WAIT_SECONDS))
last_print=-100
while :; do
  status=$(k get jobs -A -l "$SELECTOR" \
    -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.conditions[?(@.type=="Complete")].status} {.status.conditions[?(@.type=="Failed")].status}{"\n"}{end}')
  done_count=$(awk '$2 == "True"' <<<"$status" | wc -l)
  failed=$(awk '$2 != "True" && $3 == "True" {print $1}' <<<"$status")
  [ -z "$failed" ] || { show; die "Jobs failed: $failed"; }
  if [ "$done_count" -eq "$total" ]; then
    break
  fi
  if [ $((SECONDS - last_print)) -ge 5 ]; then
    show
    echo "($done_count of $total complete)"
    last_print=$SECONDS
  fi
  if [ $SECONDS -ge $deadline ]; then
    show
    die "only $done_count of $total Jobs complete after ${WAIT_SECONDS}s"
  fi
  sleep 1
done
show
say "All $total Jobs are Complete"

pytorchjob_succeeded() {
  [ "$(k get pytorchjob -n team-a pytorch-dist-mnist -o jsonpath='{.status.conditions[?(@.type=="Succeeded")].status}')" = True ]
}
wait_until 120 "the GPU training example's PyTorchJob succeeding" pytorchjob_succeeded
say "kubectl get pytorchjobs -n team-a -L tally.dev/state,tally.dev/cluster-queue"
k get pytorchjobs -n team-a -L tally.dev/state,tally.dev/cluster-queue
say "kubectl describe pytorchjob -n team-a pytorch-dist-mnist (its Events)"
k describe pytorchjob -n team-a pytorch-dist-mnist | sed -n '/^Events:/,$p'

# --- one Job that waited -------------------------------------------------------
# The Job with the latest Preempted Event, else the latest that waited for quota.
waited=""
for reason in Preempted Pending; do
  waited=$(k get events -n team-a --field-selector "reason=$reason,involvedObject.kind=Job" \
    --sort-by=.lastTimestamp -o jsonpath='{.items[-1:].involvedObject.name}' 2>/dev/null || true)
  [ -z "$waited" ] || break
done
waited=${waited:-train-a-8}
say "kubectl describe job -n team-a $waited"
k describe job -n team-a "$waited"

# --- topology -------------------------------------------------------------------
say "Submitting a PyTorchJob whose master and workers ask for one rack (examples/topology/pytorch-job.yaml: Kueue's podset-required-topology, 4 pods of 1 GPU)"
k apply -f examples/topology/pytorch-job.yaml
rack_admitted() {
  [ "$(k get pytorchjob -n team-c pytorch-one-rack -o jsonpath='{.metadata.labels.tally\.dev/state}')" = admitted ]
}
wait_until 60 "tally admitting the PyTorchJob into one rack" rack_admitted
say "tally explain -n team-c pytorchjob/pytorch-one-rack: where its pod sets run"
"$TALLY_BIN" explain --kubeconfig "$KUBECONFIG_FILE" --tally-namespace "$NAMESPACE" -n team-c pytorchjob/pytorch-one-rack
rack_pods_bound() {
  [ "$(k get pods -n team-c -o jsonpath='{range .items[?(@.spec.nodeName)]}x{end}')" = xxxx ]
}
wait_until 60 "its four pods bound to nodes" rack_pods_bound
say "Its pods, and the racks of their nodes: all four on rack r1, the tightest that holds them"
k get pods -n team-c -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName
k get nodes -l cloud.provider.com/node-group=tas -L cloud.provider.com/topology-rack
racks=$(for n in $(k get pods -n team-c -o jsonpath='{.items[*].spec.nodeName}'); do
  k get node "$n" -o jsonpath='{.metadata.labels.cloud\.provider\.com/topology-rack}{"\n"}'
done | sort -u | tr '\n' ' ')
[ "$racks" = "r1 " ] || die "the PyTorchJob's pods ran in racks $racks, not all in r1"

cat <<EOF

$(printf '\033[1m')The demo cluster is up and tally keeps running.$(printf '\033[0m')
Dashboard: http://$DASHBOARD_ADDR/

  export KUBECONFIG=$root/$KUBECONFIG_FILE
  alias kubectl=$TOOLS/kubectl          # a kubectl matching the v1.37 API server
  kubectl get jobs -A -L tally.dev/state,tally.dev/cluster-queue
  kubectl describe job -n team-a $waited
  kubectl get pytorchjobs -n team-a -L tally.dev/state
  kubectl describe pytorchjob -n team-a pytorch-dist-mnist
  bin/tally explain -n team-c pytorchjob/pytorch-one-rack   # its pods' rack
  bin/tally status
  bin/tally explain -n team-a $waited   # where a Job stands, and when it may start
  kubectl get events -n team-a --sort-by=.lastTimestamp
  tail -f .demo/tally.log .demo/training-operator.log

Queues: examples/demo/queues.yaml and the GPU training example's ClusterQueue and LocalQueue
(examples/gpu-training/), in ConfigMap $NAMESPACE/tally-config
(edit it with kubectl edit configmap -n $NAMESPACE tally-config).
Bind another namespace: kubectl annotate ns NAME tally.dev/cluster-queue=team-a-cq,
or add a LocalQueue document that names it to the config.

Run make demo again to restart tally and re-submit the Jobs; make demo-down removes it all.
EOF
