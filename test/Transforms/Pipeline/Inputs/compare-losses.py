#!/usr/bin/env python3
"""Compares the logged losses of two `par-run --json` logs step by step.

usage: compare-losses.py EXPECTED ACTUAL [--tolerance T] [--only-common]
Exits 1 when a step's loss differs by more than T relative (default 1e-5),
when the logs cover different steps (with --only-common: share none), or when a rank class of ACTUAL (a
pipeline stage) measured a peak other than its planned arena.
"""
import argparse
import json
import sys


def events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


parser = argparse.ArgumentParser()
parser.add_argument("expected")
parser.add_argument("actual")
parser.add_argument("--tolerance", type=float, default=1e-5)
parser.add_argument("--only-common", action="store_true",
                    help="compare the steps both logs have (a resumed run)")
args = parser.parse_args()
want = {e["step"]: e["loss"] for e in events(args.expected) if e["event"] == "step"}
got = {e["step"]: e["loss"] for e in events(args.actual) if e["event"] == "step"}
bad = 0
if args.only_common:
    common = set(want) & set(got)
    want = {s: want[s] for s in common}
    got = {s: got[s] for s in common}
if sorted(want) != sorted(got) or not want:
    print(f"steps differ: {sorted(want)} vs {sorted(got)}")
    bad += 1
for step in sorted(want):
    if step not in got:
        continue
    err = abs(got[step] - want[step]) / max(abs(want[step]), 1e-30)
    ok = err <= args.tolerance
    bad += not ok
    print(f"step {step}: loss {got[step]:.7g} vs {want[step]:.7g}, relative error {err:.2e}"
          f" {'ok' if ok else 'TOO LARGE'}")
for e in events(args.actual):
    if e["event"] == "stages":
        for i, stage in enumerate(e["stages"]):
            ok = stage["peak_bytes"] == stage["planned_bytes"]
            bad += not ok
            print(f"rank class {i}: measured {stage['peak_bytes']} planned "
                  f"{stage['planned_bytes']} {'ok' if ok else 'DIFFERS'}")
sys.exit(1 if bad else 0)
