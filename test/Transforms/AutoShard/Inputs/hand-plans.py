#!/usr/bin/env python3
"""The automatic plan against the standard hand plans, model by model and
mesh by mesh: hand-plans.py PAR_OPT [--hardware H] [--work DIR].

For each model/mesh pair the hand plans are pure data parallel (the batch
over every axis), pure tensor parallel (Megatron's split over every axis)
and, on two-axis meshes, Megatron's data x tensor (the batch over the first
axis, Megatron's split over the second), each with ZeRO stages 0-3 where it
has a data axis (ZeRO over the first axis the batch is split on). Each is
written as annotations on the model, propagated, partitioned and priced
by --par-report; the automatic plan of the same unannotated model on the
same mesh is priced the same way. Prints one row per pair and exits 1
if the automatic plan's predicted step is slower than the best hand plan
on any pair."""
import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "python_frontend"))
from par import Mesh, models  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("par_opt")
parser.add_argument("--hardware", default="h100-8x-ib400")
parser.add_argument("--work", default=None,
                    help="directory for the generated files (default: a temporary one, removed after)")
args = parser.parse_args()


def gpt(layers, width, heads, seq, batch, vocab=256):
    return (models.GPT(models.GPTConfig(vocab_size=vocab, block_size=seq, n_layer=layers,
                                        n_head=heads, n_embd=width)), batch, seq)


def llama(layers, width, heads, kv_heads, seq, batch, vocab=256):
    config = models.LlamaConfig(vocab_size=vocab, dim=width, n_layers=layers, n_heads=heads,
                                n_kv_heads=kv_heads, ffn_hidden=4 * width, max_seq=seq)
    return (models.Llama(config), batch, seq)


# (name, model, mesh): small shapes so that every plan is checked in
# seconds, with batches, widths and heads that every split divides.
PAIRS = [
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "x=2"),
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "x=4"),
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "x=8"),
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "a=2,b=2"),
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "a=2,b=4"),
    ("gpt-narrow", gpt(2, 128, 8, 64, 8), "a=4,b=2"),
    ("gpt-wide", gpt(2, 512, 8, 128, 8), "x=8"),
    ("gpt-wide", gpt(2, 512, 8, 128, 8), "a=2,b=4"),
    ("gpt-long", gpt(2, 256, 8, 512, 4), "a=2,b=2"),
    ("llama", llama(2, 256, 16, 8, 64, 8), "x=4"),
    ("llama", llama(2, 256, 16, 8, 64, 8), "a=2,b=4"),
    ("llama", llama(2, 256, 16, 8, 64, 8), "a=4,b=2"),
]


def predicted(text):
    step = re.search(r"^\s+step\s+([0-9.e+-]+) s", text, re.M)
    return float(step.group(1)) if step else None


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def hand_plans(axes):
    """(name, shardings, the data axis ZeRO splits over or None)."""
    every = tuple(axes) if len(axes) > 1 else axes[0]
    plans = [("data", models.data_parallel(every), axes[0]),
             ("tensor", models.tensor_parallel(every), None)]
    if len(axes) == 2:
        plans.append(("data x tensor",
                      {**models.data_parallel(axes[0]), **models.tensor_parallel(axes[1])},
                      axes[0]))
    return plans


scratch = None if args.work else tempfile.TemporaryDirectory(prefix="hand-plans.")
work = Path(args.work or scratch.name)
work.mkdir(parents=True, exist_ok=True)
report = f"--par-report=hardware={args.hardware}"
worse = 0
print(f"{'model':<11} {'mesh':<8} {'best hand plan':<24} {'hand (s)':>11} {'auto (s)':>11} "
      f"{'auto/hand':>9}")
for i, (name, (model, batch, seq), mesh_text) in enumerate(PAIRS):
    mesh = Mesh.parse(mesh_text)
    axes = [a for a, _ in (part.split("=") for part in mesh_text.split(","))]
    best = None
    for plan, shardings, data_axis in hand_plans(axes):
        source = work / f"{i}.{plan.replace(' ', '-')}.mlir"
        source.write_text(models.loss_graph(model, batch, seq, mesh=mesh, shardings=shardings,
                                            name=name.replace("-", "_")).to_mlir())
        for zero in range(4) if data_axis else [0]:
            options = "optimizer=adamw" + (f" zero={zero} data-axis={data_axis}" if zero else "")
            out = run([args.par_opt, str(source), f"--par-autodiff={options}",
                       "--par-propagate", "--par-partition", report, "-o", "/dev/null"])
            step = predicted(out.stdout)
            if out.returncode or step is None:
                raise SystemExit(f"{name} on {mesh_text}, hand plan {plan} zero={zero}: "
                                 f"{out.stderr.strip()[:400]}")
            label = plan + (f" zero={zero}" if zero else "")
            if best is None or step < best[1]:
                best = (label, step)
    source = work / f"{i}.auto.mlir"
    source.write_text(models.loss_graph(model, batch, seq, mesh=mesh,
                                        name=name.replace("-", "_")).to_mlir())
    out = run([args.par_opt, str(source), "--par-autodiff=optimizer=adamw",
               f"--auto-shard=hardware={args.hardware}", "--par-propagate", "--par-partition",
               report, "-o", "/dev/null"])
    auto = predicted(out.stdout)
    if out.returncode or auto is None:
        raise SystemExit(f"{name} on {mesh_text}, auto plan: {out.stderr.strip()[:400]}")
    ratio = auto / best[1]
    slower = ratio > 1 + 1e-6
    worse += slower
    print(f"{name:<11} {mesh_text:<8} {best[0]:<24} {best[1]:>11.4g} {auto:>11.4g} "
          f"{ratio:>9.3f}{'  SLOWER' if slower else ''}")
print(f"{len(PAIRS)} model/mesh pairs: the auto plan is slower than the best hand plan "
      f"in {worse}")
sys.exit(1 if worse else 0)
