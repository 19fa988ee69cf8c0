#!/usr/bin/env python3
"""Everything bench/cuda/verify.sh needs that a GPU machine may lack.

Run here, on a machine with the compiler (par-opt) built; writes DEPS
(default bench/cuda/deps, ignored by git), which then travels with the
tree to the GPU machine:
  programs/   the runtime programs verify.sh runs on both backends: every
              integration model unsharded (1 rank: NCCL refuses two ranks
              on one GPU) with its PASSES and GPT-tiny's training step;
  programs-bench/  GPT-2 124M's training step (bf16, 8 x 1024) for
              bench/cuda/gpt2_step.py;
  include/    nlohmann/json's headers (header-only);
  googletest/ googletest's sources, built there for the conformance suite.
Nothing here needs a GPU; the programs are small JSON files.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def compile_model(par_opt, model, passes, out):
    cmd = [par_opt, str(model), *passes, f"--emit-program={out}", "-o", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"prepare: {model.name}: {' '.join(cmd)}\n{proc.stderr}")
        return False
    return True


def gpt_tiny_step(out: Path, build: Path) -> bool:
    """GPT-tiny's training step on one rank, as the main job builds it."""
    sys.path.insert(0, str(ROOT / "python_frontend"))
    os.environ.setdefault("PAR_BUILD_DIR", str(build))
    import par  # noqa: E402
    from par import models  # noqa: E402
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 8, 16)
    exe = par.compile(graph, optimizer=par.AdamW(lr=3e-3, weight_decay=0.01, clip=1.0,
                                                 warmup=8, decay_steps=80))
    shutil.copy(exe.program_path, out)
    return True


def gpt2_step(out: Path, build: Path) -> bool:
    """GPT-2 124M's training step, bf16 compute, batch 8 x 1024."""
    sys.path.insert(0, str(ROOT / "python_frontend"))
    os.environ.setdefault("PAR_BUILD_DIR", str(build))
    import par  # noqa: E402
    from par import models  # noqa: E402
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["124M"]), 8, 1024)
    exe = par.compile(graph, optimizer=par.AdamW(lr=3e-4, weight_decay=0.01,
                                                 precision="bf16"))
    shutil.copy(exe.program_path, out)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"),
                        help="build directory with bin/par-opt")
    parser.add_argument("--out", default=str(ROOT / "bench" / "cuda" / "deps"))
    args = parser.parse_args()
    build, out = Path(args.build), Path(args.out)
    par_opt = build / "bin" / "par-opt"
    if not par_opt.exists():
        raise SystemExit(f"prepare: {par_opt} not found: build par first")
    programs = out / "programs"
    programs.mkdir(parents=True, exist_ok=True)
    ok = True
    models = sorted((ROOT / "test" / "Integration" / "Inputs").glob("*.mlir"))
    for model in models:
        text = model.read_text()
        passes = re.search(r"//\s*PASSES:\s*(.*)", text)
        passes = shlex.split(passes.group(1)) if passes else []
        steps = re.search(r"//\s*STEPS:\s*(\d+)", text)
        target = programs / f"{model.stem}.parprog"
        ok &= compile_model(str(par_opt), model, passes, target)
        # The steps to run travel next to the program.
        (programs / f"{model.stem}.steps").write_text((steps.group(1) if steps else "2") + "\n")
    ok &= gpt_tiny_step(programs / "gpt-tiny-train.parprog", build)
    (programs / "gpt-tiny-train.steps").write_text("10\n")
    # The benchmark's GPT-2 124M step (not compared: run by gpt2_step.py).
    bench = out / "programs-bench"
    bench.mkdir(exist_ok=True)
    ok &= gpt2_step(bench / "gpt2-124m.parprog", build)

    include = out / "include" / "nlohmann"
    if not include.exists():
        shutil.copytree("/usr/include/nlohmann", include)
    gtest = out / "googletest"
    if not gtest.exists():
        shutil.copytree("/usr/src/googletest", gtest, symlinks=False)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"prepare: {len(list(programs.glob('*.parprog')))} programs, "
          f"{size / 2**20:.1f} MiB in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
