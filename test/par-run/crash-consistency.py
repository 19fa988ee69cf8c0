#!/usr/bin/env python3
"""Kills a rank at every point of a checkpoint save and checks what is left.

usage: crash-consistency.py PAR_OPT PAR_RUN MODEL WORKDIR

For each fault-injection point of a save (PAR_RUN_INJECT_CRASH=RANK:POINT,
docs/par-run.md) and each rank that reaches it, a run resumes from a
published checkpoint and is killed while saving the next step, or while
saving a step the directory already holds (with other values). Afterwards:
the directory's checkpoint is, bit for bit, either the one published before
or the complete new one (the old one until the index is renamed), never a
mixture; par-run loads it; and a later save succeeds and leaves no staging
directory or temporary file. A save under a file-size limit (a disk that
fills) fails with a clear error and leaves the previous checkpoint whole.
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_reader  # noqa: E402

par_opt, par_run, model, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
program = os.path.join(work, "lm.json")
failures = []


def run(*args, env=None, expect=0):
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([par_run, program, "--log-every", "0", *args],
                       env=full_env, capture_output=True, text=True,
                       timeout=120)
    ok = p.returncode == 0 if expect == 0 else p.returncode != 0
    if not ok:
        failures.append(f"par-run {' '.join(args)} {env or ''}: exit "
                        f"{p.returncode}\n{p.stdout}{p.stderr}")
    return p


def leftovers(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        found += [os.path.join(root, n) for n in dirs if n.endswith(".partial")]
        found += [os.path.join(root, n) for n in files if ".tmp." in n]
    return found


subprocess.run([par_opt, model, "--mesh=dp=1,tp=2", "--par-propagate",
                "--par-partition", f"--emit-program={program}", "-o",
                os.devnull], check=True)

# Step 2, published; step 3 saved from it without faults; step 3 of a run
# from another seed (the values a re-save writes over an existing step 3).
base = os.path.join(work, "base")
run("--steps", "2", "--save", base)
old = ckpt_reader.load(base)
new_dir = os.path.join(work, "new")
shutil.copytree(base, new_dir)
run("--load", new_dir, "--steps", "1", "--save", new_dir)
new = ckpt_reader.load(new_dir)
other_dir = os.path.join(work, "other")
shutil.copytree(base, other_dir)
run("--seed", "1", "--steps", "3", "--save", other_dir)
other = ckpt_reader.load(other_dir)
assert old[0] == 2 and new[0] == 3 and other[0] == 3
assert not ckpt_reader.same(new, other), "the two step-3 saves must differ"

# The points of a save in order; those from index.renamed on come after the
# publication.
shard_points = ["shard.created", "shard.written", "shard.synced",
                "shard.renamed"]
rank0_points = ["manifest.created", "manifest.written", "manifest.synced",
                "manifest.renamed", "staging.renamed", "index.created",
                "index.written", "index.synced", "index.renamed", "pruned"]
cases = [(r, p) for p in shard_points for r in (0, 1)]
cases += [(0, p) for p in rank0_points]
published = {"index.renamed", "pruned"}

def check(case):
    """Runs one interrupted save; returns what went wrong."""
    n, scenario, start, before, after, args, rank, point = case
    label = f"{scenario}, rank {rank} killed at {point}"
    d = os.path.join(work, f"case-{n}")
    shutil.copytree(start, d)
    problems = []
    p = run(*[d if a is None else a for a in args], "--save", d,
            env={"PAR_RUN_INJECT_CRASH": f"{rank}:{point}"}, expect=1)
    if p.returncode == 0:
        return [f"{label}: the save was not interrupted"]
    try:
        got = ckpt_reader.load(d)
    except Exception as e:  # noqa: BLE001
        return [f"{label}: no loadable checkpoint: {e}"]
    want = after if point in published else before
    if not ckpt_reader.same(got, want):
        which = "the new" if ckpt_reader.same(got, after) else \
            "the old" if ckpt_reader.same(got, before) else "a mixed"
        problems.append(f"{label}: {which} checkpoint is published")
    # par-run itself loads it (checksums and save ids verified), and the
    # next save succeeds and cleans up after the killed one.
    run("--load", d, "--steps", "1", "--save", d)
    if leftovers(d):
        problems.append(f"{label}: left {leftovers(d)}")
    shutil.rmtree(d, ignore_errors=True)
    return problems


resume = ["--load", None, "--steps", "1"]
all_cases = []
for scenario, start, before, after, args in [
        ("new step", base, old, new, resume),
        ("same step again", new_dir, new, other,
         ["--seed", "1", "--steps", "3"])]:
    for rank, point in cases:
        all_cases.append((len(all_cases), scenario, start, before, after,
                          args, rank, point))
# The runs mostly wait on process start and teardown: a few at a time.
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    for problems in pool.map(check, all_cases):
        failures.extend(problems)
checked = len(all_cases)

# I/O errors (PAR_RUN_INJECT_ERROR=RANK:POINT, EIO at that point) instead
# of kills: before the index rename the save fails cleanly and the old
# checkpoint stays; after it (only the directory sync fails) the new one is
# published and stays, and the error says so. Either way one error line,
# and nothing left behind.
errors = [(1, "shard.written", False), (0, "shard.synced", False),
          (0, "manifest.written", False), (0, "staging.renamed", False),
          (0, "index.synced", False), (0, "index.renamed", True)]
for rank, point, after_publication in errors:
    label = f"I/O error on rank {rank} at {point}"
    d = os.path.join(work, "error")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base, d)
    p = run("--load", d, "--steps", "1", "--save", d, expect=1,
            env={"PAR_RUN_INJECT_ERROR": f"{rank}:{point}"})
    if p.stderr.count("par-run: error:") != 1 or \
            "injected failure" not in p.stderr:
        failures.append(f"{label}: not one clear error line:\n{p.stderr}")
    if after_publication and "the checkpoint is published" not in p.stderr:
        failures.append(f"{label}: the error does not say it is published")
    want = new if after_publication else old
    if not ckpt_reader.same(ckpt_reader.load(d), want):
        failures.append(f"{label}: not the {'new' if after_publication else 'old'}"
                        " checkpoint")
    if leftovers(d) or (not after_publication and
                        any(n.startswith("step-3") for n in os.listdir(d))):
        failures.append(f"{label}: left {leftovers(d) or os.listdir(d)}")
    checked += 1

# A disk that fills: the ranks' files cannot grow past 256 bytes
# (PAR_RUN_INJECT_FILE_LIMIT, a file-size limit set after MPI starts).
d = os.path.join(work, "full")
shutil.copytree(base, d)
p = run("--load", d, "--steps", "1", "--save", d, expect=1,
        env={"PAR_RUN_INJECT_FILE_LIMIT": "256"})
if "par-run: error: cannot save step 3 to" not in p.stderr or \
        "File too large" not in p.stderr:
    failures.append(f"disk full: unclear error:\n{p.stderr}")
if p.stderr.count("par-run: error:") != 1:
    failures.append(f"disk full: not one error line:\n{p.stderr}")
if not ckpt_reader.same(ckpt_reader.load(d), old):
    failures.append("disk full: the previous checkpoint changed")
if leftovers(d):
    failures.append(f"disk full: left {leftovers(d)}")

for f in failures:
    print("FAIL:", f)
print(f"crash-consistency: {checked} interrupted saves checked, "
      f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
