#!/usr/bin/env python3
"""Summarizes a scheduled step (MLIR on stdin) as the runs of its ops in
order: `G<n>` for n parameter gathers (par.all_gather), `f<k>`/`b<k>` for
a run of layer k's forward/backward ops (ops of no layer are left out)."""
import re
import sys

runs = []
for line in sys.stdin:
    op = re.search(r"= (par\.[a-z_]+)", line)
    if not op:
        continue
    if op.group(1) == "par.all_gather":
        key = "G"
    else:
        layer = re.search(r"par\.layer = (\d+)", line)
        phase = re.search(r"par\.phase<(\w+)>", line)
        if not layer or not phase or phase.group(1) not in ("forward", "backward"):
            continue
        key = phase.group(1)[0] + layer.group(1)
    if runs and runs[-1][0] == key:
        runs[-1][1] += 1
    else:
        runs.append([key, 1])
print(" ".join(k + (str(n) if k == "G" else "") for k, n in runs))
