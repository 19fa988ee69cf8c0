#!/usr/bin/env python3
"""A GPT-2 124M training step (bf16 compute, AdamW, batch 8 x 1024) on one
GPU: par-run's CUDA backend against PyTorch eager on the same device.

par's program is compiled beforehand by bench/cuda/prepare.py
(deps/programs-bench/gpt2-124m.parprog); PyTorch's model is the same
architecture (learned positions, pre-norm blocks, GELU MLP of 4x, tied
head, biases) written here. Prints tokens/s of each, MFU against --peak
and the ratio; --compile adds PyTorch under torch.compile. Exits non-zero
when par's steps or PyTorch eager failed.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def torch_step(batch, seq, steps, compiled=False, layers=12, heads=12, width=768,
               vocab=50257):
    """PyTorch's tokens/s: eager, or with the model under torch.compile
    (its compilation runs in the warm-up steps, not in the timed ones)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            q, k, v = (t.view(b, s, heads, width // heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, width))
            return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(seq, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(width)

        def forward(self, tokens, targets):
            x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
            for block in self.blocks:
                x = block(x)
            logits = self.ln(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, vocab).float(), targets.view(-1))

    device = "cuda"
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    forward = torch.compile(model) if compiled else model
    tokens = torch.randint(0, vocab, (batch, seq), device=device)
    targets = torch.randint(0, vocab, (batch, seq), device=device)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(tokens, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3 if compiled else 2):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return batch * seq * steps / (time.perf_counter() - start)


def par_step(par_run, program, steps, env=None):
    proc = subprocess.run([par_run, program, "--backend=cuda", "--steps", str(steps + 1),
                           "--log-every", "1"], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    # Its step lines (losses, times) go to the log, its device memory (the
    # plan, the scratch set aside, what libraries took), and whether its
    # fused groups ran compiled and its scratch sizes held.
    print(f"{program}{' ' + str(env) if env else ''}:",
          *(line for line in proc.stdout.splitlines()
            if line.startswith("step") or "device memory" in line),
          *(line for line in proc.stderr.splitlines()
            if "interpreted" in line or "undercounts" in line),
          sep="\n  ", file=sys.stderr)
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {proc.returncode}, no output")
    rates = [float(m.group(1)) for m in
             re.finditer(r"^step \d+\b.*?\s(\S+) tokens/s", proc.stdout, re.M)]
    # The first step warms up (cuBLASLt heuristics, NCCL, allocations).
    return sorted(rates[1:])[len(rates[1:]) // 2] if len(rates) > 1 else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--par-run", required=True)
    parser.add_argument("--program", required=True, action="append",
                        help="a compiled step (repeat: each gets a row; the ratio line is the fastest's)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--compile", action="store_true",
                        help="also time PyTorch with torch.compile (compiling takes a minute or more)")
    parser.add_argument("--no-interpreted", action="store_true",
                        help="time fused programs only with their groups compiled "
                             "(by default also interpreted, PAR_CUDA_JIT=0)")
    parser.add_argument("--peak", type=float, default=989e12,
                        help="the device's dense bf16 FLOP/s for the MFU column "
                             "(default 989e12: H100/H200 SXM)")
    parser.add_argument("--trace", metavar="FILE",
                        help="also trace 2 steps of each program (FILE.N.json) and "
                             "print where their time goes (trace_summary.py)")
    args = parser.parse_args()
    flops = 6 * 124e6 * args.batch * args.seq  # per step, weights only
    # par first: PyTorch's caching allocator holds its memory afterwards.
    rows = []
    runs = []
    for program in args.program:
        if "fused" not in program:
            runs.append(("par (cuda)", program, None))
            continue
        # Fused groups compiled for the GPU (the default), and interpreted
        # (PAR_CUDA_JIT=0) for the comparison.
        runs.append(("par (cuda, fused)", program, None))
        if not args.no_interpreted:
            runs.append(("par (cuda, fused, interpreted)", program, {"PAR_CUDA_JIT": "0"}))
    for name, program, env in runs:
        try:
            rows.append((name, par_step(args.par_run, program, args.steps, env)))
        except Exception as err:  # noqa: BLE001 - reported in the table
            rows.append((name, float("nan")))
            print(f"{name}: {err}", file=sys.stderr)
    if args.trace:
        summary = Path(__file__).with_name("trace_summary.py")
        for n, program in enumerate(args.program):
            trace = f"{args.trace}.{n}.json"
            subprocess.run([args.par_run, program, "--backend=cuda", "--steps", "2",
                            "--log-every", "0", "--trace", trace], capture_output=True)
            if Path(trace).exists():
                print(subprocess.run([sys.executable, str(summary), trace, "--top", "25"],
                                     capture_output=True, text=True).stdout, file=sys.stderr)
    baselines = [("PyTorch eager", False)] + ([("PyTorch torch.compile", True)]
                                               if args.compile else [])
    torch_rows = []
    for name, compiled in baselines:
        try:
            torch_rows.append((name, torch_step(args.batch, args.seq, args.steps, compiled)))
        except Exception as err:  # noqa: BLE001 - reported in the table
            torch_rows.append((name, float("nan")))
            print(f"{name}: {err}", file=sys.stderr)
    torch_rate = torch_rows[0][1]
    print(f"| GPT-2 124M step, bf16, {args.batch} x {args.seq} | tokens/s | TFLOP/s (6N) "
          f"| MFU | vs PyTorch eager |")
    print("|---|---:|---:|---:|---:|")
    for name, rate in torch_rows + rows:
        achieved = rate * flops / (args.batch * args.seq)
        print(f"| {name} | {rate:,.0f} | {achieved / 1e12:.1f} | {achieved / args.peak:.1%} "
              f"| {rate / torch_rate:.3f} |")
    best = max((rate for _, rate in rows if rate == rate), default=float("nan"))
    if torch_rate == torch_rate and best == best:
        print(f"par / PyTorch eager: {best / torch_rate:.3f}")
        if len(torch_rows) > 1 and torch_rows[1][1] == torch_rows[1][1]:
            print(f"par / PyTorch torch.compile: {best / torch_rows[1][1]:.3f}")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
