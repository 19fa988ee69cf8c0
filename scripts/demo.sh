#!/usr/bin/env bash
# The main job: installs dependencies, builds par, then trains GPT-tiny (the
# Python frontend's two-layer GPT-2) on 8 CPU ranks over a pp=2 x tp=2 x
# dp=2 mesh: par-opt builds the training step (gradients, clipping, AdamW
# with a warm-up + cosine schedule), splits its layers into two pipeline
# stages (1F1B over 2 micro-batches), propagates the few hand annotations,
# partitions each stage and plans its memory; par-run trains it for 80 steps
# over the bundled public-domain text, printing loss, tokens/s, measured vs
# planned memory per step and stage, and the bubble; the same step on one
# rank must give the same losses. `--mesh dp=2,sp=2,tp=2` is the named
# example without a pipeline.
# Extra arguments go to examples/gpt-tiny/train.py (e.g. --steps 200).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PAR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
echo
cd "$root"
PAR_BUILD_DIR="$build" python3 examples/gpt-tiny/train.py "$@"
