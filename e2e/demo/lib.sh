# shellcheck shell=bash
# Shared by demo.sh and down.sh. Sourced, not run; expects $DEMO.

# What identifies the demo's processes in their command lines, so that a
# pid reused by another process is never taken for them.
TALLY_MATCH="--cert-dir $DEMO/certs"
OPERATOR_PROBE_ADDR=127.0.0.1:8083
OPERATOR_MATCH=$OPERATOR_PROBE_ADDR

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
