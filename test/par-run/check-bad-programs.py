#!/usr/bin/env python3
"""Feeds par-run a corpus of broken programs made from a valid one.

Each mutant (a field removed, a value of the wrong type or out of range, the
file truncated, overlapping buffers, a future version, ...) must be rejected
before any rank starts: exit status 1, and a message that starts with
"par-run: error:" and names the file. A crash, a hang or a zero exit fails.
"""
import copy
import json
import os
import subprocess
import sys


def mutants(doc, text):
    yield "truncated-10", text[:10]
    yield "truncated-half", text[: len(text) // 2]
    yield "empty", ""
    yield "not-json", "par-program version 1\n"
    yield "array", "[]"

    def edit(name, fn):
        d = copy.deepcopy(doc)
        fn(d)
        return name, (json.dumps(d) if d != doc else None)

    rc = lambda d: d["rank_classes"][0]
    k = next(i for i, inst in enumerate(doc["rank_classes"][0]["instructions"]) if inst["operands"])
    yield edit("no-format", lambda d: d.pop("format"))
    yield edit("future-version", lambda d: d.update(version=99))
    yield edit("version-string", lambda d: d.update(version="1"))
    yield edit("no-mesh", lambda d: d.pop("mesh"))
    yield edit("zero-axis", lambda d: d["mesh"]["axes"][0].update(size=0))
    yield edit("ranks-mismatch", lambda d: d.update(num_ranks=d["num_ranks"] + 1))
    yield edit("unknown-group-axis", lambda d: d["groups"].append(["zz"]))
    yield edit("input-bad-dtype", lambda d: d["inputs"][0].update(dtype="f8"))
    yield edit("input-negative-shape", lambda d: d["inputs"][0].update(global_shape=[-1, 8]))
    yield edit("input-bad-role", lambda d: d["inputs"][0].update(role="weights"))
    yield edit("input-partial", lambda d: d["inputs"][0]["sharding"].update(partial=["dp"]))
    yield edit("sharding-rank", lambda d: d["inputs"][0]["sharding"].update(dims=[[]]))
    yield edit("sharding-unknown-axis", lambda d: d["inputs"][0]["sharding"].update(dims=[["qq"], []]))
    yield edit("uneven-split", lambda d: d["inputs"][0].update(global_shape=[5, 8]))
    yield edit("update-unknown", lambda d: d["outputs"][-1].update(updates="nope"))
    yield edit("class-rank-out-of-range", lambda d: rc(d)["ranks"].append(99))
    yield edit("class-missing-rank", lambda d: rc(d)["ranks"].pop())
    yield edit("buffer-bytes", lambda d: rc(d)["buffers"][0].update(bytes=3))
    yield edit("buffer-past-arena", lambda d: rc(d)["buffers"][0].update(offset=rc(d)["arena_bytes"]))
    yield edit("buffer-misaligned", lambda d: rc(d)["buffers"][0].update(offset=3))
    yield edit("buffer-overlap", lambda d: [b.update(offset=0) for b in rc(d)["buffers"]])
    yield edit("buffer-live-reversed", lambda d: rc(d)["buffers"][0].update(live=[5, 1]))
    # A parameter updated in place: its successor takes over its memory.
    reused = [i for i, b in enumerate(doc["rank_classes"][0]["buffers"]) if "reuses" in b]
    if reused:
        j = reused[0]
        yield edit("reuses-self", lambda d: rc(d)["buffers"][j].update(reuses=j))
        yield edit("reuses-range", lambda d: rc(d)["buffers"][j].update(reuses=10**6))
        yield edit("reuses-negative", lambda d: rc(d)["buffers"][j].update(reuses=-2))
        yield edit("reuses-other-offset", lambda d: rc(d)["buffers"][j].update(offset=rc(d)["buffers"][j]["offset"] + 64))
        yield edit("reuses-still-live", lambda d: rc(d)["buffers"][rc(d)["buffers"][j]["reuses"]].update(live=[0, rc(d)["buffers"][j]["live"][1]]))
        # The writer becomes a concat (same operands, one result): it cannot
        # write over the parameter it reads.
        def not_in_place(d):
            inst = rc(d)["instructions"][rc(d)["buffers"][j]["live"][0]]
            inst.update(op="concat", attrs={"dim": 0}, results=inst["results"][:1])
        yield edit("reuses-not-in-place", not_in_place)
    # Integers near or past the int64 range: each is checked without
    # overflow (an offset near INT64_MAX once passed `offset + bytes >
    # arena_bytes` and crashed).
    big, huge = 2**63 - 64, 2**64 - 64
    yield edit("buffer-offset-near-max", lambda d: rc(d)["buffers"][0].update(offset=big))
    yield edit("buffer-offset-uint64", lambda d: rc(d)["buffers"][0].update(offset=huge))
    yield edit("buffer-bytes-near-max", lambda d: rc(d)["buffers"][0].update(bytes=2**63 - 1))
    yield edit("buffer-shape-overflow", lambda d: rc(d)["buffers"][0].update(shape=[2**62, 2**62]))
    yield edit("buffer-shape-uint64", lambda d: rc(d)["buffers"][0].update(shape=[huge]))
    yield edit("buffer-live-near-max", lambda d: rc(d)["buffers"][0].update(live=[0, 2**63 - 1]))
    yield edit("buffer-live-uint64", lambda d: rc(d)["buffers"][0].update(live=[0, huge]))
    yield edit("buffer-reuses-uint64", lambda d: rc(d)["buffers"][0].update(reuses=huge))
    def arena_near_max(d):
        rc(d)["arena_bytes"] = 2**63 - 1
        rc(d)["buffers"][0].update(offset=big)
    yield edit("arena-near-max", arena_near_max)
    yield edit("arena-past-limit", lambda d: rc(d).update(arena_bytes=2**49))
    yield edit("arena-uint64", lambda d: rc(d).update(arena_bytes=huge))
    yield edit("peak-above-arena", lambda d: rc(d).update(peak_live_bytes=rc(d)["arena_bytes"] + 64))
    yield edit("alignment-not-power-of-two", lambda d: d["memory"].update(alignment=96))
    yield edit("alignment-huge", lambda d: d["memory"].update(alignment=2**40))
    yield edit("axis-size-overflow", lambda d: [a.update(size=2**62) for a in d["mesh"]["axes"]])
    yield edit("axis-size-uint64", lambda d: d["mesh"]["axes"][0].update(size=huge))
    yield edit("num-ranks-uint64", lambda d: d.update(num_ranks=huge))
    yield edit("version-uint64", lambda d: d.update(version=huge))
    yield edit("class-rank-near-max", lambda d: rc(d)["ranks"].append(2**63 - 1))
    yield edit("class-rank-uint64", lambda d: rc(d)["ranks"].append(huge))
    yield edit("binding-uint64", lambda d: rc(d)["inputs"].__setitem__(0, huge))
    yield edit("operand-uint64", lambda d: rc(d)["instructions"][k]["operands"].__setitem__(0, huge))
    yield edit("global-shape-overflow", lambda d: d["inputs"][0].update(global_shape=[2**62, 2**62]))
    yield edit("global-shape-past-limit", lambda d: d["inputs"][0].update(global_shape=[2**61, 8]))
    yield edit("global-shape-uint64", lambda d: d["inputs"][0].update(global_shape=[huge, 8]))
    yield edit("output-shape-overflow", lambda d: d["outputs"][0].update(global_shape=[2**62] * 4))
    params = [i for i, x in enumerate(doc["inputs"]) if x.get("init", {}).get("kind") == "normal"]
    if params:
        p = params[0]
        yield edit("init-std-null", lambda d: d["inputs"][p]["init"].update(std=None))
        yield edit("init-std-negative", lambda d: d["inputs"][p]["init"].update(std=-1.0))
        yield edit("init-std-string", lambda d: d["inputs"][p]["init"].update(std="inf"))
        yield edit("init-uniform-reversed", lambda d: d["inputs"][p].update(init={"kind": "uniform", "low": 1.0, "high": -1.0}))
        yield edit("init-constant-null", lambda d: d["inputs"][p].update(init={"kind": "constant", "value": None}))
    tokens = [i for i, x in enumerate(doc["inputs"]) if x.get("data") == "tokens"]
    if tokens:
        yield edit("vocab-uint64", lambda d: d["inputs"][tokens[0]].update(vocab=huge))
        yield edit("vocab-past-dtype", lambda d: d["inputs"][tokens[0]].update(vocab=2**62))
    yield edit("binding-count", lambda d: rc(d)["inputs"].pop())
    yield edit("binding-out-of-range", lambda d: rc(d)["inputs"].__setitem__(0, 10**6))
    yield edit("unknown-op", lambda d: rc(d)["instructions"][0].update(op="conv2d"))
    yield edit("operand-count", lambda d: rc(d)["instructions"][k]["operands"].extend([0, 0, 0, 0, 0, 0]))
    yield edit("operand-range", lambda d: rc(d)["instructions"][k]["operands"].__setitem__(0, 10**6))
    yield edit("operand-dead", lambda d: rc(d)["instructions"][-1]["operands"].__setitem__(0, 4))
    yield edit("no-results", lambda d: rc(d)["instructions"][0].update(results=[]))
    for i, inst in enumerate(doc["rank_classes"][0]["instructions"]):
        for key in list(inst["attrs"]):
            def drop(d, i=i, key=key):
                rc(d)["instructions"][i]["attrs"].pop(key)
            yield edit(f"inst{i}-{inst['op']}-no-{key}", drop)
            def wrong(d, i=i, key=key):
                rc(d)["instructions"][i]["attrs"][key] = "wrong"
            yield edit(f"inst{i}-{inst['op']}-bad-{key}", wrong)
            value = inst["attrs"][key]
            if isinstance(value, int) and not isinstance(value, bool):
                def past_int64(d, i=i, key=key):
                    rc(d)["instructions"][i]["attrs"][key] = 2**64 - 1
                yield edit(f"inst{i}-{inst['op']}-uint64-{key}", past_int64)


def main():
    par_run, program, work = sys.argv[1:4]
    with open(program) as f:
        text = f.read()
    doc = json.loads(text)
    os.makedirs(work, exist_ok=True)
    failures = 0
    count = 0
    for name, body in mutants(doc, text):
        optional = ("causal", "position_offset", "strides", "lhs_batch", "rhs_batch",
                    "theta", "epsilon", "momentum", "nesterov", "weight_decay", "beta1",
                    "beta2", "scale", "channel")
        if any(name.endswith("-no-" + key) for key in optional):
            continue  # dropping an optional attribute is valid
        if body is None:
            continue  # the edit changed nothing (no results to drop, say)
        count += 1
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            f.write(body)
        try:
            proc = subprocess.run([par_run, path, "--steps", "1"], capture_output=True,
                                  text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"{name}: HANG")
            failures += 1
            continue
        first = proc.stderr.splitlines()[0] if proc.stderr else ""
        if proc.returncode != 1 or not first.startswith("par-run: error: ") or path not in first:
            print(f"{name}: exit {proc.returncode}, stderr: {proc.stderr.strip()[:300]}")
            failures += 1
    print(f"{count} broken programs, {failures} not rejected cleanly")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
