"""A broken program (a mutant) given to par-run must be rejected before any
rank starts: exit status 1 and a "par-run: error:" message that names the
file and contains the expected text. Shared by the check-*.py scripts."""
import json
import os
import subprocess


def check_mutant(par_run, doc, work, name, expect, args=("--steps", "1"), timeout=120):
    """Writes `doc` as WORK/NAME.json, runs par-run on it with `args`, prints
    one line saying whether it was rejected cleanly, and returns that."""
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(doc, f)
    try:
        proc = subprocess.run([par_run, path, *args], capture_output=True, text=True,
                              timeout=timeout)
        ok = (proc.returncode == 1 and f"par-run: error: {path}" in proc.stderr
              and expect in proc.stderr)
        message = proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ""
    except subprocess.TimeoutExpired:
        ok, message = False, "timed out"
    print(f"{name}: {'rejected' if ok else 'NOT REJECTED CLEANLY'}: {message}")
    return ok
