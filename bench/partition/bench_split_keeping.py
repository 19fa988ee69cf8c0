#!/usr/bin/env python3
"""Bytes of slice, pad and concat along a split dim, against the analytic minimum.

For each case (an 8 x W f32 tensor whose columns are split over tp=n), writes
the op as MLIR, partitions it with

    par-opt case.mlir --par-propagate --par-partition --par-comm-report

and prints the bytes one rank sends (the report's total: the busiest member
of each collective) next to:

- gather: what gathering the operands first would send, (n-1)/n of them
  (what par did before slice, pad and concat kept their split);
- received: the most bytes any device needs in the result's layout and
  does not hold in the operands' layouts;
- minimum: the analytic minimum of one round of point-to-point transfers,
  the busiest device's bytes received or sent, where an element that only
  one device holds must be sent by it to every device that needs it; both
  computed here element by element, independently of the compiler.

The ratio is par / minimum (1.000: exactly the minimum; "-" where nothing
needs to move).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROWS = 8
BYTES = 4


def blocks(size, n):
    """[start, end) of each device's piece of a dim of `size` over n (padded)."""
    piece = -(-size // n)
    return [(i * piece, min((i + 1) * piece, size)) for i in range(n)]


def minimum(sources, result_size, n, split_result):
    """Bytes of the busiest device in the best one-round exchange: the most
    any device receives (what it needs and lacks) or must send (what it alone
    holds that others need). `sources`: list of (size, offset, stride); result
    index t reads source k at offset + t*stride. A source narrower than n is
    whole on every device (its elements have n holders, which can share the
    sending; counted as received only)."""
    targets = blocks(result_size, n) if split_result else [(0, result_size)] * n
    received, sent = [0] * n, [0] * n
    for dev in range(n):
        lo, hi = targets[dev]
        for t in range(lo, hi):
            for size, offset, stride in sources:
                s = offset + t * stride
                if not 0 <= s < size:
                    continue
                if size < n:
                    break  # every device holds it
                pieces = blocks(size, n)
                if not pieces[dev][0] <= s < pieces[dev][1]:
                    received[dev] += 1
                    holder = next(j for j in range(n) if pieces[j][0] <= s < pieces[j][1])
                    sent[holder] += 1
                break
    return max(received) * ROWS * BYTES, max(received + sent) * ROWS * BYTES


def mlir_of(name, op, operands, result_width, n):
    # Operands at least n wide are split over tp; narrower ones are whole.
    args = ", ".join(
        f"%{a}: tensor<{ROWS}x{w}xf32>" +
        (' {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}' if w >= n else "")
        for a, w in operands)
    return (f'par.mesh @mesh <["tp"={n}]>\n'
            f"func.func @{name}({args}) -> tensor<{ROWS}x{result_width}xf32> {{\n"
            f"  %r = {op} : ({', '.join(f'tensor<{ROWS}x{w}xf32>' for _, w in operands)}) "
            f"-> tensor<{ROWS}x{result_width}xf32>\n"
            f"  return %r : tensor<{ROWS}x{result_width}xf32>\n}}\n")


def cases():
    """(label, op text, operands [(name, width)], result width, sources for the minimum)."""
    out = []
    for start, limit, stride, width in [(1, 63, 1, 64), (16, 48, 1, 64), (0, 64, 2, 64),
                                        (1, 64, 3, 64), (3, 99, 1, 100), (30, 32, 1, 64)]:
        count = -(-(limit - start) // stride)
        strides = f" strides [1, {stride}]" if stride != 1 else ""
        out.append((f"slice [{start}:{limit}:{stride}] of {width}",
                    f"par.slice %x starts [0, {start}] limits [{ROWS}, {limit}]{strides}",
                    [("x", width)], count, [(width, start, stride)]))
    for low, high, width in [(1, 3, 60), (5, 0, 64), (0, 7, 57)]:
        out.append((f"pad low {low} high {high} of {width}",
                    f"par.pad %x low [0, {low}] high [0, {high}]", [("x", width)],
                    low + width + high, [(width, -low, 1)]))
    for widths in [(48, 16), (20, 24, 20), (60, 4), (33, 31)]:
        names = [f"x{i}" for i in range(len(widths))]
        sources, at = [], 0
        for w in widths:
            sources.append((w, -at, 1))
            at += w
        out.append((f"concat {' + '.join(map(str, widths))}",
                    f"par.concat {', '.join('%' + a for a in names)} dim 1",
                    list(zip(names, widths)), at, sources))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tp", default="2,3,4,8", help="split degrees")
    parser.add_argument("--par-opt", default=None, help="par-opt binary")
    args = parser.parse_args()
    par_opt = args.par_opt or shutil.which("par-opt") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin", "par-opt")
    work = tempfile.mkdtemp(prefix="par-bench-split-")
    print(f"{'case':<28} {'tp':>3} | {'result split':>12} {'par B':>7} {'gather B':>9} "
          f"{'received B':>10} {'minimum B':>10} {'par/min':>8}")
    for n in (int(x) for x in args.tp.split(",")):
        for label, op, operands, result_width, sources in cases():
            path = os.path.join(work, "case.mlir")
            with open(path, "w") as f:
                f.write(mlir_of("case", op, operands, result_width, n))
            proc = subprocess.run([par_opt, path, "--par-propagate", "--par-partition",
                                   "--par-comm-report"], capture_output=True, text=True)
            if proc.returncode:
                print(f"{label} tp={n}: compile failed\n{proc.stderr}")
                return 1
            sent = re.search(r"total: .* ([0-9.]+) (B|KiB) sent per rank",
                             proc.stdout + proc.stderr)
            par = 0 if sent is None else float(sent.group(1)) * (1024 if sent.group(2) == "KiB" else 1)
            split_result = '[{}, {"tp"}]' in proc.stdout.split("-> (tensor")[1].split("\n")[0]
            gather = sum((n - 1) * (-(-w // n)) * ROWS * BYTES for _, w in operands
                         if w >= n)
            received, least = minimum(sources, result_width, n, split_result)
            ratio = f"{par / least:8.3f}" if least else f"{'-':>8}"
            print(f"{label:<28} {n:>3} | {str(split_result):>12} {par:7.0f} {gather:9d} "
                  f"{received:10d} {least:10d} {ratio}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
