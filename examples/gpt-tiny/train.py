#!/usr/bin/env python3
"""Train GPT-tiny on 8 CPU ranks over a pp=2 x tp=2 x dp=2 mesh.

The model is written once, for one device, with the Python frontend; a few
inputs are annotated (tokens split by batch over dp, and by sequence over
sp when the mesh has it; Megatron-style heads and MLP units over tp) and
par infers the rest. par-opt then builds the training step (gradients,
global-norm clipping, AdamW with a warm-up and cosine learning rate),
splits its layers into pipeline stages over pp (1F1B over micro-batches),
partitions each stage into the per-device program, and par-run trains it
over the bytes of a bundled public-domain text. The same step on one rank
must give the same losses (the sharded step runs its element-wise chains as
fused kernels, --par-fuse; the one-rank step runs every op on its own).

Run from the repository root:
  python3 examples/gpt-tiny/train.py                 # 3D: pp x tp x dp, 80 steps
  python3 examples/gpt-tiny/train.py --mesh dp=2,sp=2,tp=2   # no pipeline
  python3 examples/gpt-tiny/train.py --schedule gpipe --microbatches 4
  python3 examples/gpt-tiny/train.py --auto          # --auto-shard plans dp=2,sp=2,tp=2
  python3 examples/gpt-tiny/train.py --auto --mesh pp=2,x=2,y=2   # ... around 2 stages
  python3 examples/gpt-tiny/train.py --no-fuse       # one kernel per element-wise op
"""
import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The frontend of this checkout, even when another one is installed.
sys.path.insert(0, str(ROOT / "python_frontend"))
import par  # noqa: E402
from par import P, models


def build(mesh: par.Mesh, batch: int, seq: int, annotate: bool = True) -> par.Graph:
    shardings = {}
    if not annotate:
        pass
    elif "tp" in mesh.axis_names:
        shardings.update(models.tensor_parallel("tp"))
    if annotate and mesh.size > 1:
        token_spec = P("dp" if "dp" in mesh.axis_names else None,
                       "sp" if "sp" in mesh.axis_names else None)
        shardings.update({"tokens": token_spec, "targets": token_spec})
    return models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), batch, seq,
                             mesh=mesh if mesh.size > 1 else None, shardings=shardings,
                             name="gpt_tiny")


