#!/usr/bin/env bash
# The main job on the bundled example: installs, builds, then compiles a
# transformer block (embedding, attention with grouped KV heads, MLP, loss)
# for a dp=2 x tp=4 mesh: propagates the three hand annotations to every
# tensor, prints the plan summary and the collectives of the per-device
# program, then runs it with par-run on 8 ranks over the bytes of README.md
# and checks the loss against a one-rank run of the unsharded program.
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

program="${TMPDIR:-/tmp}/par-demo.parprog"
single="${TMPDIR:-/tmp}/par-demo-1.parprog"
echo
echo "== par-opt ... --par-partition --emit-program=$program; par-run on $mesh =="
"$build/bin/par-opt" "$model" --mesh="$mesh" --par-propagate --par-partition \
  --emit-program="$program" -o /dev/null
"$build/bin/par-run" "$program" --steps 5 --data "$root/README.md" \
  --dump-outputs "$program.out"
echo
echo "== the same model unsharded, on one rank =="
"$build/bin/par-opt" "$model" --mesh="$mesh" --emit-program="$single" -o /dev/null
"$build/bin/par-run" "$single" --steps 5 --data "$root/README.md" --log-every 5 \
  --dump-outputs "$single.out"
python3 "$root/test/par-run/compare-dumps.py" "$single.out" "$program.out"
