#!/usr/bin/env python3
"""Training-step speed and memory of par.attention against the same
attention written from its parts, on one CPU rank.

The model is the frontend's GPT (2 layers, width 64, 4 heads, a 128-token
vocabulary, batch 2) at sequence lengths --seqs. Each is built twice,
`GPTConfig(fused_attention=True)` (par.attention, whose gradient ops
recompute the weights tile by tile from the forward's row log-sum-exp)
and `False` (score contraction, causal mask, softmax and value product
as catalogue ops, their gradients too), compiled as a one-rank AdamW
step and run for --steps steps with par-run. Printed per sequence length
and form: the median step time after the first step, tokens/s, the
planned peak, the losses compared, and the ratios fused / parts.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python_frontend"))

from par import models  # noqa: E402


def tool(build, name):
    path = os.path.join(build, "bin", name)
    if not os.path.exists(path):
        sys.exit(f"{path} not found: build par first (scripts/build.sh)")
    return path


def step_run(par_opt, par_run, work, seq, fused, steps, batch):
    config = models.GPTConfig(vocab_size=128, block_size=seq, n_layer=2, n_head=4,
                              n_embd=64, fused_attention=fused)
    mlir = models.loss_graph(models.GPT(config), batch, seq, name="gpt").to_mlir()
    program = os.path.join(work, f"gpt-{seq}-{'fused' if fused else 'parts'}.json")
    compiled = subprocess.run([par_opt, "-", "--par-autodiff=optimizer=adamw",
                               f"--emit-program={program}", "-o", os.devnull],
                              input=mlir, capture_output=True, text=True)
    if compiled.returncode:
        sys.exit(f"par-opt failed:\n{compiled.stderr[-2000:]}")
    ran = subprocess.run([par_run, program, "--steps", str(steps), "--json"],
                         capture_output=True, text=True)
    if ran.returncode:
        sys.exit(f"par-run failed:\n{ran.stderr[-2000:]}")
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    step_events = [e for e in events if e.get("event") == "step"]
    start = next(e for e in events if e.get("event") == "start")
    seconds = statistics.median(e["seconds"] for e in step_events[1:])
    return {"seconds": seconds, "tokens/s": batch * seq / seconds,
            "peak": start["arena_bytes"], "losses": [e["loss"] for e in step_events]}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--seqs", default="128,512,1024")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    par_opt, par_run = tool(args.build, "par-opt"), tool(args.build, "par-run")
    print(f"GPT, 2 layers, width 64, 4 heads, batch {args.batch}, one rank, AdamW, "
          f"median of steps 2-{args.steps}")
    print("| seq | attention | step (ms) | tokens/s | planned peak (MiB) | "
          "speed fused/parts | peak fused/parts | losses |")
    print("|--:|---|--:|--:|--:|--:|--:|---|")
    with tempfile.TemporaryDirectory() as work:
        for seq in (int(s) for s in args.seqs.split(",")):
            fused = step_run(par_opt, par_run, work, seq, True, args.steps, args.batch)
            parts = step_run(par_opt, par_run, work, seq, False, args.steps, args.batch)
            worst = max(abs(a - b) / max(abs(b), 1e-30)
                        for a, b in zip(fused["losses"], parts["losses"]))
            agree = f"within {worst:.1e}" if worst <= 1e-5 else f"DIFFER {worst:.1e}"
            for label, r in (("par.attention", fused), ("from its parts", parts)):
                extra = (f"{parts['seconds'] / fused['seconds']:.2f}x | "
                         f"{fused['peak'] / parts['peak']:.2f} | {agree}"
                         if r is fused else " | | ")
                print(f"| {seq} | {label} | {r['seconds'] * 1e3:.1f} | "
                      f"{r['tokens/s']:,.0f} | {r['peak'] / 2**20:.1f} | {extra} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
