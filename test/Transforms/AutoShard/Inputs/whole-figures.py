#!/usr/bin/env python3
"""Compares the whole-step figures of two --auto-shard outputs of one model
(checks=short and checks=whole): every plan that the first checked on the
whole step (the chosen plan, and each checked alternative not noted as
checked on shortened copies) must have exactly the figures the second
gives it, where the second checked it too. Prints how many plans took
another plan's whole check (whole_checks_shared), how many were compared,
and each that differs.

whole-figures.py SHORT.mlir WHOLE.mlir"""
import sys

from auto_shard_record import record


def whole_figures(rec):
    """Each plan checked on the whole step: name -> (seconds, bytes)."""
    found = {a["plan"]: (a["seconds"], a["bytes"]) for a in rec["alternatives"]
             if a["checked"] and "checked on" not in a["reason"]}
    found[rec["plan"]] = (rec["seconds"], rec["bytes"])
    return found


short = record(sys.argv[1])
whole = whole_figures(record(sys.argv[2]))
print(f"whole checks shared: {short['whole shared']}")
compared = 0
for name, figures in sorted(whole_figures(short).items()):
    if name not in whole:
        continue
    compared += 1
    if figures != whole[name]:
        print(f"off: {name} {figures[0]} s {figures[1]} B vs "
              f"{whole[name][0]} s {whole[name][1]} B")
print(f"compared: {compared}")
