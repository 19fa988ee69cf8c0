#!/usr/bin/env python3
"""--auto-shard: planner time against depth and model size, and plans against hand plans.

Three tables:

  depth  GPT-1.3B-wide training steps (AdamW) of 1, 2, 4, ... layers on a
         mesh (default dp=8,tp=8 on h100-8x-ib400): ops in the step, the
         planner's wall time (-mlir-timing, AutoShardPass), the plan chosen,
         its predicted step time and MFU. --width 175b: GPT-175B-wide layers
         (bf16), for the target's 1,024 devices with --mesh 128x8 --batch 128.
  models GPT 1.3B/6.7B/175B and Llama 7B/70B shapes (bf16, AdamW) on 8, 64,
         512 and 1,024 devices (meshes 8, 8x8, 64x8, 128x8): ops, planner
         wall time, plans checked exactly, predicted step and MFU, plan.
  hand   every integration model with hand shardings (`// SHARDING:` lines
         of test/Integration/Inputs): the predicted step of the hand plan
         against the auto plan on the same mesh and profile (--report), the
         ratio auto / hand, and a summary (how many are no slower, the
         geometric mean and the worst ratio).

  bench_autoshard.py [--layers 1,2,4] [--mesh dp=8,tp=8] [--width 1.3b|175b]
                     [--hardware NAME]
                     [--models gpt-1.3b,...] [--devices 8,64,512,1024]
                     [--skip-depth] [--skip-models] [--skip-hand] [--keep DIR]
                     [--fuse]

With --fuse the models table plans for the program --par-fuse makes
(--auto-shard=fuse=on) and reports that program; its "IP est." column is
the search's estimate of the chosen plan (the integer program's, with what
ZeRO adds and a pipeline stage's share), next to the checked step.
"""

import argparse
import dataclasses
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python_frontend"))
sys.path.insert(0, os.path.join(ROOT, "test", "Integration"))
import equivalence  # noqa: E402
from par import models  # noqa: E402


def par_opt_path():
    built = os.path.join(os.environ.get("PAR_BUILD_DIR", os.path.join(ROOT, "build")),
                         "bin", "par-opt")
    return built if os.path.exists(built) else shutil.which("par-opt")


def predicted_step(report):
    """The plan's predicted step and MFU from --report. A pipelined plan's
    step is the schedule's (the summary line); the per-call breakdown after
    it is one stage's, so no MFU is read for it."""
    planned = re.search(r"^\s+predicted step ([0-9.e+-]+) s", report, re.M)
    steps = re.findall(r"^\s+step\s+([0-9.e+-]+) s", report, re.M)
    mfu = re.findall(r"^\s+MFU\s+([0-9.]+) %", report, re.M)
    if planned and "pipeline schedules checked" in report:
        return float(planned.group(1)), None
    return (float(steps[-1]) if steps else None, float(mfu[-1]) if mfu else None)


def mfu_text(mfu):
    return f"{mfu:>6.1f}" if mfu is not None else f"{'-':>6}"


# The depth table's layers (--width): GPT 1.3B's in fp32, or GPT-3 175B's
# in bf16 (the model of the planner's time target).
DEPTH_WIDTHS = {
    "1.3b": ("GPT 1.3B width (h=2048, 16 heads, 4h MLP, fp32)",
             dict(n_head=16, n_embd=2048)),
    "175b": ("GPT-175B width (h=12288, 96 heads, 4h MLP, bf16)",
             dict(n_head=96, n_embd=12288, dtype="bf16")),
}