def auto_shard_plan(report: str) -> str:
    """The plan section --report prints for --auto-shard."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("auto-shard plan")), None)
    if start is None:
        return "(no auto-shard plan in the report)"
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")),
               len(lines))
    return "\n".join(lines[start:end])


def pipeline_stages(report: str) -> str:
    """The pipeline sections --report prints, one per stage."""
    lines, keep = [], False
    for line in report.splitlines():
        if line.startswith("pipeline stage"):
            keep = True
        elif not line.startswith("  "):
            keep = False
        if keep:
            lines.append(line)
    return "\n".join(lines)


def describe_plan(exe: par.Executable, mesh: par.Mesh) -> None:
    program = exe.program
    params = [i for i in program["inputs"]
              if i.get("role") == "param" and not i["name"].endswith((".m", ".v"))
              and i["name"] != "step"]
    states = [i for i in program["inputs"] if i["name"].endswith((".m", ".v"))]
    count = sum(_numel(i["global_shape"]) for i in params)
    print(f"model: {len(params)} parameter tensors, {count:,} parameters; "
          f"{len(states)} AdamW moment tensors")
    print(f"mesh: {mesh.describe()} = {program['num_ranks']} ranks")
    print("\nhow the first block and the data are split (inferred unless annotated):")
    for item in program["inputs"]:
        name = item["name"]
        if not (name.startswith("h0.") or name in ("tokens", "targets", "wte", "wpe")) \
                or name.endswith((".m", ".v")):
            continue
        spec = par.sharding.spec_from_program(item["sharding"])
        local = spec.local_shape(item["global_shape"], mesh)
        print(f"  {name:<14} {_shape(item['global_shape']):>10} {item['dtype']}  "
              f"{spec.body():<22} per device {_shape(local)}")
    tokens = next(i for i in program["inputs"] if i["name"] == "tokens")
    print("\nthe tokens of a step, device by device:")
    print(par.visualize_sharding(tokens["global_shape"],
                                 par.sharding.spec_from_program(tokens["sharding"]), mesh,
                                 dtype=tokens["dtype"], name="tokens"))
    for n in range(len(program["rank_classes"])):
        kinds = Counter()
        for inst in exe.collectives_of(n):
            attrs = inst.get("attrs", {})
            axes = ",".join(program["groups"][attrs["group"]]) if "group" in attrs else ""
            kinds[(inst["op"], axes)] += 1
        who = f" (stage {n})" if "pipeline" in program else ""
        print(f"collectives per step and rank{who}: " +
              (", ".join(f"{k} {op} over [{axes}]" for (op, axes), k in sorted(kinds.items()))
               or "none"))
    for n, rc in enumerate(program["rank_classes"]):
        who = (f"stage {n} (ranks {rc['ranks']})" if "pipeline" in program
               else "per rank")
        print(f"memory plan: {rc['arena_bytes'] / 1024:.1f} KiB arena {who} "
              f"({len(rc['instructions'])} instructions)")


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _shape(shape):
    return "x".join(map(str, shape)) or "scalar"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", default=None,
                        help="mesh axes (pp: pipeline stages, dp, sp, tp; default pp=2,tp=2,dp=2, "
                             "with --auto dp=2,sp=2,tp=2)")
    parser.add_argument("--schedule", default="1f1b",
                        help="pipeline schedule: gpipe, 1f1b, interleaved, zb-h1")
    parser.add_argument("--microbatches", type=int, default=2,
                        help="pipeline micro-batches per step (they divide --batch)")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--data", default=str(ROOT / "data" / "tiny-corpus.txt"))
    parser.add_argument("--no-check", action="store_true",
                        help="skip the one-rank run that checks the losses")
    parser.add_argument("--no-fuse", action="store_true",
                        help="run every element-wise op as a kernel of its own (the "
                             "sharded step is compiled with --par-fuse otherwise; the "
                             "one-rank check never is)")
    parser.add_argument("--auto", nargs="?", const="hardware=cpu-local", default=None,
                        metavar="OPTIONS",
                        help="no hand annotations: par-opt --auto-shard plans the mesh "
                             "(default options: hardware=cpu-local)")
    args = parser.parse_args()

    args.mesh = args.mesh or ("dp=2,sp=2,tp=2" if args.auto is not None else "pp=2,tp=2,dp=2")
    mesh = par.Mesh.parse(args.mesh)
    pipeline = (par.Pipeline(microbatches=args.microbatches, schedule=args.schedule)
                if "pp" in mesh.axis_names else None)
    optimizer = par.AdamW(lr=args.lr, weight_decay=0.01, clip=1.0, warmup=8,
                          decay_steps=args.steps)
    every = max(1, args.steps // 16)
    try:
        print(f"== compiling the training step of GPT-tiny for {args.mesh} ==")
        # A pipelined step reads m micro-batches of batch/m rows.
        rows = pipeline.micro_batch(args.batch, mesh) if pipeline else args.batch
        exe = par.compile(build(mesh, rows, args.seq, annotate=args.auto is None),
                          mesh=mesh, optimizer=optimizer, auto_shard=args.auto or False,
                          pipeline=pipeline, fuse=not args.no_fuse)
        if args.auto is not None:
            print(auto_shard_plan(exe.comm_report))
        if pipeline:
            print(f"pipeline: {pipeline.count(mesh)} micro-batches of {rows} rows, "
                  f"{args.schedule}, over {mesh.shape['pp']} stages")
            print(pipeline_stages(exe.comm_report))
        describe_plan(exe, mesh)
        print(f"\n== training: {args.steps} steps of {args.batch}x{args.seq} tokens from "
              f"{Path(args.data).name}, {exe.num_ranks} ranks ==")
        result = exe.run(steps=args.steps, data=args.data, log_every=every)
        print(result.text)
        losses = [s.loss for s in result.steps if s.loss is not None]
        if not args.no_check:
            print("\n== the same training step on one rank ==")
            single = par.compile(build(par.Mesh({}), args.batch, args.seq),
                                 optimizer=optimizer)
            reference = single.run(steps=args.steps, data=args.data, log_every=every)
            want = [s.loss for s in reference.steps if s.loss is not None]
            error = max(abs(a - b) / abs(b) for a, b in zip(losses, want))
            print(f"one rank: loss {want[0]:.6f} -> {want[-1]:.6f}; "
                  f"max relative difference of the logged losses {error:.1e}")
            if error > 1e-4:
                print("error: the sharded run diverged from the one-rank run", file=sys.stderr)
                return 1
    except par.ParError as err:
        print(err, file=sys.stderr)
        return 1
    print(f"\nloss {losses[0]:.3f} -> {losses[-1]:.3f} over {args.steps} steps")
    if not losses[-1] < losses[0]:
        print("error: the loss did not decrease", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
