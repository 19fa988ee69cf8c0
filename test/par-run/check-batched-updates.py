#!/usr/bin/env python3
"""Batched optimizer updates: what --par-fuse's programs batch, that a batch
computes what its members one by one compute, and that the loader rejects
each broken batch before any rank starts (exit status 1, a "par-run:
error:" naming the file and the expected text). Prints one line per check.

  check-batched-updates.py PAR_RUN PROGRAM WORKDIR
"""
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutants import check_mutant  # noqa: E402


def run(par_run, path, *extra):
    return subprocess.run([par_run, path, "--steps", "3", *extra],
                          capture_output=True, text=True, timeout=120)


def updates(insts):
    return [k for k, inst in enumerate(insts) if inst["op"] in ("adamw", "sgd")]


def mutants(insts, buffers):
    first = updates(insts)[0]
    member = insts[first + 1]

    def batch(value):
        return lambda d: d[first].update(batch=value)
    yield "batch-one", batch(1), "must be an integer of at least 2"
    yield "batch-text", batch("3"), "must be an integer of at least 2"
    yield "past-the-end", batch(len(insts) - first + 1), "instructions are left"
    yield "not-an-update", lambda d: d[first - 1].update(batch=2), \
        "only optimizer updates (adamw, sgd) run in batches"
    yield "nested", lambda d: d[first + 1].update(batch=2), \
        "starts a batch of its own inside this one"
    yield "other-slot", lambda d: d[first + 1].update(slot="F0"), \
        "is of another pipeline slot"

    # The second update's new moment moved onto the first update's
    # gradient: fine one after the other (the gradient is dead by then),
    # not at once.
    def shared(d, bufs):
        new_m, grad = member["results"][1], insts[first]["operands"][1]
        bufs[new_m].pop("reuses", None)
        bufs[new_m]["offset"] = bufs[grad]["offset"]
    yield "shared-memory", shared, "cannot run at once"


def main():
    par_run, program, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    with open(program) as f:
        doc = json.load(f)
    rc = doc["rank_classes"][0]
    insts = rc["instructions"]
    found = updates(insts)
    print(f"updates at {found}, batch {insts[found[0]].get('batch')}")

    # The batch against its members one by one: the same bits.
    plain = copy.deepcopy(doc)
    for inst in plain["rank_classes"][0]["instructions"]:
        inst.pop("batch", None)
    plain_path = os.path.join(work, "plain.json")
    with open(plain_path, "w") as f:
        json.dump(plain, f)
    dumps = []
    for path in (program, plain_path):
        out = os.path.join(work, os.path.basename(path) + ".out")
        proc = run(par_run, path, "--dump-outputs", out)
        if proc.returncode:
            print(f"{path}: failed: {proc.stderr.strip()}")
            return 1
        with open(out) as f:
            dumps.append(json.load(f)["outputs"])
    print("batched and one by one: " + ("same" if dumps[0] == dumps[1] else "DIFFERENT"))

    bad = 0
    for name, fn, expect in mutants(insts, rc["buffers"]):
        d = copy.deepcopy(doc)
        drc = d["rank_classes"][0]
        if name == "shared-memory":
            fn(drc["instructions"], drc["buffers"])
        else:
            fn(drc["instructions"])
        bad += not check_mutant(par_run, d, work, name, expect, args=("--steps", "3"))
    print(f"{bad} of the batch mutants not rejected cleanly")
    return 1 if bad or dumps[0] != dumps[1] else 0


if __name__ == "__main__":
    sys.exit(main())
