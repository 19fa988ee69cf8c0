#!/usr/bin/env python3
"""Per-device memory and traffic of GPT training steps under ZeRO 0-3.

For GPT shapes of 125M, 1.3B, 6.7B and 175B parameters (GPT-3 table:
layers, width, heads; vocabulary 50304, sequence 2048), builds the loss
graph with the Python frontend, one sequence per device, and compiles
(never runs) the mixed-precision AdamW step (bf16 compute, fp32 masters and
moments) for each data-parallel size and ZeRO stage:

    par-opt --mesh=dp=N --par-autodiff="optimizer=adamw precision=bf16 zero=S"
            --par-propagate --par-partition --report

and prints what --report says per device (bytes of parameters, gradients,
optimizer states and activations, the most temporary bytes live at once,
the planned peak) with the model states
and the traffic per step next to the ZeRO formulas (mixed-precision Adam,
K = 12: 16Φ, 4Φ + 12Φ/N, 2Φ + 14Φ/N, 16Φ/N bytes; 2Φ elements for stages
0-2, 3Φ for stage 3). The ratio columns are report / formula; model states
exclude the 4-byte step counter, traffic the loss all-reduce (2 elements).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python_frontend"))

from par import models  # noqa: E402

# name: (layers, width, heads), GPT-3 paper table 2.1 (6.7B stands for 7B).
SHAPES = {
    "125M": (12, 768, 12),
    "1.3B": (24, 2048, 16),
    "6.7B": (32, 4096, 32),
    "175B": (96, 12288, 96),
}
CATEGORIES = ["parameters", "gradients", "optimizer states", "activations", "data",
              "temporaries"]


def model_states_formula(stage, phi, n):
    return {0: 16 * phi, 1: 4 * phi + 12 * phi / n, 2: 2 * phi + 14 * phi / n,
            3: 16 * phi / n}[stage]


def traffic_formula(stage, phi, n):
    if n == 1:
        return 0
    return 3 * phi if stage == 3 else 2 * phi


def parse_report(text):
    out = {}
    for cat in CATEGORIES:
        m = re.search(r"^\s+" + re.escape(cat) + r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$",
                      text, re.M)
        out[cat] = int(m.group(2))
        out[cat + " most live"] = int(m.group(3))
    out["peak"] = int(re.search(r"planned peak: (\d+) bytes", text).group(1))
    out["phi"] = int(re.search(r"parameters: (\d+) elements", text).group(1))
    counters = re.search(r"\+ (\d+) bytes of counters", text)
    out["counters"] = int(counters.group(1)) if counters else 0
    total = re.search(r"^\s+total\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$", text, re.M)
    out["moved"] = int(total.group(3)) if total else 0
    return out


def gib(b):
    return f"{b / 2**30:9.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(SHAPES),
                        help="comma-separated subset of " + ", ".join(SHAPES))
    parser.add_argument("--dp", default="1,8,64,1024", help="data-parallel sizes")
    parser.add_argument("--stages", default="0,1,2,3")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--par-opt", default=None, help="par-opt binary")
    parser.add_argument("--keep", help="keep the generated .mlir files here")
    args = parser.parse_args()
    par_opt = args.par_opt or shutil.which("par-opt") or os.path.join(
        HERE, "..", "..", "build", "bin", "par-opt")
    work = args.keep or tempfile.mkdtemp(prefix="par-bench-zero-")
    os.makedirs(work, exist_ok=True)

    print(f"{'model':<6} {'Φ':>14} {'N':>5} {'ZeRO':>4} | {'params':>9} {'grads':>9} "
          f"{'opt st.':>9} {'activ.':>9} {'temps':>9} {'peak':>9} GiB | "
          f"{'states/Φ':>8} {'formula':>8} {'ratio':>7} | {'moved/Φ':>7} {'formula':>7} "
          f"{'ratio':>6} | {'compile s':>9}")
    for name in args.models.split(","):
        layers, width, heads = SHAPES[name]
        config = models.GPTConfig(vocab_size=50304, block_size=args.seq, n_layer=layers,
                                  n_head=heads, n_embd=width)
        for n in (int(x) for x in args.dp.split(",")):
            graph = models.loss_graph(models.GPT(config), n, args.seq,
                                      shardings=models.data_parallel(),
                                      name="gpt_" + name.replace(".", "_"), locations="none")
            path = os.path.join(work, f"gpt-{name}-dp{n}.mlir")
            with open(path, "w") as f:
                f.write(graph.to_mlir())
            for stage in (int(s) for s in args.stages.split(",")):
                start = time.perf_counter()
                proc = subprocess.run(
                    [par_opt, path, f"--mesh=dp={n}",
                     f"--par-autodiff=optimizer=adamw precision=bf16 zero={stage}",
                     "--par-propagate", "--par-partition", "--report", "-o", os.devnull],
                    capture_output=True, text=True)
                seconds = time.perf_counter() - start
                if proc.returncode:
                    print(f"{name} dp={n} zero={stage}: compile failed\n{proc.stderr}")
                    return 1
                r = parse_report(proc.stderr)
                phi = r["phi"]
                states = r["parameters"] + r["gradients"] + r["optimizer states"] - r["counters"]
                expect = model_states_formula(stage, phi, n)
                moved = max(r["moved"] - 2, 0)  # the loss all-reduce
                expect_moved = traffic_formula(stage, phi, n)
                ratio_moved = f"{moved / expect_moved:6.3f}" if expect_moved else f"{'-':>6}"
                print(f"{name:<6} {phi:>14,} {n:>5} {stage:>4} | {gib(r['parameters'])} "
                      f"{gib(r['gradients'])} {gib(r['optimizer states'])} "
                      f"{gib(r['activations'])} {gib(r['temporaries most live'])} {gib(r['peak'])}     | "
                      f"{states / phi:8.3f} {expect / phi:8.3f} {states / expect:7.4f} | "
                      f"{moved / phi:7.3f} {expect_moved / phi:7.3f} {ratio_moved} | "
                      f"{seconds:9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
