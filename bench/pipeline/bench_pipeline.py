#!/usr/bin/env python3
"""Pipeline schedules: predicted and measured bubble and peak memory.

For p in --stages and m in --microbatches, compiles a GPT training step
(8 layers, width --width, 64 tokens, one row per micro-batch, AdamW) with
--par-pipeline under each schedule (gpipe, 1f1b, interleaved with v=2,
zb-h1), runs it for --steps steps on p ranks, and prints per schedule:
- the bubble the compiler predicts (the schedule simulated with each
  virtual stage's FLOPs) and the schedule's formula;
- the bubble replayed from par-run's measured instruction times (each
  stage's stream run again with the real compute times: valid when ranks
  share cores, as here);
- the first stage's most live activations in micro-batches' worth (the
  compiler's plan; one micro-batch = the m=1 plan);
- the largest planned and measured peak over the stages.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GPT = os.path.join(ROOT, "test", "Transforms", "Remat", "Inputs", "gpt.py")
SCHEDULES = ["gpipe", "1f1b", "interleaved", "zb-h1"]


def run(args, **kwargs):
    """stdout, then stderr (where --report goes)."""
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if done.returncode:
        sys.exit(f"{' '.join(args[:3])} ... failed:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def first_stage_activations(report):
    stage0 = report.split(".stage1 (per device")[0]
    return int(re.search(r"^  activations\s+\d+\s+\d+\s+(\d+)", stage0, re.M).group(1))


def formula(report):
    match = re.search(r"predicted bubble [0-9.]+ \(.*; (.*) = ([0-9.]+)\)", report)
    return match.group(1), float(match.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--stages", default="2,4")
    parser.add_argument("--microbatches", default="4,8,16")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    par_opt = os.path.join(args.build, "bin", "par-opt")
    par_run = os.path.join(args.build, "bin", "par-run")
    work = tempfile.mkdtemp(prefix="bench-pipeline-")
    print(f"GPT 8 layers, width {args.width}, 64 tokens, 1 row per micro-batch, AdamW, "
          f"{args.steps} steps (the first left out of the measured times)\n")
    print("| p | m | schedule | predicted bubble | formula | replayed bubble | "
          "first stage activations (micro-batches) | planned peak | measured peak |")
    print("|--:|--:|---|--:|---|--:|--:|--:|--:|")
    for p in (int(x) for x in args.stages.split(",")):
        mlir = os.path.join(work, f"pp{p}.mlir")
        with open(mlir, "w") as f:
            f.write(run([sys.executable, GPT, "--layers", "8", "--batch", "1", "--seq", "64",
                         "--width", str(args.width), "--mesh", f"pp={p}"]))
        base = ["--par-autodiff=optimizer=adamw"]
        after = ["--par-propagate", "--par-partition", "--report", "-o", os.devnull]
        one = run([par_opt, mlir, *base, "--par-pipeline=microbatches=1", *after])
        unit = first_stage_activations(one)
        for m in (int(x) for x in args.microbatches.split(",")):
            for schedule in SCHEDULES:
                option = f"microbatches={m} schedule={schedule}"
                if schedule == "interleaved":
                    option += " virtual=2"
                program = os.path.join(work, f"pp{p}-m{m}-{schedule}.json")
                report = run([par_opt, mlir, *base, f"--par-pipeline={option}", *after[:-3],
                              f"--emit-program={program}", *after[-3:]])
                name, value = formula(report)
                log = run([par_run, program, "-np", str(p), "--steps", str(args.steps),
                           "--json"])
                events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
                bubble = next(e["bubble"] for e in events if e.get("event") == "bubble")
                stages = next(e["stages"] for e in events if e.get("event") == "stages")
                planned = max(s["planned_bytes"] for s in stages)
                measured = max(s["peak_bytes"] for s in stages)
                label = schedule + (" v=2" if schedule == "interleaved" else "")
                print(f"| {p} | {m} | {label} | {bubble['predicted']:.3f} | "
                      f"{name} = {value:.3f} | {bubble['replayed']:.3f} | "
                      f"{first_stage_activations(report) / unit:.1f} | {planned:,} | "
                      f"{measured:,} |", flush=True)


if __name__ == "__main__":
    main()
