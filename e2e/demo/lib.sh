# shellcheck shell=bash
# Shared by demo.sh, karpenter.sh and down.sh. Sourced, not run; expects
# $DEMO (and, for k, $TOOLS and $KUBECONFIG_FILE).

# What identifies the demo's processes in their command lines, so that a
# pid reused by another process is never taken for them.
TALLY_MATCH="--cert-dir $DEMO/certs"
OPERATOR_PROBE_ADDR=127.0.0.1:8083
OPERATOR_MATCH=$OPERATOR_PROBE_ADDR
KARPENTER_MATCH=$TOOLS/karpenter

# demo_running PIDFILE MATCH: the process of PIDFILE runs, with MATCH in
# its command line.
demo_running() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "$2"
}

# demo_stop PIDFILE MATCH WHAT: stops that process (SIGTERM, then SIGKILL
# after 10 s) and removes PIDFILE.
demo_stop() {
  local pid
  if demo_running "$1" "$2"; then
    pid=$(cat "$1")
    echo "stopping $3 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() {
  printf '\ndemo: FAILED: %s\n' "$*" >&2
  if [ -f "$DEMO/tally.log" ]; then
    printf '\nlast lines of %s:\n' "$DEMO/tally.log" >&2
    tail -n 30 "$DEMO/tally.log" >&2
  fi
  exit 1
}
k() { "$TOOLS/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what: not true after ${limit}s"
    sleep 0.5
  done
}

# http_ok HOST:PORT PATH: a GET answers 200. Uses curl when there is one.
http_ok() {
  local host=${1%:*} port=${1##*:} line
  if command -v curl >/dev/null; then
    curl -fsS -o /dev/null --max-time 2 "http://$1$2"
    return
  fi
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$host" >&3
  read -r -t 2 line <&3 || true
  exec 3<&- 3>&-
  [[ $line == *" 200 "* ]]
}

# wait_ready SECONDS HOST:PORT RUNNING WHAT: polls /readyz until it answers
# 200; dies if the RUNNING check fails first or the time runs out.
wait_ready() {
  local deadline=$((SECONDS + $1))
  until http_ok "$2" /readyz 2>/dev/null; do
    "$3" || die "$4 exited during start-up (see its log in $DEMO)"
    [ $SECONDS -lt $deadline ] || die "$4 not ready after $1s (http://$2/readyz)"
    sleep 0.3
  done
}

tally_running() { demo_running "$DEMO/tally.pid" "$TALLY_MATCH"; }
stop_tally() { demo_stop "$DEMO/tally.pid" "$TALLY_MATCH" tally; }
operator_running() { demo_running "$DEMO/training-operator.pid" "$OPERATOR_MATCH"; }
stop_operator() { demo_stop "$DEMO/training-operator.pid" "$OPERATOR_MATCH" "the training operator"; }
karpenter_running() { demo_running "$DEMO/karpenter.pid" "$KARPENTER_MATCH"; }
stop_karpenter() { demo_stop "$DEMO/karpenter.pid" "$KARPENTER_MATCH" Karpenter; }

# load_config puts the config file $CONFIG into ConfigMap
# $NAMESPACE/tally-config.
load_config() {
  k create namespace "$NAMESPACE" --dry-run=client -o yaml | k apply -f - >/dev/null
  k create configmap tally-config -n "$NAMESPACE" --from-file=queues.yaml="$CONFIG" \
    --dry-run=client -o yaml | k apply -f -
}

# start_tally starts tally in the background, logging to $DEMO/tally.log,
# and waits until it is ready.
start_tally() {
  say "Starting tally (log: $DEMO/tally.log)"
  setsid "$TALLY_BIN" serve --kubeconfig "$KUBECONFIG_FILE" \
    --webhook-port "$WEBHOOK_PORT" --webhook-url "https://127.0.0.1:$WEBHOOK_PORT" --cert-dir "$DEMO/certs" \
    --metrics-bind-address "$METRICS_ADDR" --health-probe-bind-address "$PROBE_ADDR" \
    --dashboard-bind-address "$DASHBOARD_ADDR" \
    >"$DEMO/tally.log" 2>&1 </dev/null &
  echo $! >"$DEMO/tally.pid"
  wait_ready 60 "$PROBE_ADDR" tally_running tally
}
