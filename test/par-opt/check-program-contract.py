#!/usr/bin/env python3
"""Compiles every model the examples and the test suite turn into programs,
through the par-opt pipelines they document, and checks each program with
par-check-program (par-run's loader validation, nothing else).

par-opt already runs that validation before it writes a program; this
checks the files as written, from the outside. Prints one line per program
the loader rejects and a summary line. Usage:
  check-program-contract.py SRC_ROOT WORK_DIR
"""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys


def cases(root):
    """(name, input, par-opt flags) of each program to emit."""
    partition = ["--par-propagate", "--par-partition"]
    # The examples, as their READMEs and headers say to compile them.
    for model in ["mlp/mlp.mlir", "gpt-tiny/gpt_tiny.mlir", "llama-tiny/llama_tiny.mlir"]:
        yield model, f"{root}/examples/{model}", partition
    yield "megatron-mlp", f"{root}/examples/megatron-mlp/mlp.mlir", ["--mesh=dp=2,tp=4"] + partition
    yield "transformer-block", f"{root}/examples/transformer-block/block.mlir", ["--mesh=dp=2,tp=4"] + partition
    # The runtime tests' model, as test/par-run and test/Training compile it.
    lm = f"{root}/test/par-run/Inputs/lm.mlir"
    yield "lm.1", lm, ["--mesh=dp=1,tp=1"]
    yield "lm.4", lm, ["--mesh=dp=2,tp=2"] + partition
    yield "lm.tp4", lm, ["--mesh=dp=1,tp=4"] + partition
    yield "lm.fp16", f"{root}/test/Training/Inputs/lm.mlir", ['--par-autodiff=optimizer=adamw lr=0.01 precision=fp16 '
                          'loss-scale=1099511627776 scale-window=2']
    uneven = f"{root}/test/par-run/Inputs/lm-uneven.mlir"
    yield "lm-uneven.1", uneven, ["--mesh=dp=1,tp=1"]
    yield "lm-uneven.8", uneven, ["--mesh=dp=1,tp=8"] + partition
    yield "lm-uneven.4", uneven, ["--mesh=dp=2,tp=4"] + partition
    # The equivalence models as test/Integration/equivalence.py compiles
    # them: unsharded, then under each of their shardings.
    sys.path.insert(0, f"{root}/test/Integration")
    import equivalence
    inputs = f"{root}/test/Integration/Inputs"
    for model in equivalence.model_files([inputs, f"{inputs}/mixed"]):
        name = os.path.splitext(os.path.relpath(model, inputs))[0]
        with open(model) as f:
            text = f.read()
        passes = re.search(r"//\s*PASSES:\s*(.*)", text)
        passes = shlex.split(passes.group(1)) if passes else []
        yield name, model, passes
        for i, (mesh, assignments) in enumerate(equivalence.parse_shardings(text)):
            source, plan = equivalence.plan_inputs(text, assignments)
            yield f"{name}.{i}", (model, source), \
                [f"--mesh={mesh}"] + passes + plan + partition


def emit(work, name, source, flags):
    if isinstance(source, tuple):
        path = os.path.join(work, name.replace("/", "_") + ".mlir")
        with open(path, "w") as f:
            f.write(source[1])
        source = path
    program = os.path.join(work, name.replace("/", "_") + ".json")
    proc = subprocess.run(["par-opt", source, *flags, f"--emit-program={program}",
                           "-o", os.devnull], capture_output=True, text=True)
    if proc.returncode != 0:
        return name, None, proc.stderr.strip()
    return name, program, ""


def main():
    root, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda c: emit(work, *c), cases(root)))
    failures = 0
    for name, program, error in results:
        if program is None:
            print(f"{name}: par-opt failed: {error}")
            failures += 1
    programs = [p for _, p, _ in results if p]
    proc = subprocess.run(["par-check-program", *programs], capture_output=True, text=True)
    accepted = proc.stdout.count(": ok")
    if proc.returncode != 0:
        print(proc.stderr.strip())
    print(f"{len(programs)} programs emitted, {accepted} accepted by the loader, "
          f"{len(programs) - accepted + failures} problem(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
