#!/usr/bin/env python3
"""Activation memory and step time of GPT training steps under each
rematerialization mode (--par-remat).

Table 1 (compiled only, never run): GPT shapes of 1.3B, 22B and 175B
parameters (GPT-3's 1.3B; Korthikanti et al.'s 22B and 175B with t = 8),
sequence 2048, micro-batch 1, vocabulary 50304, bf16 mixed-precision AdamW
on a tensor-parallel mesh of t devices. Per-layer figures need only a few
layers, so each step is built with --layers (default 2) and compiled with

    par-opt --mesh=tp=T --par-autodiff="optimizer=adamw precision=bf16"
            [--par-remat=MODE] --par-propagate --par-partition --report

It prints, per mode, the activation bytes a device keeps per layer next to
Korthikanti's formula (none: sbh(10 + 24/t + 5as/(ht)); with Megatron's
sequence parallelism on the tensor axis, `sequence`: sbh(34/t +
5as/(ht)); full: 2sbh), the
recomputed share of the FLOPs, and the predicted step on the
`h100-8x-ib400` profile. `selective` equals `none` here: par.attention
keeps no score matrix (docs/memory.md).

Table 2 (run): a small GPT (4 layers, width 64, 4 heads, 128 tokens, batch
8; attention written from its parts so `selective` has work) trained for
--steps steps with par-run on --ranks ranks (dp x tp), per mode (and with
Megatron's sequence parallelism, no recomputation: `sequence`): planned
and measured peak, recomputed FLOPs, median step time, and the losses
compared with the plain step's.

Table 3 (compiled only): the planned peak, the most temporaries live at
once and those live at the peak for one layer of each shape, with par.attention (whose gradient ops keep
and make nothing score-sized) against attention written from its parts
(the score-sized tensors its backward pass makes), with a small
vocabulary so that the peak is the layer's.
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

# name: (layers in the full model, width, heads, tensor-parallel size)
SHAPES = {
    "1.3B": (24, 2048, 16, 1),
    "22B": (48, 6144, 64, 8),
    "175B": (96, 12288, 96, 8),
}
SEQ, VOCAB = 2048, 50304
SMALL_VOCAB = 1024


def tool(build, name):
    path = os.path.join(build, "bin", name)
    if not os.path.exists(path):
        sys.exit(f"{path} not found: build par first (scripts/build.sh)")
    return path


def report(par_opt, mlir, flags):
    run = subprocess.run([par_opt, "-", *flags, "--report", "-o", os.devnull],
                         input=mlir, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"par-opt {' '.join(flags)} failed:\n{run.stderr[-2000:]}")
    text = run.stderr
    per_layer = [int(x) for x in re.findall(r"^  layers? [0-9, -]+: (\d+) bytes", text, re.M)]
    recomputed = re.search(r"recomputed FLOPs: (\S+) per device \(([\d.]+) %", text)
    step = re.search(r"^  step\s+(\S+) s", text, re.M)
    peak = re.search(r"planned peak: (\d+) bytes", text)
    return {
        "layer": max(per_layer) if per_layer else 0,
        "recomputed %": float(recomputed.group(2)) if recomputed else 0.0,
        "step": float(step.group(1)) if step else float("nan"),
        "peak": int(peak.group(1)),
    }


def compiled_table(par_opt, names, layers):
    print("Table 1: per-layer activations (bytes per device), compiled only; "
          f"{layers} layers built, sequence {SEQ}, micro-batch 1, bf16")
    print(f"| model | t | mode | par bytes/layer | formula | par/formula | "
          f"recomputed % | predicted step (s) per {layers} layers |")
    print("|---|--:|---|--:|--:|--:|--:|--:|")
    for name in names:
        _, h, a, t = SHAPES[name]
        s, b = SEQ, 1
        sbh = s * b * h
        config = models.GPTConfig(vocab_size=VOCAB, block_size=SEQ, n_layer=layers,
                                  n_head=a, n_embd=h)
        mesh = Mesh({"tp": t}) if t > 1 else None

        def build(sequence):
            # The vocabulary split on tp in every mode (Megatron's), so the
            # modes differ only in the layers.
            shardings = (models.tensor_parallel("tp", vocab=True, sequence=sequence)
                         if t > 1 else {})
            return models.loss_graph(models.GPT(config), b, s, mesh=mesh, shardings=shardings,
                                     name="gpt").to_mlir()

        mlir = build(False)
        formulas = {"none": sbh * (10 + 24 / t + 5 * a * s / (h * t)),
                    "sequence": sbh * (34 / t + 5 * a * s / (h * t)), "full": 2 * sbh}
        # `sequence`: no recomputation, Megatron's sequence parallelism on tp.
        for mode in ("none", "sequence", "full") if t > 1 else ("none", "full"):
            flags = ["--par-autodiff=optimizer=adamw precision=bf16"]
            if mode not in ("none", "sequence"):
                flags.append(f"--par-remat={mode}")
            source = build(True) if mode == "sequence" else mlir
            flags += ["--par-propagate", "--par-partition"]
            r = report(par_opt, source, flags)
            f = formulas[mode]
            print(f"| {name} | {t} | {mode} | {r['layer']:,} | {int(f):,} | "
                  f"{r['layer'] / f:.3f} | {r['recomputed %']:.1f} | {r['step']:.4g} |")
        sys.stdout.flush()


def attention_table(par_opt, names):
    """Planned peak and temporaries at the peak of a one-layer step with
    par.attention (its gradient ops recompute the weights tile by tile)
    against the same attention written from its parts (scores, softmax,
    value product: the score-sized tensors autodiff made for par.attention
    before it had gradient ops of its own)."""
    print("Table 3: attention's backward, one layer, compiled only; sequence "
          f"{SEQ}, micro-batch 1, bf16, a vocabulary of {SMALL_VOCAB} (so that the "
          "layer, not the output head, makes the peak; bytes per device)")
    print("| model | t | attention | planned peak | temporaries live at most | at the peak |")
    print("|---|--:|---|--:|--:|--:|")
    for name in names:
        _, h, a, t = SHAPES[name]
        mesh = Mesh({"tp": t}) if t > 1 else None
        for fused in (True, False):
            config = models.GPTConfig(vocab_size=SMALL_VOCAB, block_size=SEQ, n_layer=1,
                                      n_head=a, n_embd=h, fused_attention=fused)
            shardings = models.tensor_parallel("tp", vocab=True) if t > 1 else {}
            mlir = models.loss_graph(models.GPT(config), 1, SEQ, mesh=mesh,
                                     shardings=shardings, name="gpt").to_mlir()
            run = subprocess.run(
                [par_opt, "-", "--par-autodiff=optimizer=adamw precision=bf16",
                 "--par-propagate", "--par-partition", "--report", "-o", os.devnull],
                input=mlir, capture_output=True, text=True)
            if run.returncode:
                sys.exit(f"par-opt failed:\n{run.stderr[-2000:]}")
            peak = int(re.search(r"planned peak: (\d+) bytes", run.stderr).group(1))
            most, at_peak = map(int, re.search(
                r"^  temporaries\s+\d+\s+\d+\s+(\d+)\s+(\d+)", run.stderr, re.M).groups())
            label = "par.attention" if fused else "from its parts"
            print(f"| {name} | {t} | {label} | {peak:,} | {most:,} | {at_peak:,} |")
        sys.stdout.flush()


def same_losses(plain, losses):
    """'yes' when bitwise equal, the largest relative difference when within
    fp32's 1e-5 (a different summation order), else 'NO'."""
    if losses == plain:
        return "yes"
    if len(losses) != len(plain):
        return "NO"
    worst = max(abs(float(a) - float(b)) / max(abs(float(a)), 1e-30)
                for a, b in zip(plain, losses))
    return f"within {worst:.1e}" if worst <= 1e-5 else "NO"


