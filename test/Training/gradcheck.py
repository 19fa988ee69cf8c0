#!/usr/bin/env python3
"""Finite-difference check of --par-autodiff gradients.

For each model (a forward function whose first result is a scalar loss):
the gradient program (--par-autodiff=optimizer=none) runs one step on one
rank and returns the loss and every parameter's gradient. The forward
program's initial parameters are read back from a checkpoint, moved by
+-eps along random directions d, written as checkpoints of step 0 and run
for one step (the same data as the gradient run). The central difference
(L(p + eps d) - L(p - eps d)) / 2 eps must match the gradient's projection
g . d within the tolerance, relative to |g| |d|.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys

FORMATS = {"F32": ("f", 4), "F64": ("d", 8)}


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write("$ " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
        raise SystemExit(1)
    return proc.stdout


def read_checkpoint(directory):
    """{name: (dtype, shape, [values])} of a one-rank checkpoint."""
    index = json.load(open(os.path.join(directory, "index.json")))
    tensors = {}
    for name, record in index["tensors"].items():
        (shard,) = record["shards"]
        blob = open(os.path.join(directory, shard["file"]), "rb").read()
        size = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + size])
        entry = header[shard["key"]]
        code, width = FORMATS[entry["dtype"]]
        start, end = entry["data_offsets"]
        data = blob[8 + size + start:8 + size + end]
        values = list(struct.unpack("<%d%s" % (len(data) // width, code), data))
        tensors[name] = (record["dtype"], record["global_shape"], values)
    return tensors


def write_checkpoint(directory, tensors):
    """A one-rank checkpoint of step 0 holding `tensors`."""
    os.makedirs(os.path.join(directory, "step-0"), exist_ok=True)
    header, blobs, offset, records = {}, [], 0, {}
    for name, (dtype, shape, values) in tensors.items():
        code, width = FORMATS[dtype.upper()]
        key = "%s@%s:%s" % (name, ",".join("0" for _ in shape),
                            "x".join(str(s) for s in shape))
        data = struct.pack("<%d%s" % (len(values), code), *values)
        header[key] = {"dtype": dtype.upper(), "shape": shape,
                       "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
        records[name] = {"dtype": dtype, "global_shape": shape,
                         "shards": [{"file": "step-0/rank-0.safetensors", "key": key,
                                     "offsets": [0] * len(shape), "shape": shape}]}
    text = json.dumps(header).encode()
    with open(os.path.join(directory, "step-0", "rank-0.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    index = {"format": "par-checkpoint", "version": 1, "step": 0,
             "metadata": {}, "tensors": records}
    json.dump(index, open(os.path.join(directory, "index.json"), "w"))


def outputs(path):
    """Every output of a --dump-outputs file, values as floats (non-finite
    ones are spelled "nan", "inf", "-inf")."""
    outs = json.load(open(path))["outputs"]
    for out in outs.values():
        out["values"] = [float(v) for v in out["values"]]
    return outs


def check(model, args):
    name = os.path.splitext(os.path.basename(model))[0]
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    opt, prun = os.path.join(args.bin, "par-opt"), os.path.join(args.bin, "par-run")
    fwd, grad = os.path.join(work, "fwd.json"), os.path.join(work, "grad.json")
    run([opt, model, "--emit-program=" + fwd, "-o", os.devnull])
    run([opt, model, "--par-autodiff=optimizer=none", "--emit-program=" + grad,
         "-o", os.devnull])
    base = os.path.join(work, "base")
    run([prun, fwd, "--steps", "1", "--save", base, "--log-every", "0"])
    params = read_checkpoint(base)
    run([prun, grad, "--steps", "1", "--log-every", "0", "--dump-outputs",
         os.path.join(work, "grad.out")])
    grads = outputs(os.path.join(work, "grad.out"))
    rng = random.Random(args.seed)
    worst = 0.0
    for k in range(args.directions):
        direction = {n: [rng.gauss(0, 1) for _ in v[2]] for n, v in params.items()}
        losses = []
        for sign in (1, -1):
            moved = {n: (dt, shape, [x + sign * args.eps * d
                                     for x, d in zip(values, direction[n])])
                     for n, (dt, shape, values) in params.items()}
            ck = os.path.join(work, "moved-%d-%d" % (k, sign))
            write_checkpoint(ck, moved)
            out = os.path.join(work, "moved-%d-%d.out" % (k, sign))
            run([prun, fwd, "--steps", "1", "--load", ck, "--log-every", "0",
                 "--dump-outputs", out])
            losses.append(next(iter(outputs(out).values()))["values"][0])
        numeric = (losses[0] - losses[1]) / (2 * args.eps)
        analytic = sum(g * d for n in params
                       for g, d in zip(grads["grad." + n]["values"], direction[n]))
        gnorm = sum(g * g for n in params for g in grads["grad." + n]["values"]) ** 0.5
        dnorm = sum(d * d for v in direction.values() for d in v) ** 0.5
        error = abs(numeric - analytic) / max(gnorm * dnorm, 1e-12)
        worst = max(worst, error)
    ok = worst <= args.tolerance
    print("%-22s params %3d  directions %d  max error %.2e  %s"
          % (name, sum(len(v[2]) for v in params.values()), args.directions,
             worst, "PASS" if ok else "FAIL"))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--eps", type=float, default=1e-3)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--directions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    models = []
    for m in args.models:
        if os.path.isdir(m):
            models += sorted(os.path.join(m, f) for f in os.listdir(m) if f.endswith(".mlir"))
        else:
            models.append(m)
    failures = sum(not check(m, args) for m in models)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
