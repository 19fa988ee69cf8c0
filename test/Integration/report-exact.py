#!/usr/bin/env python3
"""The compile-time report must be exact for what par-run allocates and sends.

For each model and each sharding it lists (// SHARDING:, // PASSES: as in
equivalence.py), compiles with `par-opt --report --emit-program`, runs two
steps with par-run and checks, per rank, that the measured peak equals the
report's planned peak, and that the collectives rank 0 executed in a step
(count, elements moved, bytes sent) equal the report's totals.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from equivalence import model_files, parse_shardings, plan_inputs  # noqa: E402


def report_numbers(text):
    peak = re.search(r"planned peak: (\d+) bytes", text)
    total = re.search(r"^\s+total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$", text, re.M)
    if not peak:
        return None
    comm = (0, 0, 0)
    if total:
        comm = (int(total.group(1)), int(total.group(3)), int(total.group(4)))
    return int(peak.group(1)), comm


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--bin", help="directory of par-opt and par-run")
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tool = lambda name: os.path.join(args.bin, name) if args.bin else shutil.which(name)
    models = model_files(args.models)
    failures = 0
    print(f"{'model':<22} {'mesh':<12} {'planned':>9} {'measured':>9} "
          f"{'collectives':>11} {'moved':>9} {'sent':>9}  result")
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        text = open(model).read()
        passes = re.search(r"//\s*PASSES:\s*(.*)", text)
        passes = shlex.split(passes.group(1)) if passes else []
        for i, (mesh, assignments) in enumerate(parse_shardings(text)):
            src = os.path.join(args.work, f"{name}.{i}.mlir")
            prog = os.path.join(args.work, f"{name}.{i}.json")
            out = os.path.join(args.work, f"{name}.{i}.out.json")
            source, plan = plan_inputs(text, assignments)
            with open(src, "w") as f:
                f.write(source)
            compiled = subprocess.run(
                [tool("par-opt"), src, f"--mesh={mesh}", *passes, *plan, "--par-propagate",
                 "--par-partition", "--report", f"--emit-program={prog}", "-o", os.devnull],
                capture_output=True, text=True)
            ran = compiled.returncode == 0 and subprocess.run(
                [tool("par-run"), prog, "--steps", "2", "--log-every", "0",
                 "--dump-outputs", out], capture_output=True, text=True)
            numbers = report_numbers(compiled.stderr)
            if compiled.returncode or not ran or ran.returncode or not numbers:
                failures += 1
                print(f"{name:<22} {mesh:<12} FAILED\n{compiled.stderr}"
                      f"{ran.stdout + ran.stderr if ran else ''}")
                continue
            doc = json.load(open(out))
            planned, comm = numbers
            measured = doc["memory"]["measured"]
            run_comm = doc["communication"]
            ok = (all(m == planned for m in measured) and doc["memory"]["planned"] == planned
                  and comm == (run_comm["collectives"], run_comm["moved_elements"],
                               run_comm["sent_bytes"]))
            failures += not ok
            print(f"{name:<22} {mesh:<12} {planned:>9} {max(measured):>9} "
                  f"{comm[0]:>5}={run_comm['collectives']:<5} "
                  f"{comm[1]:>9} {comm[2]:>9}  {'PASS' if ok else 'FAIL'}")
    print(f"{failures} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