def run_table(par_opt, par_run, ranks, steps):
    dp = 2 if ranks % 2 == 0 and ranks > 1 else 1
    tp = ranks // dp
    mesh = Mesh({"dp": dp, "tp": tp})
    config = models.GPTConfig(vocab_size=128, block_size=128, n_layer=4, n_head=4, n_embd=64,
                              fused_attention=False)
    def build(sequence):
        shardings = {**models.data_parallel("dp"),
                     **models.tensor_parallel("tp", vocab=True, sequence=sequence)}
        return models.loss_graph(models.GPT(config), 8, 128, mesh=mesh, shardings=shardings,
                                 name="gpt").to_mlir()

    mlir = build(False)
    print(f"\nTable 2: a small GPT (4 layers, width 64, 4 heads, 128 tokens, batch 8, "
          f"unfused attention) on dp={dp} x tp={tp}, {steps} steps")
    print("| mode | planned peak | measured peak | recomputed % | median step (ms) | "
          "losses as plain |")
    print("|---|--:|--:|--:|--:|---|")
    plain_losses = None
    with tempfile.TemporaryDirectory() as work:
        none_peak = None
        for mode in ("none", "selective", "full", "auto", "sequence"):
            flags = ["--par-autodiff=optimizer=adamw"]
            source = build(True) if mode == "sequence" else mlir
            if mode == "auto":
                # Halfway between the plain and the full peak.
                flags.append(f"--par-remat=auto:budget={(none_peak + full_peak) // 2}")
            elif mode not in ("none", "sequence"):
                flags.append(f"--par-remat={mode}")
            program = os.path.join(work, f"{mode}.json")
            flags += ["--par-propagate", "--par-partition", f"--emit-program={program}"]
            r = report(par_opt, source, flags)
            if mode == "none":
                none_peak = r["peak"]
            if mode == "full":
                full_peak = r["peak"]
            run = subprocess.run([par_run, program, "-np", str(ranks), "--steps", str(steps),
                                  "--log-every", "1"], capture_output=True, text=True)
            if run.returncode:
                sys.exit(f"par-run failed:\n{run.stderr[-2000:]}")
            ms = [float(x) for x in re.findall(r"\s(\S+) ms\s+peak", run.stdout)]
            losses = re.findall(r"loss (\S+)", run.stdout)
            measured = re.search(r"measured peak (.+?) of", run.stdout)
            if plain_losses is None:
                plain_losses = losses
            label = mode if mode != "auto" else f"auto (budget {(none_peak + full_peak) // 2:,} B)"
            print(f"| {label} | {r['peak']:,} | {measured.group(1) if measured else '?'} | "
                  f"{r['recomputed %']:.1f} | {statistics.median(ms[1:] or ms):.2f} | "
                  f"{same_losses(plain_losses, losses)} |")
            sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default=",".join(SHAPES))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--skip-compiled", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--skip-attention", action="store_true")
    args = parser.parse_args()
    par_opt = tool(args.build, "par-opt")
    if not args.skip_compiled:
        compiled_table(par_opt, args.models.split(","), args.layers)
    if not args.skip_run:
        run_table(par_opt, tool(args.build, "par-run"), args.ranks, args.steps)
    if not args.skip_attention:
        attention_table(par_opt, args.models.split(","))


if __name__ == "__main__":
    main()
