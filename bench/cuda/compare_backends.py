#!/usr/bin/env python3
"""Runs each program on the CPU backend and on the CUDA backend and
compares every output and every logged loss (relative to the largest
magnitude, as test/Integration/equivalence.py does).

Prints one line per program and exits non-zero when any differs by more
than --tolerance (1e-5 for f32 programs; programs that compute in bf16 or
f16 are held to --low-tolerance, as the kernels of the two backends round
at different points). A program with a PROGRAM.judge file holding
"losses" is judged by its losses alone (its outputs' error is printed):
GPT-tiny's AdamW states after 10 steps, where a gradient is zero up to
rounding (a key bias under softmax's shift invariance) and AdamW scales
that rounding up to the learning rate. A run whose kernels needed more
scratch than par-run set aside from the program fails too.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

# The comparisons of the equivalence harness (outputs relative to their
# largest magnitude, losses step by step).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "Integration"))
from equivalence import compare, compare_losses, losses_of  # noqa: E402


def run(par_run, program, backend, steps, out):
    cmd = [par_run, str(program), f"--backend={backend}", "--steps", str(steps),
           "--log-every", "1", "--dump-outputs", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def low_precision(program):
    text = program.read_text()
    return '"bf16"' in text or '"f16"' in text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--par-run", required=True)
    parser.add_argument("--programs", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--low-tolerance", type=float, default=2e-2)
    parser.add_argument("--against", default="cuda",
                        help="the backend compared with the CPU's (cpu checks this script)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    failed = 0
    print(f"{'program':<26} {'steps':>5} {'max rel err':>12} {'loss rel err':>12}  result")
    for program in sorted(Path(args.programs).glob("*.parprog")):
        steps_file = program.with_suffix(".steps")
        steps = int(steps_file.read_text()) if steps_file.exists() else 2
        outs, logs = {}, {}
        status = ""
        for backend in ("cpu", args.against):
            out = work / f"{program.stem}.{backend}.{len(outs)}.json"
            code, log = run(args.par_run, program, backend, steps, out)
            if code != 0:
                status = f"FAIL ({backend}: exit {code}: {log.strip().splitlines()[-1] if log.strip() else ''})"
                break
            # A launch that needed more scratch than the executor set aside
            # from the program: the backend's size function undercounts.
            short = [line for line in log.splitlines() if "undercounts" in line]
            if short:
                status = f"FAIL ({backend}: {short[0].strip()})"
                break
            outs[backend] = json.loads(out.read_text())
            logs[backend] = losses_of(log)
        other = args.against
        if status:
            print(f"{program.stem:<26} {steps:>5} {'-':>12} {'-':>12}  {status}")
            failed += 1
            continue
        err = compare(outs["cpu"], outs[other])
        loss_err = compare_losses(logs["cpu"], logs[other])
        tol = args.low_tolerance if low_precision(program) else args.tolerance
        judge = program.with_suffix(".judge")
        losses_only = judge.exists() and judge.read_text().strip() == "losses"
        ok = (loss_err if losses_only else max(err, loss_err)) <= tol
        if losses_only and not (logs["cpu"] and logs[other]):
            ok = False  # judged by losses that neither log printed
        failed += not ok
        print(f"{program.stem:<26} {steps:>5} {err:>12.2e} {loss_err:>12.2e}  "
              f"{'ok' if ok else 'FAIL'} (tolerance {tol:g}"
              f"{'; losses judged, outputs not' if losses_only else ''})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