def depth_table(args, par_opt, work):
    title, shape = DEPTH_WIDTHS[args.width]
    print(f"== planner time against depth: {title}, "
          f"batch {args.batch} x {args.seq}, AdamW, mesh {args.mesh}, {args.hardware} ==")
    print(f"{'layers':>6} {'ops':>6} {'plan (s)':>9} {'s/layer':>8} "
          f"{'step (s)':>10} {'MFU %':>6}  plan")
    for layers in [int(n) for n in args.layers.split(",")]:
        config = models.GPTConfig(vocab_size=50304, block_size=args.seq, n_layer=layers,
                                  **shape)
        graph = models.loss_graph(models.GPT(config), args.batch, args.seq, name="gpt")
        path = os.path.join(work, f"gpt-{layers}.mlir")
        with open(path, "w") as f:
            f.write(graph.to_mlir())
        step = subprocess.run([par_opt, path, f"--mesh={args.mesh}",
                               "--par-autodiff=optimizer=adamw", "-o", path + ".step"],
                              capture_output=True, text=True, check=True)
        del step
        ops = sum(1 for line in open(path + ".step") if re.search(r"= par\.", line))
        start = time.perf_counter()
        planned = subprocess.run([par_opt, path + ".step", f"--auto-shard=hardware={args.hardware}",
                                  "-mlir-timing", "-o", path + ".plan"],
                                 capture_output=True, text=True)
        wall = time.perf_counter() - start
        if planned.returncode:
            print(f"{layers:>6} {ops:>6} failed: {planned.stderr.strip()[:200]}")
            continue
        timing = re.search(r"([0-9.]+) \(\s*[0-9.]+%\)\s+AutoShardPass", planned.stderr)
        seconds = float(timing.group(1)) if timing else wall
        report = subprocess.run([par_opt, path + ".plan", "--par-propagate", "--par-partition",
                                 "--par-report", "-o", os.devnull],
                                capture_output=True, text=True)
        step_s, mfu = predicted_step(report.stdout)
        plan = re.search(r'plan = "([^"]*)"', open(path + ".plan").readline())
        print(f"{layers:>6} {ops:>6} {seconds:>9.2f} {seconds / layers:>8.2f} "
              f"{step_s or 0:>10.4g} {mfu_text(mfu)}  {plan.group(1) if plan else '?'}",
              flush=True)


# The benchmark's model shapes: GPT-3's 1.3B ("XL"), 6.7B and 175B
# (Brown et al., table 2.1) and Llama 2's 7B and 70B.
MODEL_SHAPES = {
    "gpt-1.3b": lambda: models.GPT(models.GPTConfig(
        vocab_size=50304, block_size=2048, n_layer=24, n_head=16, n_embd=2048, dtype="bf16")),
    "gpt-6.7b": lambda: models.GPT(models.GPTConfig(
        vocab_size=50304, block_size=2048, n_layer=32, n_head=32, n_embd=4096, dtype="bf16")),
    "gpt-175b": lambda: models.GPT(models.GPTConfig(
        vocab_size=50304, block_size=2048, n_layer=96, n_head=96, n_embd=12288, dtype="bf16")),
    "llama-7b": lambda: models.Llama(dataclasses.replace(
        models.LLAMA_CONFIGS["7B"], max_seq=2048, dtype="bf16")),
    "llama-70b": lambda: models.Llama(dataclasses.replace(
        models.LLAMA_CONFIGS["70B"], max_seq=2048, dtype="bf16")),
}
MESHES = {8: "8", 64: "8x8", 512: "64x8", 1024: "128x8"}


