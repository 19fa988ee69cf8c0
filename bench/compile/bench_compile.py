#!/usr/bin/env python3
"""Times par-opt compiling GPT training steps of growing depth, pass by pass.

The model is the frontend's GPT (python_frontend/par/models.py: 256 wide, 8
heads, 512-token vocabulary, sequences of 128, a batch of 8) with Megatron
tensor parallelism over tp=4 and data parallelism over dp=2 annotated by
the frontend's presets. Each depth is compiled from the forward graph to
the runtime program, as `par.compile` does for a training step:

    par-opt model.mlir --par-autodiff=optimizer=adamw --par-propagate
            --par-partition --emit-program=step.parprog

and -mlir-timing gives each pass's wall time (the fastest of --repeat
runs). Printed per depth: the step's ops, the program's size, the time of
autodiff, propagation, partitioning (its passes together), emission
(scheduling, memory planning, writing and validating the program) and the
whole run, then the time per layer relative to the shallowest depth (1.00
means the compile time grows linearly with depth).

Targets (bench/README.md, "Compile speed"): time per layer flat within
1.5x from 12 to 192 layers; the 96-layer step compiled in under 1 s.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python_frontend"))

from par import models  # noqa: E402
from par.sharding import Mesh  # noqa: E402

PARTITION = ("ZeroPass", "SplitCheckpointsPass", "InsertReshardsPass",
             "SinkPartialsPass", "ToLocalPass", "CombineCollectivesPass")


def par_opt_path():
    build = os.environ.get("PAR_BUILD_DIR", os.path.join(ROOT, "build"))
    built = os.path.join(build, "bin", "par-opt")
    return built if os.path.exists(built) else shutil.which("par-opt")


def graph_text(layers):
    config = models.GPTConfig(vocab_size=512, block_size=128, n_layer=layers,
                              n_head=8, n_embd=256)
    mesh = Mesh({"dp": 2, "tp": 4})
    shardings = {**models.data_parallel("dp"), **models.tensor_parallel("tp")}
    graph = models.loss_graph(models.GPT(config), 8, 128, mesh=mesh,
                              shardings=shardings, name="gpt")
    return graph.to_mlir()


def timed_run(par_opt, path, program):
    run = subprocess.run(
        [par_opt, path, "--par-autodiff=optimizer=adamw", "--par-propagate",
         "--par-partition", f"--emit-program={program}", "-o", os.devnull,
         "-mlir-timing"], capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"par-opt failed on {path}:\n{run.stderr}")
    times = {}
    for seconds, name in re.findall(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+(\S+)$",
                                    run.stderr, re.M):
        times[name] = times.get(name, 0.0) + float(seconds)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="12,48,96,192",
                        help="comma-separated depths (default 12,48,96,192)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per depth; the fastest of each pass is kept")
    parser.add_argument("--keep", help="directory to keep graphs and programs in")
    args = parser.parse_args()
    par_opt = par_opt_path()
    if not par_opt:
        sys.exit("par-opt not found; build first (scripts/build.sh)")
    work = args.keep or tempfile.mkdtemp(prefix="par-bench-compile-")
    os.makedirs(work, exist_ok=True)

    rows = []
    for layers in [int(n) for n in args.layers.split(",")]:
        path = os.path.join(work, f"gpt-{layers}.mlir")
        with open(path, "w") as f:
            f.write(graph_text(layers))
        program = os.path.join(work, f"gpt-{layers}.parprog")
        runs = [timed_run(par_opt, path, program) for _ in range(args.repeat)]
        best = {name: min(r.get(name, 0.0) for r in runs) for name in runs[0]}
        step = subprocess.run([par_opt, path, "--par-autodiff=optimizer=adamw"],
                              capture_output=True, text=True, check=True).stdout
        ops = sum(1 for line in step.splitlines() if re.search(r"= par\.", line))
        rows.append((layers, ops, os.path.getsize(program), best))

    print("compile benchmark: GPT training steps (256 wide), mesh dp=2 x tp=4, "
          "autodiff to the runtime program")
    print(f"par-opt: {par_opt}")
    print()
    print("| layers | step ops | program (MB) | autodiff (s) | propagate (s) | "
          "partition (s) | emit (s) | total (s) | ms/layer | per layer vs first |")
    print("|-------:|---------:|-------------:|-------------:|--------------:|"
          "--------------:|---------:|----------:|---------:|-------------------:|")
    base = rows[0][3]["Total"] / rows[0][0]
    for layers, ops, size, t in rows:
        partition = sum(t.get(name, 0.0) for name in PARTITION)
        print(f"| {layers:6d} | {ops:8d} | {size / 1e6:12.1f} | "
              f"{t.get('AutodiffPass', 0.0):12.3f} | {t.get('PropagatePass', 0.0):13.3f} | "
              f"{partition:13.3f} | {t.get('EmitProgramPass', 0.0):8.3f} | "
              f"{t['Total']:9.3f} | {t['Total'] / layers * 1e3:8.1f} | "
              f"{t['Total'] / layers / base:18.2f} |")


if __name__ == "__main__":
    main()
