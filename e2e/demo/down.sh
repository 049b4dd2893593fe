#!/usr/bin/env bash
# The other half of `make demo`: stops the demo's tally, training
# operator and Karpenter (make demo KARPENTER=1), deletes the local clusters
# tally-demo and tally-demo-karpenter and removes .demo/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export TOOLS=${TOOLS:-$HOME/.cache/tally/tools-v1.37.0}
DEMO=.demo
# shellcheck source=e2e/demo/lib.sh
. e2e/demo/lib.sh

demo_stop "$DEMO/tally.pid" "$TALLY_MATCH" tally
demo_stop "$DEMO/training-operator.pid" "$OPERATOR_MATCH" "the training operator"
demo_stop "$DEMO/karpenter.pid" "$KARPENTER_MATCH" Karpenter
bash e2e/cluster/down.sh tally-demo
bash e2e/cluster/down.sh tally-demo-karpenter
rm -rf "$DEMO"
echo "demo removed"
