#!/usr/bin/env python3
"""Predicted against measured step time on a profile par-run --calibrate made.

Calibrates this machine (`par-run --calibrate -np RANKS`), then for
GEMM-dominated training steps (a GPT-style MLP block, f32, SGD: two
matrix products forward, four backward) compiles each plan, reads the
predicted step (`--par-report=hardware=` the calibrated profile), runs
the program under par-run and takes the median measured step (the
first step, which touches fresh memory, left out). Plans: one rank, and on
`--ranks` ranks data parallel, Megatron's column/row split, and the
--auto-shard plan. Use no more ranks than cores: ranks that share a core
measure the scheduler, not the plan. Every run gives each rank the
threads a calibrated rank had (PAR_CPU_THREADS = cores / the calibrating
ranks): the profile describes that device, and one rank left to use every
core is another (twice as fast here with two).

  bench_prediction.py [--ranks 2] [--steps 6] [--keep DIR]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PAR_BUILD_DIR", os.path.join(ROOT, "build"))


def tool(name):
    built = os.path.join(BUILD, "bin", name)
    return built if os.path.exists(built) else shutil.which(name)


def mlp(tokens, h):
    f = 4 * h
    return f"""par.mesh @mesh <["tp"=1]>
func.func @mlp(%x: tensor<{tokens}x{h}xf32> {{par.role = "data"}}, %w1: tensor<{h}x{f}xf32>, %w2: tensor<{f}x{h}xf32>) -> tensor<f32> {{
  %a = par.dot %x, %w1 contract [1] x [0] : (tensor<{tokens}x{h}xf32>, tensor<{h}x{f}xf32>) -> tensor<{tokens}x{f}xf32>
  %g = par.gelu %a : tensor<{tokens}x{f}xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<{tokens}x{f}xf32>, tensor<{f}x{h}xf32>) -> tensor<{tokens}x{h}xf32>
  %sq = par.mul %y, %y : tensor<{tokens}x{h}xf32>
  %s = par.reduce mean %sq dims [0, 1] : (tensor<{tokens}x{h}xf32>) -> tensor<f32>
  return %s : tensor<f32>
}}
"""


def annotate(text, plan):
    """The hand plans: the batch split (data), or the first weight by
    columns and the second by rows (Megatron); others unannotated."""
    shard = {"data": {"%x": '[{"tp"}, {}]'},
             "megatron": {"%w1": '[{}, {"tp"}]', "%w2": '[{"tp"}, {}]'}}.get(plan, {})
    for name, dims in shard.items():
        sharding = "par.sharding = #par.sharding<@mesh, " + dims + ">"
        role = ' {par.role = "data"}'
        head = re.search(re.escape(name) + r": tensor<[^>]*>", text)
        rest = text[head.end():]
        if rest.startswith(role):
            new = ' {par.role = "data", ' + sharding + "}"
            rest = rest[len(role):]
        else:
            new = " {" + sharding + "}"
        text = text[:head.end()] + new + rest
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--sizes", default="1024x1024,2048x1024,2048x2048",
                        help="tokens x hidden, comma-separated")
    parser.add_argument("--keep")
    args = parser.parse_args()
    par_opt, par_run = tool("par-opt"), tool("par-run")
    if not par_opt or not par_run:
        raise SystemExit("par-opt / par-run not found: build par first")
    work = args.keep or tempfile.mkdtemp(prefix="par-bench-prediction-")
    os.makedirs(work, exist_ok=True)
    profile = os.path.join(work, "calibrated.json")
    # The device the profile describes: a rank of the calibration.
    threads = max(1, (os.cpu_count() or 1) // args.ranks)
    subprocess.run([par_run, "--calibrate", "-np", str(args.ranks), "-o", profile],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"== predicted vs measured step, profile from par-run --calibrate -np {args.ranks}, "
          f"{os.cpu_count()} cores, {threads} thread(s) a rank ==")
    print(f"{'tokens x h':<12} {'ranks':>5} {'plan':<9} {'predicted (s)':>13} "
          f"{'measured (s)':>12} {'measured/predicted':>18}")
    ratios = []
    for size in args.sizes.split(","):
        tokens, h = (int(n) for n in size.split("x"))
        for ranks, plan in [(1, "one rank")] + [(args.ranks, p) for p in
                                                ("data", "megatron", "auto")]:
            stem = os.path.join(work, f"mlp-{size}-{ranks}-{plan.replace(' ', '-')}")
            with open(stem + ".mlir", "w") as f:
                f.write(annotate(mlp(tokens, h), plan))
            planning = [f"--auto-shard=hardware={profile}"] if plan == "auto" else []
            subprocess.run([par_opt, stem + ".mlir", f"--mesh={ranks}",
                            "--par-autodiff=optimizer=sgd", *planning, "--par-propagate",
                            "--par-partition", "-o", stem + ".plan.mlir"],
                           check=True, capture_output=True)
            report = subprocess.run([par_opt, stem + ".plan.mlir",
                                     f"--par-report=hardware={profile}", "-o", os.devnull],
                                    check=True, capture_output=True, text=True)
            predicted = float(re.findall(r"^\s+step\s+([0-9.e+-]+) s", report.stdout, re.M)[-1])
            subprocess.run([par_opt, stem + ".plan.mlir", f"--emit-program={stem}.json",
                            "-o", os.devnull], check=True, capture_output=True)
            run = subprocess.run([par_run, stem + ".json", "-np", str(ranks), "--steps",
                                  str(args.steps), "--json"],
                                 check=True, capture_output=True, text=True,
                                 env=dict(os.environ, PAR_CPU_THREADS=str(threads)))
            seconds = [json.loads(line)["seconds"] for line in run.stdout.splitlines()
                       if line.startswith("{") and json.loads(line).get("event") == "step"]
            measured = statistics.median(seconds[1:] or seconds)
            ratios.append(measured / predicted)
            print(f"{size:<12} {ranks:>5} {plan:<9} {predicted:>13.4g} {measured:>12.4g} "
                  f"{measured / predicted:>18.2f}", flush=True)
    within = sum(0.75 <= r <= 1.25 for r in ratios)
    print(f"{within} of {len(ratios)} within +-25%; measured/predicted from "
          f"{min(ratios):.2f} to {max(ratios):.2f}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
