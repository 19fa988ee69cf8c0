#!/usr/bin/env python3
"""Prints the MLIR of a GPT loss for the rematerialization tests:
gpt.py [--layers N] [--batch B] [--seq S] [--width H] [--heads A]
[--vocab V] [--unfused] [--mesh dp=2,tp=2] [--tp AXIS] [--sequence] [--dp AXIS]
[--open-pin NAME]."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "python_frontend"))
from par import Mesh, P, models  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=32)
parser.add_argument("--width", type=int, default=32)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--vocab", type=int, default=64)
parser.add_argument("--unfused", action="store_true",
                    help="attention from a score contraction, softmax and value product")
parser.add_argument("--mesh", default="")
parser.add_argument("--dp", default="", help="split the batch over this axis")
parser.add_argument("--tp", default="", help="Megatron tensor parallel over this axis")
parser.add_argument("--open-pin", default="",
                    help="constrain the value of this name with every dim open (a no-op "
                         "constraint)")
parser.add_argument("--sequence", action="store_true",
                    help="with --tp: Megatron's sequence parallelism on the same axis")
args = parser.parse_args()

config = models.GPTConfig(vocab_size=args.vocab, block_size=args.seq, n_layer=args.layers,
                          n_head=args.heads, n_embd=args.width,
                          fused_attention=not args.unfused)
mesh = Mesh.parse(args.mesh) if args.mesh else None
shardings = {}
if args.dp:
    shardings.update(models.data_parallel(args.dp))
if args.tp:
    shardings.update(models.tensor_parallel(args.tp, sequence=args.sequence))
if args.open_pin:
    shardings[args.open_pin] = P(P.UNCONSTRAINED, P.UNCONSTRAINED, P.UNCONSTRAINED)
graph = models.loss_graph(models.GPT(config), args.batch, args.seq, mesh=mesh,
                          shardings=shardings, name="gpt")
print(graph.to_mlir())
