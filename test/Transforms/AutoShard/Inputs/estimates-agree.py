#!/usr/bin/env python3
"""Fails when a planned module's --auto-shard record (MLIR text in argv[1])
holds a checked alternative whose integer-program estimate is off its check
by more than argv[2] (a fraction). Only the plans the estimate models are
compared: a sequence-parallel variant, and a plan's weight splits completed
by propagation (`propagated`), carry their base plan's estimate, and
recomputation is timed by its check alone. Pipelines, given or made by
--auto-shard itself (microbatches=), are compared: their estimate simulates
the schedule with the seconds of each stage's ops. Prints one line per plan, estimate
over check. With --chosen, the chosen plan's estimate is held to the same
tolerance."""
import re
import sys

text = open(sys.argv[1]).read()
tolerance = float(sys.argv[2])
chosen = "--chosen" in sys.argv[3:]
start = text.find("par.auto_shard = {alternatives = [")
if start < 0:
    sys.exit("no par.auto_shard record with alternatives in the input")
record = text[start:]
entries = re.split(r"\{checked = ", record)[1:]
plans = []
for entry in entries:
    if not entry.startswith("true"):
        continue
    name = re.search(r'plan = "([^"]*)"', entry)
    estimate = re.search(r"estimated_seconds = ([0-9.eE+-]+)", entry)
    check = re.search(r"step_seconds = ([0-9.eE+-]+)", entry)
    if not (name and estimate and check):
        sys.exit(f"a checked alternative without its figures: {entry[:120]}")
    if re.search(r"sequence|propagated|remat=", name.group(1)):
        continue
    plans.append((name.group(1), float(estimate.group(1)), float(check.group(1))))
# With --chosen the chosen plan is compared too: one alternative is enough.
if len(plans) < (1 if chosen else 2):
    sys.exit(f"{len(plans)} checked alternatives the estimate models; "
             f"expected {'one' if chosen else 'two'} or more")
bad = []
for name, estimate, check in plans:
    ratio = estimate / check
    print(f"{name}: estimate/check {ratio:.3f}")
    if abs(ratio - 1) > tolerance:
        bad.append(name)
if bad:
    sys.exit(f"estimates off their checks by more than {tolerance:.0%}: {', '.join(bad)}")
print(f"all {len(plans)} checked plans within {tolerance:.0%}")
if chosen:
    # The chosen plan's keys follow its alternatives' list.
    tail = record[record.find("], axes = "):]
    estimate = re.search(r"estimated_seconds = ([0-9.eE+-]+)", tail)
    # The chosen plan's own step_seconds is the last: its schedule trials'
    # come before it.
    checks = re.findall(r"\bstep_seconds = ([0-9.eE+-]+)", tail)
    check = checks[-1] if checks else None
    if not (estimate and check):
        sys.exit("the chosen plan's record has no estimated_seconds or step_seconds")
    ratio = float(estimate.group(1)) / float(check)
    print(f"chosen plan: estimate/check {ratio:.3f}")
    if abs(ratio - 1) > tolerance:
        sys.exit(f"the chosen plan's estimate is off its check by more than {tolerance:.0%}")
