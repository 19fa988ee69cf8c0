#!/usr/bin/env python3
"""Activation bytes per transformer layer (par-opt --report, bf16 mixed
precision) against the formulas of Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (2022), for a GPT
layer with s tokens, micro-batch b, hidden h, a heads, t-way tensor
parallel:

  none             s b h (34 + 5 a s / h)
  tensor parallel  s b h (10 + 24 / t + 5 a s / (h t))
  tensor + sequence parallel      s b h (34 / t + 5 a s / (h t))
  selective (+ sequence parallel) s b h 34 / t
  full             2 s b h         (the kept layer input)

usage: korthikanti.py PAR_OPT
Prints one row per case with par's bytes, the formula's and par's exact
figure from its own accounting (docs/memory.md); exits 1 when par keeps
more than the formula or differs from its own accounting.
"""
import re
import subprocess
import sys
from pathlib import Path

PAR_OPT = sys.argv[1]
GPT = Path(__file__).resolve().parent / "gpt.py"
S, B, H, A = 64, 2, 64, 4
SBH = S * B * H
SCORES = A * S * S * B  # elements of one score-sized tensor


def layer_bytes(t: int, remat: str, unfused: bool, sequence: bool = False) -> int:
    args = [sys.executable, str(GPT), "--layers", "2", "--seq", str(S), "--batch", str(B),
            "--width", str(H), "--heads", str(A), "--vocab", "64"]
    if unfused:
        args.append("--unfused")
    if t > 1:
        args += ["--mesh", f"tp={t}", "--tp", "tp"] + (["--sequence"] if sequence else [])
    mlir = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    flags = ["--par-autodiff=optimizer=adamw precision=bf16"]
    if remat != "none":
        flags.append(f"--par-remat={remat}")
    flags += ["--par-propagate", "--par-partition", "--report", "-o", "/dev/null"]
    run = subprocess.run([PAR_OPT, "-", *flags], input=mlir, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"par-opt failed:\n{run.stderr}")
    found = re.findall(r"^  layers? [0-9, -]+: (\d+) bytes", run.stderr, re.M)
    if not found:
        sys.exit(f"no activations by layer in:\n{run.stderr}")
    return max(int(x) for x in found)


# (name, t, remat, unfused attention, formula in bytes, par's own accounting
# [, sequence parallel])
# par.attention's gradient ops read one f32 log-sum-exp per query row and
# head from the forward pass: 4asb bytes, split over t with the heads.
STATS = 4 * A * S * B
CASES = [
    ("none", 1, "none", False, SBH * (34 + 5 * A * S / H), 32 * SBH + STATS),
    ("none, unfused attention", 1, "none", True, SBH * (34 + 5 * A * S / H),
     32 * SBH + 5 * SCORES),
    ("tensor parallel t=2", 2, "none", False, SBH * (10 + 24 / 2 + 5 * A * S / (H * 2)),
     (8 + 24 / 2) * SBH + STATS / 2),
    ("tensor parallel t=4", 4, "none", False, SBH * (10 + 24 / 4 + 5 * A * S / (H * 4)),
     (8 + 24 / 4) * SBH + STATS / 4),
    ("selective, unfused attention", 1, "selective", True, SBH * 34, 32 * SBH),
    ("tensor + sequence parallel t=2", 2, "none", False, SBH * (34 / 2 + 5 * A * S / (H * 2)),
     32 / 2 * SBH + STATS / 2, True),
    ("tensor + sequence parallel t=4", 4, "none", False, SBH * (34 / 4 + 5 * A * S / (H * 4)),
     32 / 4 * SBH + STATS / 4, True),
    ("selective, sequence parallel t=2", 2, "selective", True, SBH * 34 / 2, 32 / 2 * SBH, True),
    ("full", 1, "full", False, 2 * SBH, 2 * SBH),
    ("full, tensor parallel t=2", 2, "full", False, 2 * SBH, 2 * SBH),
]

failed = False
print(f"s={S} b={B} h={H} a={A}: s*b*h = {SBH}")
print(f"{'case':32} {'par bytes':>10} {'formula':>10} {'par/formula':>12}  own accounting")
for name, t, remat, unfused, formula, own, *sequence in CASES:
    got = layer_bytes(t, remat, unfused, bool(sequence and sequence[0]))
    ok = got <= formula and got == own
    failed |= not ok
    print(f"{name:32} {got:>10} {int(formula):>10} {got / formula:>12.3f}  "
          f"{'=' if got == own else '!='} {int(own)}{'' if ok else '  FAIL'}")
sys.exit(1 if failed else 0)
