#!/usr/bin/env python3
"""Sharded vs unsharded runs of the same model must compute the same numbers.

For each model file, runs the unsharded program on one rank, then every
sharding the file lists, each compiled with --par-propagate --par-partition
for its mesh and run with par-run on that many ranks, and compares every
output (relative error max|a - b| / max|b| below --tolerance). Also checks
that the measured peak memory of every rank equals the planned arena.

A model lists its shardings in comments:
  // SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}]
Each `%arg=SPEC` becomes `{par.sharding = #par.sharding<@mesh, SPEC>}` on
that argument; the mesh comes from --mesh. `// STEPS: N` sets the steps run
(default 2; outputs are compared after the last one, the logged loss of a
training step after every one). `// PASSES: ...` adds
par-opt options applied before partitioning, to both the unsharded and the
sharded programs (e.g. `--par-autodiff=optimizer=adamw` for training steps).
With --fuse the sharded programs are compiled with --par-fuse, so each is
compared, fused, against the unfused program on one rank; and the unsharded
program fused must give exactly (bit for bit) the unfused one's numbers.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys


def run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stdout.flush()
        sys.stderr.write(f"FAILED: {what}\n$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
        return None
    return proc.stdout


def model_files(paths):
    """The .mlir files named, those of named directories in sorted order."""
    models = []
    for path in paths:
        if os.path.isdir(path):
            models += sorted(os.path.join(path, f) for f in os.listdir(path)
                             if f.endswith(".mlir"))
        else:
            models.append(path)
    return models


def losses_of(log):
    """The loss par-run logs after each step: {step: loss}."""
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+)\s+loss (\S+)", log, re.M)}


def compare_losses(base, result):
    """Largest relative difference of the per-step losses (inf if the steps
    logged differ)."""
    if base.keys() != result.keys():
        return float("inf")
    return max((abs(result[k] - base[k]) / max(abs(base[k]), 1e-30) for k in base),
               default=0.0)


def annotate(text, assignments):
    for name, spec in assignments:
        pattern = re.compile(r"(%" + re.escape(name) + r"\s*:\s*tensor<[^>]*>)(\s*\{)?")
        attr = "par.sharding = #par.sharding<@mesh, " + spec + ">"

        def add(m):
            if m.group(2):  # merge into the existing attribute dictionary
                return m.group(1) + " {" + attr + ", "
            return m.group(1) + " {" + attr + "}"
        text, count = pattern.subn(add, text, count=1)
        if count != 1:
            raise SystemExit(f"no argument %{name} to annotate")
    return text


# `// SHARDING: MESH | auto`: no annotations; --auto-shard plans the model
# on a profile where compute is slow next to the links, so the plan splits.
AUTO = "auto"
AUTO_PROFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "profiles", "slow-compute.json")


def plan_inputs(text, assignments):
    """The source to compile and the passes that plan it: the model with the
    annotations of a sharding line, or as it is with --auto-shard."""
    if assignments == AUTO:
        return text, [f"--auto-shard=hardware={AUTO_PROFILE}"]
    return annotate(text, assignments), []


def parse_shardings(text):
    configs = []
    for line in text.splitlines():
        m = re.match(r"\s*//\s*SHARDING:\s*([^|]+)\|(.*)$", line)
        if not m:
            continue
        mesh = m.group(1).strip()
        if m.group(2).strip() == "auto":
            configs.append((mesh, AUTO))
            continue
        assignments = re.findall(r"%(\w+)=(\[.*?\])(?=\s+%|\s*$)", m.group(2).strip())
        configs.append((mesh, assignments))
    return configs


def ranks_of(mesh):
    n = 1
    for part in mesh.split(","):
        n *= int(part.split("=")[1]) if "=" in part else int(part)
    return n


def outputs_of(path):
    with open(path) as f:
        doc = json.load(f)
    return doc


def compare(base, other):
    worst = 0.0
    for name, out in base["outputs"].items():
        a = other["outputs"].get(name)
        if a is None or a["shape"] != out["shape"]:
            return float("inf")
        # float() reads the spelled non-finite values ("nan", "inf").
        ref = [float(v) for v in out["values"]]
        got = [float(v) for v in a["values"]]
        scale = max([abs(v) for v in ref] + [1e-30])
        err = max([abs(x - y) for x, y in zip(got, ref)] + [0.0]) / scale
        worst = max(worst, err)
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model files, or directories of them")
    parser.add_argument("--bin", help="directory of par-opt and par-run (default: PATH)")
    parser.add_argument("--work", required=True, help="scratch directory")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--fuse", action="store_true",
                        help="compile the sharded programs with --par-fuse")
    args = parser.parse_args()
    fuse = ["--par-fuse"] if args.fuse else []
    os.makedirs(args.work, exist_ok=True)
    par_opt = os.path.join(args.bin, "par-opt") if args.bin else shutil.which("par-opt")
    par_run = os.path.join(args.bin, "par-run") if args.bin else shutil.which("par-run")
    models = model_files(args.models)

    failures = 0
    print(f"{'model':<22} {'mesh':<16} {'ranks':>5} {'collectives':>11} "
          f"{'max rel err':>12} {'peak = plan':>11}  result")
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        with open(model) as f:
            text = f.read()
        steps = re.search(r"//\s*STEPS:\s*(\d+)", text)
        steps = steps.group(1) if steps else "2"
        passes = re.search(r"//\s*PASSES:\s*(.*)", text)
        passes = shlex.split(passes.group(1)) if passes else []
        configs = parse_shardings(text)
        if len(configs) < 1:
            raise SystemExit(f"{model}: no // SHARDING: lines")

        base_prog = os.path.join(args.work, f"{name}.base.json")
        base_out = os.path.join(args.work, f"{name}.base.out.json")
        if run([par_opt, model, *passes, f"--emit-program={base_prog}", "-o", os.devnull],
               f"{name}: compile unsharded") is None:
            failures += 1
            continue
        base_log = run([par_run, base_prog, "--steps", steps, "--log-every", "1",
                        "--dump-outputs", base_out], f"{name}: run unsharded")
        if base_log is None:
            failures += 1
            continue
        base = outputs_of(base_out)
        base_losses = losses_of(base_log)
        if fuse:
            # The unsharded program fused against itself unfused.
            fused_prog = os.path.join(args.work, f"{name}.fused.json")
            fused_out = os.path.join(args.work, f"{name}.fused.out.json")
            log = run([par_opt, model, *passes, *fuse, f"--emit-program={fused_prog}",
                       "-o", os.devnull], f"{name}: compile unsharded, fused") is not None and \
                run([par_run, fused_prog, "--steps", steps, "--log-every", "1",
                     "--dump-outputs", fused_out], f"{name}: run unsharded, fused")
            if not log:
                failures += 1
            else:
                err = max(compare(base, outputs_of(fused_out)),
                          compare_losses(base_losses, losses_of(log)))
                failures += err != 0.0
                print(f"{name:<22} {'fused':<16} {1:>5} {0:>11} {err:>12.3e} "
                      f"{'':>11}  {'PASS' if err == 0.0 else 'FAIL'}")

        for i, (mesh, assignments) in enumerate(configs):
            src = os.path.join(args.work, f"{name}.{i}.mlir")
            prog = os.path.join(args.work, f"{name}.{i}.json")
            out = os.path.join(args.work, f"{name}.{i}.out.json")
            auto = assignments == AUTO
            source, plan = plan_inputs(text, assignments)
            with open(src, "w") as f:
                f.write(source)
            ok = run([par_opt, src, f"--mesh={mesh}", *passes, *plan, "--par-propagate", "--par-partition",
                      *fuse, f"--emit-program={prog}", "-o", os.devnull],
                     f"{name}: compile for {mesh}") is not None
            log = ok and run([par_run, prog, "--steps", steps, "--log-every", "1",
                              "--dump-outputs", out], f"{name}: run on {mesh}")
            if not ok or log is None:
                failures += 1
                continue
            with open(prog) as f:
                program = json.load(f)
            collectives = sum(
                1 for inst in program["rank_classes"][0]["instructions"]
                if inst["op"] in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                  "collective_permute", "exchange"))
            result = outputs_of(out)
            err = max(compare(base, result), compare_losses(base_losses, losses_of(log)))
            memory = result["memory"]
            peak_ok = all(m == memory["planned"] for m in memory["measured"])
            passed = err < args.tolerance and peak_ok
            failures += not passed
            label = f"{mesh} auto" if auto else mesh
            print(f"{name:<22} {label:<16} {ranks_of(mesh):>5} {collectives:>11} "
                  f"{err:>12.3e} {str(peak_ok):>11}  {'PASS' if passed else 'FAIL'}")
    print(f"{failures} failure(s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
