#!/usr/bin/env bash
# Usage: down.sh NAME
#
# Stops and deletes the local kwok cluster NAME made by up.sh. Deleting a
# cluster that does not exist is not an error.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ $# -ne 1 ]; then
  echo "usage: $0 NAME" >&2
  exit 2
fi
name=$1
if [ ! -x "$KWOKCTL" ]; then
  cluster_log "no kwokctl in $TOOLS; nothing to delete"
  exit 0
fi
if cluster_exists "$name"; then
  cluster_delete "$name"
  cluster_log "deleted cluster $name"
else
  cluster_log "no cluster $name"
fi
