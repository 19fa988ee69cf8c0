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
  googletest/ googletest's sources, built there for the conformance suite;
  prebuilt/   (--prebuild) par-run, the runtime tests and the GEMM
              benchmark built here for the CUDA backend without MPI or
              OpenBLAS (NCCL and cuBLASLt load from the GPU machine's
              toolkit or wheels), so verify.sh need not build there.
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
# The architecture the carried build is compiled for (the lent H100/H200).
PREBUILT_ARCH = "90"


def compile_model(par_opt, model, passes, out):
    cmd = [par_opt, str(model), *passes, f"--emit-program={out}", "-o", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(f"prepare: {model.name}: {' '.join(cmd)}\n{proc.stderr}")
        return False
    return True


def gpt_tiny_step(out: Path, build: Path, fuse: bool = False) -> bool:
    """GPT-tiny's training step on one rank, as the main job builds it."""
    sys.path.insert(0, str(ROOT / "python_frontend"))
    os.environ.setdefault("PAR_BUILD_DIR", str(build))
    import par  # noqa: E402
    from par import models  # noqa: E402
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 8, 16)
    exe = par.compile(graph, optimizer=par.AdamW(lr=3e-3, weight_decay=0.01, clip=1.0,
                                                 warmup=8, decay_steps=80), fuse=fuse)
    shutil.copy(exe.program_path, out)
    return True


def gpt2_step(out: Path, build: Path, fuse: bool = False) -> bool:
    """GPT-2 124M's training step, bf16 compute, batch 8 x 1024."""
    sys.path.insert(0, str(ROOT / "python_frontend"))
    os.environ.setdefault("PAR_BUILD_DIR", str(build))
    import par  # noqa: E402
    from par import models  # noqa: E402
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["124M"]), 8, 1024)
    exe = par.compile(graph, optimizer=par.AdamW(lr=3e-4, weight_decay=0.01,
                                                 precision="bf16"), fuse=fuse)
    shutil.copy(exe.program_path, out)
    return True


def prebuild(out: Path, build: Path, jobs: int) -> bool:
    """The runtime-only build with CUDA, stripped into out/prebuilt."""
    cmake = ["cmake", "-G", "Ninja", "-S", str(ROOT), "-B", str(build),
             "-DPAR_RUNTIME_ONLY=ON", "-DCMAKE_BUILD_TYPE=Release",
             "-DPAR_USE_OPENBLAS=OFF", "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON",
             f"-DCMAKE_CUDA_ARCHITECTURES={PREBUILT_ARCH}",
             # The GPU machine's CPU is not this one's.
             "-DPAR_CPU_ARCH=x86-64-v2"]
    if shutil.which("ccache"):
        cmake += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                  "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
    targets = ["par-run", "ParRuntimeConformanceTests", "ParRuntimeKernelTests",
               "ParRuntimeCudaLaunchTests", "par-cuda-gemm-bench", "par-fused-jit-bench",
               "par-cuda-attention-bench"]
    for cmd in (cmake, ["cmake", "--build", str(build), "-j", str(jobs),
                        "--target", *targets]):
        if subprocess.run(cmd).returncode != 0:
            sys.stderr.write(f"prepare: {' '.join(cmd)} failed\n")
            return False
    if not (build / "bin" / "par-cuda-gemm-bench").exists():
        sys.stderr.write("prepare: the runtime-only build has no CUDA backend\n")
        return False
    dest = out / "prebuilt"
    shutil.rmtree(dest, ignore_errors=True)
    for sub, names in (("bin", ["par-run", "par-cuda-gemm-bench", "par-fused-jit-bench",
                                "par-cuda-attention-bench"]),
                       ("unittests", targets[1:4])):
        (dest / sub).mkdir(parents=True)
        for name in names:
            shutil.copy(build / sub / name, dest / sub / name)
            subprocess.run(["strip", str(dest / sub / name)])
    (dest / "arch").write_text(PREBUILT_ARCH + "\n")  # verify.sh compares the GPU's
    (dest / "built-with").write_text(
        f"{subprocess.run(['uname', '-srm'], capture_output=True, text=True).stdout.strip()}, "
        "no MPI, built-in GEMM\n")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"),
                        help="build directory with bin/par-opt")
    parser.add_argument("--out", default=str(ROOT / "bench" / "cuda" / "deps"))
    parser.add_argument("--prebuild", action="store_true",
                        help="also build the CUDA runtime here into DEPS/prebuilt")
    parser.add_argument("--prebuild-dir", default=str(ROOT / "build-cuda-carry"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
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
        # Each model unfused and fused (the fused kernel on real programs).
        for suffix, extra in (("", []), ("-fused", ["--par-fuse"])):
            target = programs / f"{model.stem}{suffix}.parprog"
            ok &= compile_model(str(par_opt), model, passes + extra, target)
            # The steps to run travel next to the program.
            (programs / f"{model.stem}{suffix}.steps").write_text(
                (steps.group(1) if steps else "2") + "\n")
    for suffix, fuse in (("", False), ("-fused", True)):
        ok &= gpt_tiny_step(programs / f"gpt-tiny-train{suffix}.parprog", build, fuse)
        (programs / f"gpt-tiny-train{suffix}.steps").write_text("10\n")
        # Judged by its losses (compare_backends.py says why).
        (programs / f"gpt-tiny-train{suffix}.judge").write_text("losses\n")
    # The benchmark's GPT-2 124M step (not compared: run by gpt2_step.py).
    bench = out / "programs-bench"
    bench.mkdir(exist_ok=True)
    ok &= gpt2_step(bench / "gpt2-124m.parprog", build)
    ok &= gpt2_step(bench / "gpt2-124m-fused.parprog", build, fuse=True)

    include = out / "include" / "nlohmann"
    if not include.exists():
        shutil.copytree("/usr/include/nlohmann", include)
    gtest = out / "googletest"
    if not gtest.exists():
        shutil.copytree("/usr/src/googletest", gtest, symlinks=False)
    if args.prebuild:
        ok &= prebuild(out, Path(args.prebuild_dir), args.jobs)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"prepare: {len(list(programs.glob('*.parprog')))} programs, "
          f"{size / 2**20:.1f} MiB in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
