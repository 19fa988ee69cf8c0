#!/usr/bin/env python3
"""Gradient buckets (--par-autodiff bucket=SIZE): collectives per step and
step time with and without them.

Trains a GPT (--layers layers, width --width, 4 heads, 64 tokens, batch 8)
data parallel on --ranks ranks (no more than the machine's cores) with
AdamW for --steps steps, once per ZeRO stage of --zero and bucket size
(0 = one collective per gradient and parameter), and prints par-run's
collectives per step, the median step time (the first step excluded), the
planned peak and the losses against bucket=0's. Then counts
the collectives of the main job's program (examples/gpt-tiny, dp=2 x tp=2)
with bucket=0 and the default.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python_frontend"))

from par import Mesh, models  # noqa: E402


def compile_program(par_opt, mlir, bucket, path, source=None, zero=0):
    args = [par_opt, source or "-",
            f"--par-autodiff=optimizer=adamw bucket={bucket} zero={zero}",
            "--par-propagate", "--par-partition", "--par-comm-report",
            f"--emit-program={path}", "-o", os.devnull]
    run = subprocess.run(args, input=None if source else mlir, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"par-opt failed:\n{run.stderr[-2000:]}")
    buckets = re.search(r"gradient buckets: (\d+) collective", run.stdout)
    total = re.search(r"total: (\d+) collective", run.stdout)
    return int(total.group(1)), int(buckets.group(1)) if buckets else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--buckets", default="0,64KiB,1MiB,25MiB")
    parser.add_argument("--zero", default="0,3", help="ZeRO stages to run")
    args = parser.parse_args()
    par_opt = os.path.join(args.build, "bin", "par-opt")
    par_run = os.path.join(args.build, "bin", "par-run")
    config = models.GPTConfig(vocab_size=256, block_size=64, n_layer=args.layers, n_head=4,
                              n_embd=args.width)
    mesh = Mesh({"dp": args.ranks})
    mlir = models.loss_graph(models.GPT(config), 8, 64, mesh=mesh,
                             shardings=models.data_parallel("dp"), name="gpt").to_mlir()
    print(f"GPT {args.layers} layers, width {args.width}, dp={args.ranks}, "
          f"{args.steps} AdamW steps")
    print("| ZeRO | bucket | gradient reductions | collectives per step | median step (ms) | "
          "planned peak | losses as bucket=0 |")
    print("|--:|---|--:|--:|--:|--:|---|")
    with tempfile.TemporaryDirectory() as work:
        for zero in args.zero.split(","):
            base = None
            for bucket in args.buckets.split(","):
                program = os.path.join(work, f"{zero}-{bucket}.json")
                total, buckets = compile_program(par_opt, mlir, bucket, program, zero=zero)
                run = subprocess.run([par_run, program, "-np", str(args.ranks), "--steps",
                                      str(args.steps), "--log-every", "1"],
                                     capture_output=True, text=True)
                if run.returncode:
                    sys.exit(f"par-run failed:\n{run.stderr[-2000:]}")
                ms = [float(x) for x in re.findall(r"\s(\S+) ms\s+peak", run.stdout)]
                losses = re.findall(r"loss (\S+)", run.stdout)
                peak = re.search(r"\(plan (.+?)\)", run.stdout)
                base = base or losses
                print(f"| {zero} | {bucket} | {buckets} | {total} | "
                      f"{statistics.median(ms[1:]):.2f} | {peak.group(1) if peak else '?'} | "
                      f"{'yes' if losses == base else 'NO'} |")
                sys.stdout.flush()
        example = os.path.join(ROOT, "examples", "gpt-tiny", "gpt_tiny.mlir")
        print("\nThe main job's program (examples/gpt-tiny, dp=2 x tp=2):")
        for bucket in ("0", "25MiB"):
            total, buckets = compile_program(par_opt, None, bucket,
                                             os.path.join(work, "tiny.json"), source=example)
            print(f"  bucket={bucket}: {total} collectives per step, "
                  f"{buckets} of them gradient reductions")


if __name__ == "__main__":
    main()
