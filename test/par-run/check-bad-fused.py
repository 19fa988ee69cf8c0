#!/usr/bin/env python3
"""Feeds par-run fused groups broken in each way the loader checks.

Every mutant of the program's one `fused` instruction must be rejected
before any rank starts: exit status 1 and a "par-run: error:" message that
names the file and contains the expected text. Prints one line per mutant.

  check-bad-fused.py PAR_RUN PROGRAM WORKDIR [--reduce | --norm | --dot]

With --reduce, the mutants break a group that ends in a reduction; with
--norm, one that ends in a layer_norm; with --dot, one that starts with a
dot.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutants import check_mutant  # noqa: E402


def mutants():
    def body(fn):
        return lambda inst: fn(inst["attrs"]["body"])
    step = lambda k, **kw: body(lambda b: b[k].update(**kw))
    yield "no-body", lambda inst: inst["attrs"].pop("body"), "missing field 'body'"
    yield "empty-body", body(lambda b: b.clear()), "must be a non-empty list of steps"
    yield "unknown-op", step(1, op="softmax"), "'softmax' cannot run in a fused group"
    yield "future-value", step(1, args=[1, 9]), "is not made before this step"
    yield "negative-value", step(1, args=[-1, 3]), "list of non-negative integers"
    yield "arity", step(2, args=[4, 4]), "gelu reads 1 values, not 2"
    yield "bad-dtype", step(2, dtype="f8"), "unknown element type 'f8'"
    yield "mixed-types", step(2, dtype="f64"), "gelu reads and makes values of one element type"
    yield "unbroadcast-operand", step(1, args=[1, 0]), "is not of the group's shape: broadcast it first"
    yield "broadcast-of-step", body(lambda b: b.append(
        {"op": "broadcast", "args": [4], "dims": [0, 1], "dtype": "f32"})), \
        "a broadcast reads an operand or a constant"
    yield "broadcast-dims", step(0, dims=[0]), "must map the operand's dims"
    yield "not-splat", step(3, splat=None, values=[1.0, 2.0]), "a constant in a fused group is a splat"
    yield "last-not-result", body(lambda b: b.append(
        {"op": "constant", "args": [], "splat": 1.0, "dtype": "f32"})), \
        "the last step must compute the result"
    yield "last-broadcast", body(lambda b: b.append(
        {"op": "broadcast", "args": [0], "dims": [1], "dtype": "f32"})), \
        "the last step must compute the result"
    yield "too-many", body(lambda b: b.extend([dict(b[2], args=[4])] * 70)), "holds at most 64 values"
    yield "missing-direction", body(lambda b: b.append(
        {"op": "compare", "args": [5, 5], "dtype": "i1"})), "missing field 'direction'"
    yield "two-results", lambda inst: inst["results"].append(inst["results"][0]), \
        "a fused group writes one result (or two when it ends in a reduce"


def reduce_mutants():
    """Mutants of a group [broadcast, add, gelu, mul, reduce] over 8x64."""
    def body(fn):
        return lambda inst: fn(inst["attrs"]["body"])
    last = lambda **kw: body(lambda b: b[-1].update(**kw))
    yield "reduce-not-last", body(lambda b: b.append(
        {"op": "neg", "args": [len(b) + 2], "dtype": "f32"})), \
        "a reduce in a fused group must be its last step"
    yield "reduce-dims", last(dims=[0]), "gives 64, not the result's 8"
    yield "reduce-bad-dim", last(dims=[2]), "must list dims of 8x64 in increasing order"
    yield "reduce-shape", last(shape=[8, 32]), "must map the operand's dims"
    yield "reduce-no-shape", body(lambda b: b[-1].pop("shape")), "missing field 'shape'"
    yield "reduce-of-operand", last(args=[0]), \
        "a reduce ending a fused group reads the value of the element-wise step before it"
    yield "reduce-type", last(dtype="f64"), \
        "a reduce in a fused group reads and makes floats of one element type"
    yield "kept-not-value", lambda inst: inst["results"].__setitem__(1, inst["results"][0]), \
        "the second result keeps the value the reduce reads: a f32 tensor of shape 8x64, not f32 8"
    yield "three-results", lambda inst: inst["results"].append(inst["results"][0]), \
        "has 3 results, expected 1 to 2"
    yield "reduce-huge-shape", last(shape=[1 << 30, 1 << 30]), "has more than 2^40 elements"

    def kept_in_place(inst, buffers):
        # The kept result takes the memory of the operand of its shape,
        # which dies at the group: a reduction may not write over it.
        kept = buffers[inst["results"][1]]
        operand = next(o for o in inst["operands"]
                       if buffers[o]["bytes"] == kept["bytes"])
        kept["reuses"] = operand
        kept["offset"] = buffers[operand]["offset"]
    yield "kept-in-place", kept_in_place, "cannot write over its own operand"


def dot_mutants():
    """Mutants of a group [dot, broadcast, add, gelu, constant, mul, add]
    over 8x64 with operands [x, w, b] (values 0-2, steps 3-9)."""
    def body(fn):
        return lambda inst: fn(inst["attrs"]["body"])
    first = lambda **kw: body(lambda b: b[0].update(**kw))
    yield "dot-not-first", body(lambda b: b.insert(1, dict(b[0]))), \
        "a dot in a fused group must be its first step"
    yield "dot-alone", body(lambda b: b.__delitem__(slice(1, None))), \
        "a dot in a fused group must be its first step, followed by element-wise steps"
    yield "dot-before-reduce", body(lambda b: b.append(
        {"op": "reduce", "args": [9], "kind": "sum", "dims": [1], "shape": [8, 64],
         "dtype": "f32"})), "(and no reduce or normalization)"
    yield "dot-type", first(dtype="f64"), \
        "a dot in a fused group reads and makes the result's element type (f32)"
    yield "dot-dims", first(lhs_contract=[0]), \
        "the dot's batch and contracting dims must pair dims of one size of 8x64 and 64x64"
    yield "dot-shape", first(args=[1, 1]), \
        "the dot of 64x64 and 64x64 makes 64x64, not the group's shape 8x64"
    yield "dot-future", first(args=[0, 5]), "is not made before this step"

    def integer_dot(inst, buffers, instructions, doc):
        # Operands, result and step all i32 (4 bytes, as f32), the inputs
        # and output they hold too: GEMMs are of floats.
        for b in list(inst["operands"][:2]) + inst["results"]:
            buffers[b]["dtype"] = "i32"
        for spec in doc["inputs"]:
            if spec["global_shape"] != [64]:
                spec["dtype"] = "i32"
        for spec in doc["outputs"]:
            spec["dtype"] = "i32"
        inst["attrs"]["body"][0]["dtype"] = "i32"
    yield "dot-integer", integer_dot, "a dot in a fused group computes floats, not i32"

    def result_in_place(inst, buffers):
        # The result takes the memory of the operand of its size the group
        # reads last (the residual): the GEMM would overwrite it first.
        result = buffers[inst["results"][0]]
        operand = inst["operands"][0]
        buffers[operand]["live"] = [buffers[operand]["live"][0], result["live"][0]]
        result["reuses"] = operand
        result["offset"] = buffers[operand]["offset"]
    yield "dot-in-place", result_in_place, "cannot write over its own operand"


def norm_mutants():
    """Mutants of a group [broadcast, add, add, layer_norm] over 8x64 with
    operands [bias, a, x, gamma, beta] (values 0-4, steps 5-8), keeping
    the sum."""
    def body(fn):
        return lambda inst: fn(inst["attrs"]["body"])
    last = lambda **kw: body(lambda b: b[-1].update(**kw))
    yield "norm-not-last", body(lambda b: b.append(
        {"op": "neg", "args": [len(b) + 4], "dtype": "f32"})), \
        "a layer_norm in a fused group must be its last step"
    yield "norm-of-operand", last(args=[1, 3, 4]), \
        "a layer_norm ending a fused group reads the value of the element-wise step before it"
    yield "norm-scale-step", last(args=[7, 6, 4]), \
        "reads its scales from the group's operands, not value 6"
    yield "norm-scale-shape", last(args=[7, 1, 4]), \
        "operand 1 is a scale of the layer_norm: a f32 tensor of shape [64], not f32 8x64"
    yield "norm-type", last(dtype="f64"), \
        "a layer_norm in a fused group reads and makes floats of the result's type"
    yield "norm-arity", last(args=[7, 3]), "layer_norm reads 3 values, not 2"
    yield "three-results", lambda inst: inst["results"].append(inst["results"][0]), \
        "has 3 results, expected 1 to 2"

    def kept_in_place(inst, buffers):
        # The kept sum takes the memory of the operand of its shape: a
        # normalization may not write over what it reads.
        kept = buffers[inst["results"][1]]
        operand = inst["operands"][1]
        kept["reuses"] = operand
        kept["offset"] = buffers[operand]["offset"]
    yield "kept-in-place", kept_in_place, "cannot write over its own operand"

    def result_over_kept(inst, buffers, instructions):
        # The normalized result takes the memory of the kept sum, as if the
        # sum died at the group (its later readers read the result): the
        # two are written together.
        kept_id, result_id = inst["results"][1], inst["results"][0]
        kept, result = buffers[kept_id], buffers[result_id]
        for other in instructions:
            if other is not inst:
                other["operands"] = [result_id if o == kept_id else o
                                     for o in other["operands"]]
        result["live"] = [result["live"][0],
                          max(result["live"][1], kept["live"][1])]
        kept["live"] = [kept["live"][0], result["live"][0]]
        result["reuses"] = kept_id
        result["offset"] = kept["offset"]
    yield "result-over-kept", result_over_kept, "two of its results cannot share memory"


def main():
    par_run, program, work = sys.argv[1:4]
    reductions = sys.argv[4:] == ["--reduce"]
    norms = sys.argv[4:] == ["--norm"]
    dots = sys.argv[4:] == ["--dot"]
    os.makedirs(work, exist_ok=True)
    with open(program) as f:
        doc = json.load(f)
    insts = doc["rank_classes"][0]["instructions"]
    last = "reduce" if reductions else "layer_norm" if norms else None
    k = next(i for i, inst in enumerate(insts) if inst["op"] == "fused" and
             (inst["attrs"]["body"][-1]["op"] == last or
              (last is None and inst["attrs"]["body"][-1]["op"] not in
               ("reduce", "layer_norm", "rms_norm"))))
    bad = 0
    chosen = (reduce_mutants() if reductions else
              norm_mutants() if norms else
              dot_mutants() if dots else mutants())
    for name, fn, expect in chosen:
        d = copy.deepcopy(doc)
        rc = d["rank_classes"][0]
        if fn.__code__.co_argcount == 4:  # also edits the inputs and outputs
            fn(rc["instructions"][k], rc["buffers"], rc["instructions"], d)
        elif fn.__code__.co_argcount == 3:  # also edits other instructions
            fn(rc["instructions"][k], rc["buffers"], rc["instructions"])
        elif fn.__code__.co_argcount == 2:  # also edits the buffers
            fn(rc["instructions"][k], rc["buffers"])
        else:
            fn(rc["instructions"][k])
        for s in d["rank_classes"][0]["instructions"][k]["attrs"].get("body", []):
            if s.get("splat", 0) is None:
                s.pop("splat")
        bad += not check_mutant(par_run, d, work, name, expect, timeout=60)
    print(f"{bad} of the fused mutants not rejected cleanly")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
