#!/usr/bin/env bash
# The other half of `make demo`: stops the demo's tally and training
# operator, deletes the local cluster tally-demo and removes .demo/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export TOOLS=${TOOLS:-$HOME/.cache/tally/tools-v1.37.0}
DEMO=.demo

if [ -f "$DEMO/tally.pid" ]; then
  pid=$(cat "$DEMO/tally.pid")
  # Only the process the demo started: it runs with the demo's cert dir.
  if [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "--cert-dir $DEMO/certs"; then
    echo "stopping tally (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
fi
if [ -f "$DEMO/training-operator.pid" ]; then
  pid=$(cat "$DEMO/training-operator.pid")
  # Only the process the demo started: it serves its probe where the demo's does.
  if [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q -- "127.0.0.1:8083"; then
    echo "stopping the training operator (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
fi
bash e2e/cluster/down.sh tally-demo
rm -rf "$DEMO"
echo "demo removed"