def models_table(args, par_opt, work):
    print(f"\n== planner time, predicted step and plan: model shapes (bf16, AdamW, "
          f"sequences of {args.seq}, a batch of max(8, devices/8) sequences) on "
          f"{args.hardware} ==")
    print(f"{'model':<10} {'devices':>7} {'mesh':>6} {'ops':>6} {'plan (s)':>9} "
          f"{'checked':>7} {'pruned':>6} {'IP est.':>9} {'step (s)':>9} {'MFU %':>6}  plan")
    for name in args.models.split(","):
        for devices in [int(n) for n in args.devices.split(",")]:
            batch = max(8, devices // 8)
            graph = models.loss_graph(MODEL_SHAPES[name](), batch, args.seq,
                                      name=name.replace("-", "_").replace(".", "_"))
            path = os.path.join(work, f"{name}-{devices}.mlir")
            with open(path, "w") as f:
                f.write(graph.to_mlir())
            subprocess.run([par_opt, path, f"--mesh={MESHES[devices]}",
                            "--par-autodiff=optimizer=adamw", "-o", path + ".step"],
                           capture_output=True, text=True, check=True)
            ops = sum(1 for line in open(path + ".step") if re.search(r"= par\.", line))
            start = time.perf_counter()
            fuse = " fuse=on" if args.fuse else ""
            planned = subprocess.run([par_opt, path + ".step",
                                      f"--auto-shard=hardware={args.hardware}{fuse}",
                                      "-mlir-timing", "-o", path + ".plan"],
                                     capture_output=True, text=True)
            wall = time.perf_counter() - start
            timing = re.search(r"([0-9.]+) \(\s*[0-9.]+%\)\s+AutoShardPass", planned.stderr)
            seconds = float(timing.group(1)) if timing else wall
            row = f"{name:<10} {devices:>7} {MESHES[devices]:>6} {ops:>6} {seconds:>9.2f}"
            if planned.returncode:
                why = re.search(r"error: (.*)", planned.stderr)
                print(f"{row} {'':>7} {'':>6} {'-':>9} {'-':>9} {'-':>6}  "
                      f"{(why.group(1) if why else planned.stderr.strip())[:150]}", flush=True)
                continue
            head = open(path + ".plan").readline()
            checked = re.search(r"\} *\], axes = .*? checked = ([0-9]+)", head)
            pruned = re.search(r"\} *\], axes = .*? pruned = ([0-9]+)", head)
            plan = re.search(r'plan = "([^"]*)", planned', head)
            report = subprocess.run([par_opt, path + ".plan", "--par-propagate",
                                     "--par-partition"] + (["--par-fuse"] if args.fuse else [])
                                    + ["--par-report", "-o", os.devnull],
                                    capture_output=True, text=True)
            step_s, mfu = predicted_step(report.stdout)
            # The chosen plan's keys follow its alternatives.
            chosen = head[head.find("], axes = "):]
            estimate = re.search(r"\bestimated_seconds = ([0-9.eE+-]+)", chosen)
            print(f"{row} {checked.group(1) if checked else '?':>7} "
                  f"{pruned.group(1) if pruned else '?':>6} "
                  f"{float(estimate.group(1)) if estimate else 0:>9.4g} "
                  f"{step_s or 0:>9.4g} {mfu_text(mfu)}  "
                  f"{plan.group(1) if plan else '?'}", flush=True)


def hand_table(args, par_opt, work):
    print(f"\n== auto plans against the hand plans of the integration models "
          f"({args.hardware}) ==")
    print(f"{'model':<28} {'mesh':<16} {'hand (s)':>11} {'auto (s)':>11} {'auto/hand':>9}")
    inputs = os.path.join(ROOT, "test", "Integration", "Inputs")
    ratios = []
    for model in equivalence.model_files([inputs, os.path.join(inputs, "mixed")]):
        name = os.path.basename(model)
        text = open(model).read()
        passes = re.search(r"//\s*PASSES:\s*(.*)", text)
        passes = shlex.split(passes.group(1)) if passes else []
        for i, (mesh, assignments) in enumerate(equivalence.parse_shardings(text)):
            if assignments == equivalence.AUTO:
                continue
            src = os.path.join(work, f"{name}.{i}.mlir")
            report = f"--par-report=hardware={args.hardware}"
            with open(src, "w") as f:
                f.write(equivalence.annotate(text, assignments))
            hand = subprocess.run([par_opt, src, f"--mesh={mesh}", *passes, "--par-propagate",
                                   "--par-partition", report, "-o", os.devnull],
                                  capture_output=True, text=True)
            with open(src, "w") as f:
                f.write(text)
            auto = subprocess.run([par_opt, src, f"--mesh={mesh}", *passes,
                                   f"--auto-shard=hardware={args.hardware}", "--par-propagate",
                                   "--par-partition", report, "-o", os.devnull],
                                  capture_output=True, text=True)
            h, a = predicted_step(hand.stdout)[0], predicted_step(auto.stdout)[0]
            if not h or not a:
                print(f"{name:<28} {mesh:<16} failed: {(hand.stderr + auto.stderr)[:160]}")
                continue
            ratios.append(a / h)
            print(f"{name:<28} {mesh:<16} {h:>11.4g} {a:>11.4g} {a / h:>9.3f}", flush=True)
    if ratios:
        no_slower = sum(r <= 1 + 1e-6 for r in ratios)
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"{len(ratios)} model/mesh pairs: auto no slower than hand in {no_slower}, "
              f"geometric mean auto/hand {geo:.3f}, worst {max(ratios):.3f}, "
              f"best {min(ratios):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="1,2,4")
    parser.add_argument("--mesh", default="dp=8,tp=8")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--hardware", default="h100-8x-ib400")
    parser.add_argument("--width", choices=sorted(DEPTH_WIDTHS), default="1.3b",
                        help="depth table: the layers' shape (175b with --mesh 128x8 "
                             "--batch 128: the 1,024-device target)")
    parser.add_argument("--skip-depth", action="store_true")
    parser.add_argument("--skip-hand", action="store_true")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--models", default=",".join(MODEL_SHAPES))
    parser.add_argument("--devices", default="8,64,512,1024")
    parser.add_argument("--keep", help="directory to keep the generated files in")
    parser.add_argument("--fuse", action="store_true",
                        help="models table: plan and report the --par-fuse program")
    args = parser.parse_args()
    par_opt = par_opt_path()
    if not par_opt:
        raise SystemExit("par-opt not found: build par (scripts/build.sh) first")
    work = args.keep or tempfile.mkdtemp(prefix="par-bench-autoshard-")
    os.makedirs(work, exist_ok=True)
    if not args.skip_depth:
        depth_table(args, par_opt, work)
    if not args.skip_models:
        models_table(args, par_opt, work)
    if not args.skip_hand:
        hand_table(args, par_opt, work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
