#!/usr/bin/env bash
# The main job on the bundled example: installs, builds, then compiles a
# transformer block (embedding, attention with grouped KV heads, MLP, loss)
# for a dp=2 x tp=4 mesh: propagates the three hand annotations to every
# tensor and prints the plan summary and the sharded IR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PAR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

model="${1:-$root/examples/transformer-block/block.mlir}"
mesh="${2:-dp=2,tp=4}"
echo
echo "== par-opt $(basename "$model") --mesh=$mesh --par-propagate --par-summary =="
"$build/bin/par-opt" "$model" --mesh="$mesh" --par-propagate --par-summary
echo
echo "== par-opt $(basename "$model") --mesh=$mesh --par-propagate --par-partition --par-comm-report =="
"$build/bin/par-opt" "$model" --mesh="$mesh" --par-propagate --par-partition --par-comm-report
