#!/usr/bin/env python3
"""Compares two `par-run --dump-outputs` files output by output.

usage: compare-dumps.py EXPECTED ACTUAL [--tolerance T] [--floor F]
Prints one line per output with its relative error (max |a - e| /
max(max |e|, F); F defaults to 0, so errors are relative to the largest
expected value) and exits 1 when any exceeds T (default 1e-5) or the
outputs differ. A floor keeps outputs that are zero up to rounding (the
gradient of a key bias, which softmax cancels) from counting their noise
as a relative error.
"""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("expected")
parser.add_argument("actual")
parser.add_argument("--tolerance", type=float, default=1e-5)
parser.add_argument("--floor", type=float, default=0.0)
args = parser.parse_args()
with open(args.expected) as f:
    expected = json.load(f)
with open(args.actual) as f:
    actual = json.load(f)
bad = 0
if expected["step"] != actual["step"]:
    print(f"step {actual['step']} differs from {expected['step']}")
    bad += 1
for name, e in sorted(expected["outputs"].items()):
    a = actual["outputs"].get(name)
    if a is None or a["shape"] != e["shape"]:
        print(f"{name}: missing or of another shape")
        bad += 1
        continue
    # Non-finite values are spelled "nan", "inf", "-inf"; float() reads them.
    ev = [float(v) for v in e["values"]]
    av = [float(v) for v in a["values"]]
    scale = max([abs(v) for v in ev] + [args.floor, 1e-30])
    err = max([abs(x - y) for x, y in zip(av, ev)] + [0.0]) / scale
    ok = err <= args.tolerance
    bad += not ok
    print(f"{name}: relative error {err:.2e} {'ok' if ok else 'TOO LARGE'}")
sys.exit(1 if bad else 0)
