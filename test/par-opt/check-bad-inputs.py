"""Runs par-opt on every file of a corpus of broken inputs and on mutated
copies (truncations and byte flips) of valid ones. Every run must end with
exit status 0 or 1 -- never a signal or another code -- and a failing run
must print a located 'error:' diagnostic. Usage:
  check-bad-inputs.py [--pass=FLAG ...] CORPUS_DIR [VALID_FILE ...]
--pass flags are given to par-opt (e.g. --pass=--par-propagate), so passes
run on every mutant that still parses.
"""
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile

LOCATED_ERROR = re.compile(rb"^[^\n:]+:\d+:\d+: error: ", re.M)


PASS_FLAGS = []


def run(path):
    proc = subprocess.run(["par-opt", path, "-o", os.devnull] + PASS_FLAGS,
                          capture_output=True, timeout=60)
    return proc.returncode, proc.stderr


def check_failure(path, must_fail):
    code, stderr = run(path)
    problems = []
    if code < 0 or code not in (0, 1):
        problems.append(f"exit status {code} (crash or signal)")
    elif must_fail and code != 1:
        problems.append(f"accepted (exit {code}) but is broken input")
    if code == 1 and not LOCATED_ERROR.search(stderr):
        problems.append("no 'file:line:col: error:' diagnostic: "
                        + stderr.decode(errors="replace")[-300:])
    return path, problems


def mutations(text, count, rng):
    """Deterministic truncations and byte flips of `text`."""
    out = []
    for _ in range(count):
        cut = rng.randrange(1, len(text))
        out.append(text[:cut])
    for _ in range(count):
        data = bytearray(text)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.choice(b"{}[]()<>,:=%@\"?x0-")
        out.append(bytes(data))
    return out


def main():
    args = sys.argv[1:]
    while args and args[0].startswith("--pass="):
        PASS_FLAGS.append(args.pop(0)[len("--pass="):])
    corpus, valid = args[0], args[1:]
    jobs = []
    for name in sorted(os.listdir(corpus)):
        if name.endswith(".mlir"):
            jobs.append((os.path.join(corpus, name), True))
    rng = random.Random(2026)
    tmp = tempfile.mkdtemp(prefix="par-bad-")
    for v, path in enumerate(valid):
        with open(path, "rb") as f:
            text = f.read()
        for m, data in enumerate(mutations(text, 60, rng)):
            mutant = os.path.join(tmp, f"mutant-{v}-{m}.mlir")
            with open(mutant, "wb") as f:
                f.write(data)
            jobs.append((mutant, False))
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for path, problems in pool.map(lambda j: check_failure(*j), jobs):
            for problem in problems:
                failures += 1
                print(f"FAIL {path}: {problem}")
    print(f"checked {len(jobs)} inputs: {len(jobs) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
