"""The command line shared by model scripts (examples/*/*.py).

    python3 model.py > model.mlir          # print the program
    python3 model.py --run --steps 3       # compile, run, check vs numpy
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from .compile import compile as compile_graph, max_relative_error
from .driver import ParError
from .graph import Graph
from .sharding import Mesh


def example_main(build: Callable[[Mesh], Graph], default_mesh: Mesh, description: str,
                 header: str = "", argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mesh", default=default_mesh.cli(),
                        help=f"mesh axes, e.g. dp=2,tp=2 (default {default_mesh.cli()}; "
                             "'' for one device)")
    parser.add_argument("--run", action="store_true",
                        help="compile with par-opt, run with par-run and compare every output "
                             "with the numpy reference")
    parser.add_argument("--steps", type=int, default=3, help="steps to run (with --run)")
    parser.add_argument("--seed", type=int, default=0, help="initialization and data seed")
    parser.add_argument("--data", help="token file for par-run --data (default: synthetic)")
    args = parser.parse_args(argv)
    mesh = Mesh.parse(args.mesh)
    graph = build(mesh)
    if not args.run:
        sys.stdout.write(graph.to_mlir(header=header or None))
        return 0
    try:
        exe = compile_graph(graph, mesh=mesh if mesh.size > 1 else None)
        print("== plan ==")
        print(exe.plan_summary())
        print(f"== par-run: {exe.num_ranks} rank(s), {args.steps} step(s) ==")
        result = exe.run(steps=args.steps, seed=args.seed, data=args.data)
    except ParError as err:
        print(err, file=sys.stderr)
        for d in err.diagnostics:
            print(f"  {d}", file=sys.stderr)
        return 1
    for step in result.steps:
        print(step.text())
    print("== numpy reference ==")
    want = exe.reference(steps=args.steps, seed=args.seed, data=args.data)
    errors = {name: max_relative_error(result.outputs[name], value)
              for name, value in want.items()}
    if "loss" in want:
        print(f"loss after step {args.steps}: par-run {result.loss:.6f}, "
              f"reference {float(want['loss']):.6f}")
    worst = max(errors.values()) if errors else 0.0
    for name, err in errors.items():
        print(f"  {name:<10} max relative error {err:.2e}")
    ok = worst < 1e-4
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


__all__ = ["example_main"]
