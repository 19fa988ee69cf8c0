#!/usr/bin/env bash
# Runs the runtime benchmarks of an existing build; builds nothing.
#
#   bench/runtime/run.sh [BUILD_DIR]     (default: build/ in the repository)
#
# The collectives run on 2 and 4 ranks of this machine through shared
# memory (btl self,vader). --oversubscribe lets 4 ranks share fewer cores;
# the timings then include the ranks taking turns on the cores.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
bin=$build/bin
mpirun=${MPIRUN:-mpirun}

for exe in par-gemm-bench par-collectives-bench par-checkpoint-bench; do
  if [[ ! -x $bin/$exe ]]; then
    echo "run.sh: $bin/$exe not found (build it: ninja -C $build $exe)" >&2
    exit 1
  fi
done

echo "### GEMM: par::rt::dot vs cblas_sgemm"
"$bin/par-gemm-bench"

for np in 2 4; do
  echo
  echo "### Collectives: $np ranks"
  "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,vader \
    -np "$np" "$bin/par-collectives-bench"
done

echo
echo "### Checkpoints: save and load vs raw file I/O (4 shards)"
"$bin/par-checkpoint-bench" "${PAR_BENCH_DIR:-${TMPDIR:-/tmp}}"
