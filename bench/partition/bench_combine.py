#!/usr/bin/env python3
"""Collectives per step with and without --par-combine-collectives.

Partitions GPT-style training graphs (the generator of
bench/propagation/bench_propagation.py: 12, 48 and 96 layers on dp=2 x
tp=4) twice, with `--par-partition` and with
`--par-partition=combine-collectives=false`, and prints the collectives one
rank issues per step, the bytes it sends (equal by construction: combining
moves the same bytes in fewer calls) and the time of the combining pass.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "propagation"))
import bench_propagation  # noqa: E402


def partition(par_opt, path, combine):
    option = "--par-partition" if combine else "--par-partition=combine-collectives=false"
    proc = subprocess.run([par_opt, path, "--par-propagate", option, "--par-comm-report",
                           "-mlir-timing", "-o", os.devnull],
                          capture_output=True, text=True, check=True)
    total = re.search(r"total: (\d+) collective\(s\), .* ([\d.]+ [KMG]?i?B) sent per rank",
                      proc.stdout)
    timing = re.search(r"([\d.]+) \([ \d.]+%\)\s+CombineCollectivesPass", proc.stderr)
    return int(total.group(1)), total.group(2), float(timing.group(1)) if timing else 0.0


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--par-opt", default=os.path.join(
        os.environ.get("PAR_BUILD_DIR", os.path.join(root, "build")), "bin", "par-opt"))
    parser.add_argument("--layers", default="12,48,96")
    args = parser.parse_args()
    print("| layers | ops | collectives, each alone | combined | ratio | sent per rank | combine pass (s) |")
    print("|-------:|----:|------------------------:|---------:|------:|--------------:|-----------------:|")
    with tempfile.TemporaryDirectory() as work:
        for layers in [int(n) for n in args.layers.split(",")]:
            text, ops = bench_propagation.build(layers)
            path = os.path.join(work, f"gpt-{layers}.mlir")
            with open(path, "w") as f:
                f.write(text)
            alone, sent_alone, _ = partition(args.par_opt, path, False)
            combined, sent, seconds = partition(args.par_opt, path, True)
            if sent != sent_alone:
                print(f"bytes differ: {sent_alone} alone, {sent} combined", file=sys.stderr)
                return 1
            print(f"| {layers:6d} | {ops:5d} | {alone:23d} | {combined:8d} | "
                  f"{combined / alone:5.2f} | {sent:>13} | {seconds:16.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
