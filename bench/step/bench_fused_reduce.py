#!/usr/bin/env python3
"""Element-wise trees that end in a reduction, fused and unfused, on CPUs.

Five groups over a rows x cols f32 tensor x and a bias b of cols:
  rows:    sum over each row of (x + b)^2     (layer norm's backward sums)
  columns: sum over the rows of x * b         (a gain or bias gradient)
  all:     sum of x^2 over every element      (clipping's sum of squares)
  kept:    sum over each row of x * b, with x * b returned too (read
           again after the sum: the group keeps it, a second result)
  norm:    layer norm of each row of x + b, with x + b returned too
           (residual + layer norm: the group keeps the residual sum)
Each is compiled by par-opt with and without --par-fuse and run by par-run
(one rank) for --steps steps; the three programs alternate --rounds times
and the median round is kept. Printed per group and size: the median step
time, the bytes the unfused ops move through memory over those the fused
group moves (its inputs and result), the measured speed-up, and the
planned peak. Fused and unfused results must be equal bit for bit (the
script compares par-run's dumps and says so).

  bench_fused_reduce.py [--build build] [--steps 30] [--rounds 3] [--sizes 512x1024,2048x4096]
                        [--groups rows,columns,all,kept,norm]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BROADCAST = "%bb = par.broadcast %b dims [1] : (tensor<{C}xf32>) -> {T}\n  "
GROUPS = {
    "rows": ("dims [1]", lambda r, c: f"tensor<{r}xf32>",
             BROADCAST + "%s = par.add %x, %bb : {T}\n  %q = par.mul %s, %s : {T}"),
    "columns": ("dims [0]", lambda r, c: f"tensor<{c}xf32>",
                BROADCAST + "%q = par.mul %x, %bb : {T}"),
    "all": ("dims [0, 1]", lambda r, c: "tensor<f32>",
            "%q = par.mul %x, %x : {T}"),
    "kept": ("dims [1]", lambda r, c: f"tensor<{r}xf32>",
             BROADCAST + "%q = par.mul %x, %bb : {T}"),
    "norm": (None, lambda r, c: f"tensor<{r}x{c}xf32>",
             BROADCAST + "%q = par.add %x, %bb : {T}"),
}


def module(group, rows, cols):
    dims, result, body = GROUPS[group]
    t = f"tensor<{rows}x{cols}xf32>"
    out = result(rows, cols)
    kept = group in ("kept", "norm")
    results = f"{out}, {t}" if kept else out
    last = (f"%r = par.layer_norm %q, %b, %b : {t}, tensor<{cols}xf32>"
            if group == "norm" else f"%r = par.reduce sum %q {dims} : ({t}) -> {out}")
    return (f"func.func @f(%x: {t}, %b: tensor<{cols}xf32>) -> ({results}) {{\n"
            f"  {body.format(T=t, C=cols)}\n"
            f"  {last}\n"
            f"  return %r{', %q' if kept else ''} : {results}\n}}\n")


def unfused_bytes(group, rows, cols):
    """Bytes the unfused ops read and write (f32), and the fused group's."""
    n, result = rows * cols * 4, {"rows": rows, "columns": cols, "kept": rows,
                                  "all": 1, "norm": rows * cols}[group] * 4
    bias = cols * 4
    if group == "norm":  # broadcast, add, layer_norm (reads gamma and beta)
        return (bias + n) + (3 * n) + (n + 2 * bias + result), n + 3 * bias + result + n
    if group == "rows":   # broadcast, add, mul, reduce
        unfused = (bias + n) + (3 * n) + (2 * n) + (n + result)
    elif group in ("columns", "kept"):  # broadcast, mul, reduce
        unfused = (bias + n) + (3 * n) + (n + result)
    else:  # mul, reduce
        unfused = (2 * n) + (n + result)
    fused = n + (bias if group != "all" else 0) + result
    if group == "kept":  # the product is written either way
        fused += n
    return unfused, fused


def run(par_run, program, steps, dump=None):
    args = [par_run, program, "--steps", str(steps)]
    if dump:
        args += ["--dump-outputs", dump]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    times = [float(re.search(r"([0-9.]+) ms", line).group(1))
             for line in out.splitlines() if line.startswith("step ")]
    peak = next(line for line in out.splitlines() if "planned per rank" in line)
    return statistics.median(times[1:] or times), peak.split("of ")[-1].split(" planned")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="512x1024,2048x4096")
    ap.add_argument("--groups", default=",".join(GROUPS))
    a = ap.parse_args()
    par_opt = os.path.join(a.build, "bin", "par-opt")
    par_run = os.path.join(a.build, "bin", "par-run")
    print("| group | x | unfused (ms) | fused (ms) | bytes unfused / fused | speed-up "
          "| planned peak unfused -> fused | results |")
    print("|---|---|--:|--:|--:|--:|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for size in a.sizes.split(","):
            rows, cols = (int(v) for v in size.split("x"))
            for group in a.groups.split(","):
                src = os.path.join(work, f"{group}.mlir")
                with open(src, "w") as f:
                    f.write(module(group, rows, cols))
                progs = {}
                for fuse in (False, True):
                    progs[fuse] = os.path.join(work, f"{group}-{int(fuse)}.json")
                    subprocess.run([par_opt, src, *(["--par-fuse"] if fuse else []),
                                    f"--emit-program={progs[fuse]}", "-o", os.devnull],
                                   check=True)
                dumps = {fuse: os.path.join(work, f"{group}-{int(fuse)}.out")
                         for fuse in progs}
                for fuse in progs:
                    run(par_run, progs[fuse], 1, dumps[fuse])
                same = subprocess.run(
                    [sys.executable, os.path.join(ROOT, "test", "par-run", "compare-dumps.py"),
                     dumps[False], dumps[True], "--tolerance", "0"],
                    capture_output=True).returncode == 0
                rounds = []
                for _ in range(a.rounds):
                    rounds.append({fuse: run(par_run, progs[fuse], a.steps) for fuse in progs})
                rounds.sort(key=lambda r: r[True][0] / r[False][0])
                mid = rounds[len(rounds) // 2]
                ub, fb = unfused_bytes(group, rows, cols)
                print(f"| {group} | {rows}x{cols} | {mid[False][0]:.2f} | {mid[True][0]:.2f} "
                      f"| {ub / fb:.1f}x | {mid[False][0] / mid[True][0]:.2f}x "
                      f"| {mid[False][1]} -> {mid[True][1]} "
                      f"| {'bit for bit' if same else 'DIFFER'} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
