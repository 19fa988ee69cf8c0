#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention at the shape par-cuda-attention-bench
times (batch 8, 1024 positions, 12 heads of 64, bf16), forward and backward,
causal and not: the same table rows, for the ratio against par's kernels.
Counts 4 b h s^2 d FLOPs forward and 10 b h s^2 d backward (halved when
causal), as par-cuda-attention-bench does. Exits 3 where there is no PyTorch
or no GPU (nothing to compare), 1 on any other failure."""
import argparse
import sys


def known_peak(name):
    """Dense bf16 peak (TFLOP/s) by device name, as par-cuda-attention-bench
    knows it; 0 for parts it does not know."""
    if "NVL" in name or "PCIe" in name:
        return 312.0 if "A100" in name else 0.0
    if "H100 80GB HBM3" in name or "H100 SXM" in name or "H200" in name:
        return 989.4
    return 312.0 if "A100" in name else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--peak", type=float, default=-1.0,
                        help="dense bf16 peak in TFLOP/s (default: known by "
                        "the device's name; 0: not printed)")
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"attention_torch.py: no PyTorch ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("attention_torch.py: no GPU", file=sys.stderr)
        return 3
    if args.peak < 0:
        args.peak = known_peak(torch.cuda.get_device_name())
    b, s, h, d = 8, args.seq, 12, 64
    dev = torch.device("cuda")
    # SDPA takes [b, h, s, d]; par's layout is [b, s, h, d], so transpose views.
    q, k, v, go = (torch.empty(b, s, h, d, device=dev, dtype=torch.bfloat16)
                   .uniform_(-1, 1).transpose(1, 2) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_(True)
    print(f"# PyTorch {torch.__version__} scaled_dot_product_attention on "
          f"{torch.cuda.get_device_name()}: batch {b}, {s} positions, {h} "
          f"heads of {d}, bf16")
    print("| mask | pass | ms | TFLOP/s |\n|---|---|---:|---:|")
    unit = b * h * s * s * d
    start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    for causal in (True, False):
        part = 0.5 if causal else 1.0
        times = {}
        for name in ("forward", "backward"):
            def run():
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                if name == "backward":
                    torch.autograd.grad(out, (q, k, v), go)
            run()
            torch.cuda.synchronize()
            start.record()
            for _ in range(10):
                run()
            stop.record()
            torch.cuda.synchronize()
            times[name] = start.elapsed_time(stop) / 10 / 1e3
        forward = times["forward"]
        backward = times["backward"] - forward  # the backward timing ran both
        mask = "causal" if causal else "none"
        print(f"| {mask} | forward | {forward * 1e3:.3f} | "
              f"{4 * part * unit / forward / 1e12:.1f} |")
        print(f"| {mask} | backward | {backward * 1e3:.3f} | "
              f"{10 * part * unit / backward / 1e12:.1f} |")
        total = times["backward"]
        tflops = 14 * part * unit / total / 1e12
        peak = f" ({100 * tflops / args.peak:.1f}% of {args.peak:.0f})" \
            if args.peak > 0 else ""
        print(f"| {mask} | forward + backward | {total * 1e3:.3f} | "
              f"{tflops:.1f}{peak} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
