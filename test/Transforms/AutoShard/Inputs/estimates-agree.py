#!/usr/bin/env python3
"""Fails when a planned module's --auto-shard record (MLIR text in argv[1])
holds a checked plan whose integer-program estimate is off its check by
more than argv[2] (a fraction): every checked alternative, and the chosen
plan. Prints one line per plan, estimate over check."""
import re
import sys

text = open(sys.argv[1]).read()
tolerance = float(sys.argv[2])
record = re.search(r"par\.auto_shard = \{(.*)\}\}", text)
if not record:
    sys.exit("no par.auto_shard record in the input")
body = record.group(1)
plans = []
for alt in re.finditer(r"\{checked = true, ([^{}]*)\}", body):
    fields = alt.group(1)
    estimate = float(re.search(r"estimated_seconds = ([0-9.e+-]+)", fields).group(1))
    check = float(re.search(r"step_seconds = ([0-9.e+-]+)", fields).group(1))
    name = re.search(r'plan = "([^"]*)"', fields).group(1)
    plans.append((name, estimate, check))
rest = body[body.rindex("}]") if "}]" in body else 0:]
estimate = float(re.search(r"planned_seconds = ([0-9.e+-]+)", rest).group(1))
check = float(re.search(r"step_seconds = ([0-9.e+-]+)", rest).group(1))
plans.append(("chosen " + re.search(r'plan = "([^"]*)"', rest).group(1), estimate, check))
if len(plans) < 2:
    sys.exit("no checked alternative in the record")
bad = []
for name, estimate, check in plans:
    ratio = estimate / check
    print(f"{name}: estimate/check {ratio:.3f}")
    if abs(ratio - 1) > tolerance:
        bad.append(name)
if bad:
    sys.exit(f"estimates off their checks by more than {tolerance:.0%}: {', '.join(bad)}")
print(f"all {len(plans)} checked plans within {tolerance:.0%}")
