#!/usr/bin/env python3
"""Compares two --auto-shard outputs of one model, planned with checks=short
and with checks=whole: the same plan with the same figures (the chosen plan
is always checked whole), checks made on shortened copies only in the first,
and every alternative both checked within the given relative tolerance.

shortened-agree.py SHORT.mlir WHOLE.mlir TOLERANCE"""
import sys

from auto_shard_record import record

short, whole, tolerance = record(sys.argv[1]), record(sys.argv[2]), float(sys.argv[3])
same = (short["plan"], short["seconds"], short["bytes"]) == \
    (whole["plan"], whole["seconds"], whole["bytes"])
print(f"chosen: {'same' if same else 'different'} ({short['plan']})")
print(f"shortened checks: {'some' if short['shortened'] else 'none'} with short, "
      f"{'some' if whole['shortened'] else 'none'} with whole")
noted = sum("checked on 3 and 4 of its" in a["reason"] for a in short["alternatives"])
print(f"alternatives noted as checked on shortened copies: {'some' if noted else 'none'}")
staged = sum("layers a stage of its" in a["reason"] and "pipeline" in a["plan"]
             for a in short["alternatives"])
print(f"pipelined alternatives noted as checked on shortened copies: "
      f"{'some' if staged else 'none'}")
others = {a["plan"]: a for a in whole["alternatives"] if a["checked"]}
compared, off = 0, []
for a in short["alternatives"]:
    b = others.get(a["plan"])
    if not a["checked"] or b is None:
        continue
    compared += 1
    for key in ("seconds", "bytes"):
        error = abs(a[key] - b[key]) / b[key]
        if error > tolerance:
            off.append(f"{a['plan']} {key} {a[key]} vs {b[key]} ({error:.2%})")
print(f"alternatives compared: {'some' if compared else 'none'}")
for line in off:
    print("off:", line)
print("agree" if same and not off else "disagree")
