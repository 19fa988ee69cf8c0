#!/usr/bin/env python3
"""Times --par-propagate on GPT-style training graphs of growing depth.

Each layer is a pre-norm transformer block written out op by op (layer
norms, QKV projections with rotary embeddings, grouped-KV attention, output
projection, GELU MLP, residuals), followed by the gradient ops of its
projections (two dots per forward dot, elementwise gradient products) and
an AdamW update per weight: about 115 ops per layer. Only the token batch
and each layer's QKV and up-projection weights are annotated, so
propagation infers everything else.

Prints one row per depth: ops, tensors, parse and propagation wall time
(from -mlir-timing), microseconds per op, and the time per layer relative
to the smallest graph (1.00 = perfectly linear growth).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


class Graph:
    """Emits par MLIR text with fresh SSA names."""

    def __init__(self):
        self.lines = []
        self.types = {}
        self.count = 0
        self.ops = 0

    def op(self, text, result_type=None):
        """Appends `%vN = text`, adding ` : result_type` when given (ops
        whose syntax carries a functional type pass it inside `text`)."""
        name = f"%v{self.count}"
        self.count += 1
        self.ops += 1
        suffix = f" : {result_type}" if result_type else ""
        self.lines.append(f"    {name} = {text}{suffix}")
        self.types[name] = result_type or text.rsplit("-> ", 1)[1]
        return name

    def raw(self, text):
        self.ops += 1
        self.lines.append(f"    {text}")


def t(*shape, dtype="f32"):
    return "tensor<" + "x".join(str(s) for s in shape) + f"x{dtype}>"


def build(layers, batch=8, seq=128, hidden=256, heads=8, kv_heads=4,
          ffn=1024, vocab=512):
    head_dim = hidden // heads
    g = Graph()
    args = []
    ann = '{par.sharding = #par.sharding<@mesh, %s>}'
    args.append(f"%ids: {t(batch, seq, dtype='i32')} " + ann % '[{"dp"}, {}]')
    args.append(f"%labels: {t(batch, seq, dtype='i32')}")
    args.append(f"%wte: {t(vocab, hidden)}")
    args.append("%lr: tensor<f32>")
    args.append("%step: tensor<i32>")
    weights = []
    x = g.op(f"par.embedding %wte, %ids : ({t(vocab, hidden)}, "
             f"{t(batch, seq, dtype='i32')}) -> {t(batch, seq, hidden)}")
    for i in range(layers):
        def w(name, shape, sharding=None):
            text = f"%{name}{i}: {t(*shape)}"
            if sharding:
                text += " " + ann % sharding
            args.append(text)
            weights.append((f"%{name}{i}", shape))
            return f"%{name}{i}"
        p = {
            "ln1": w("ln1_", [hidden]),
            "ln1b": w("ln1b_", [hidden]),
            "wq": w("wq", [hidden, heads, head_dim], '[{}, {"tp"}, {}]'),
            "wk": w("wk", [hidden, kv_heads, head_dim]),
            "wv": w("wv", [hidden, kv_heads, head_dim]),
            "wo": w("wo", [heads, head_dim, hidden]),
            "ln2": w("ln2_", [hidden]),
            "ln2b": w("ln2b_", [hidden]),
            "up": w("wup", [hidden, ffn], '[{}, {"tp"}]'),
            "down": w("wdown", [ffn, hidden]),
        }
        x = layer(g, x, p, batch, seq, hidden, heads, kv_heads,
                  head_dim, ffn)
    act = t(batch, seq, hidden)
    logits = g.op(f"par.dot {x}, %wte contract [2] x [1] : ({act}, "
                  f"{t(vocab, hidden)}) -> {t(batch, seq, vocab)}")
    loss = g.op(f"par.cross_entropy {logits}, %labels : ({t(batch, seq, vocab)}, "
                f"{t(batch, seq, dtype='i32')}) -> tensor<f32>")
    # Optimizer: one AdamW per weight, gradients stand-ins of the same shape.
    for name, shape in weights:
        ty = t(*shape)
        grad = g.op(f"par.mul {name}, {name}", ty)
        m = g.op(f"par.neg {grad}", ty)
        v = g.op(f"par.mul {grad}, {grad}", ty)
        g.raw(f"%upd{g.count}:3 = par.adamw {name}, {grad}, {m}, {v}, %lr, %step"
              f" : {ty}, {ty}, tensor<f32>, tensor<i32>")
        g.count += 1
    text = ['par.mesh @mesh <["dp"=2, "tp"=4]>', "",
            "func.func @train(" + ",\n    ".join(args) + ") -> tensor<f32> {"]
    text += g.lines
    text.append(f"    return {loss} : tensor<f32>")
    text.append("}")
    return "\n".join(text) + "\n", g.ops + 1


def layer(g, x, p, batch, seq, hidden, heads, kv_heads, head_dim, ffn):
    act = t(batch, seq, hidden)
    stat = t(batch, seq)

    def norm(x, gamma, beta):
        s = g.op(f"par.reduce sum {x} dims [2] : ({act}) -> {stat}")
        mean = g.op(f"par.broadcast {s} dims [0, 1] : ({stat}) -> {act}")
        c = g.op(f"par.sub {x}, {mean}", act)
        sq = g.op(f"par.mul {c}, {c}", act)
        var = g.op(f"par.reduce sum {sq} dims [2] : ({act}) -> {stat}")
        r = g.op(f"par.rsqrt {var}", stat)
        rb = g.op(f"par.broadcast {r} dims [0, 1] : ({stat}) -> {act}")
        n = g.op(f"par.mul {c}, {rb}", act)
        gb = g.op(f"par.broadcast {gamma} dims [2] : ({t(hidden)}) -> {act}")
        scaled = g.op(f"par.mul {n}, {gb}", act)
        bb = g.op(f"par.broadcast {beta} dims [2] : ({t(hidden)}) -> {act}")
        return g.op(f"par.add {scaled}, {bb}", act)

    def dot(a, b, contract, ta, tb, tr):
        out = g.op(f"par.dot {a}, {b} contract {contract} : ({ta}, {tb}) -> {tr}")
        return out

    qshape = t(batch, seq, heads, head_dim)
    kvshape = t(batch, seq, kv_heads, head_dim)
    h = norm(x, p["ln1"], p["ln1b"])
    q = dot(h, p["wq"], "[2] x [0]", act, t(hidden, heads, head_dim), qshape)
    k = dot(h, p["wk"], "[2] x [0]", act, t(hidden, kv_heads, head_dim), kvshape)
    v = dot(h, p["wv"], "[2] x [0]", act, t(hidden, kv_heads, head_dim), kvshape)
    q = g.op(f"par.rope {q}", qshape)
    k = g.op(f"par.rope {k}", kvshape)
    a = g.op(f"par.attention {q}, {k}, {v} causal", f"{qshape}, {kvshape}")
    o = dot(a, p["wo"], "[2, 3] x [0, 1]", qshape, t(heads, head_dim, hidden), act)
    x1 = g.op(f"par.add {x}, {o}", act)
    h2 = norm(x1, p["ln2"], p["ln2b"])
    ff = t(batch, seq, ffn)
    u = dot(h2, p["up"], "[2] x [0]", act, t(hidden, ffn), ff)
    # GELU written out (tanh approximation).
    u3 = g.op(f"par.mul {u}, {u}", ff)
    u3 = g.op(f"par.mul {u3}, {u}", ff)
    inner = g.op(f"par.add {u}, {u3}", ff)
    th = g.op(f"par.tanh {inner}", ff)
    one = g.op(f"par.exp {th}", ff)
    gl = g.op(f"par.mul {u}, {one}", ff)
    d = dot(gl, p["down"], "[2] x [0]", ff, t(ffn, hidden), act)
    x2 = g.op(f"par.add {x1}, {d}", act)

    # Gradient ops of this layer's projections: for y = x . W,
    # dx = dy . W^T and dW = x^T . dy (contracting batch and sequence).
    dy = g.op(f"par.neg {x2}", act)
    dgl = dot(dy, p["down"], "[2] x [1]", act, t(ffn, hidden), ff)
    dwd = dot(gl, dy, "[0, 1] x [0, 1]", ff, act, t(ffn, hidden))
    du = g.op(f"par.mul {dgl}, {th}", ff)
    du = g.op(f"par.mul {du}, {one}", ff)
    du = g.op(f"par.add {du}, {dgl}", ff)
    dh2 = dot(du, p["up"], "[2] x [1]", ff, t(hidden, ffn), act)
    dwu = dot(h2, du, "[0, 1] x [0, 1]", act, ff, t(hidden, ffn))
    dx1 = g.op(f"par.add {dy}, {dh2}", act)
    da = dot(dx1, p["wo"], "[2] x [2]", act, t(heads, head_dim, hidden), qshape)
    dwo = dot(a, dx1, "[0, 1] x [0, 1]", qshape, act, t(heads, head_dim, hidden))
    dq = g.op(f"par.mul {da}, {q}", qshape)
    dq = g.op(f"par.rope {dq}", qshape)
    dh = dot(dq, p["wq"], "[2, 3] x [1, 2]", qshape, t(hidden, heads, head_dim), act)
    dwq = dot(h, dq, "[0, 1] x [0, 1]", act, qshape, t(hidden, heads, head_dim))
    dk = g.op(f"par.mul {k}, {k}", kvshape)
    dh_k = dot(dk, p["wk"], "[2, 3] x [1, 2]", kvshape, t(hidden, kv_heads, head_dim), act)
    dwk = dot(h, dk, "[0, 1] x [0, 1]", act, kvshape, t(hidden, kv_heads, head_dim))
    dv = g.op(f"par.mul {v}, {v}", kvshape)
    dh_v = dot(dv, p["wv"], "[2, 3] x [1, 2]", kvshape, t(hidden, kv_heads, head_dim), act)
    dwv = dot(h, dv, "[0, 1] x [0, 1]", act, kvshape, t(hidden, kv_heads, head_dim))
    dsum = g.op(f"par.add {dh}, {dh_k}", act)
    dsum = g.op(f"par.add {dsum}, {dh_v}", act)
    dx = g.op(f"par.add {dsum}, {dx1}", act)
    dx = g.op(f"par.mul {dx}, {h}", act)
    dx = g.op(f"par.sub {dx}, {h2}", act)
    for grad in (dwd, dwu, dwo, dwq, dwk, dwv):
        g.op(f"par.sqrt {grad}", g.types[grad])
    # The layer's output feeds the next layer; the gradient keeps the chain
    # of backward ops connected to it.
    return g.op(f"par.add {x2}, {dx}", act)


def time_propagation(par_opt, path):
    cmd = [par_opt, path, "--par-propagate", "-mlir-timing",
           "-mlir-timing-display=list", "-o", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"par-opt failed on {path}:\n{proc.stderr[-2000:]}")
    times = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"\s*([0-9.]+) \(\s*[0-9.]+%\)\s+(\S+)", line)
        if m:
            times[m.group(2)] = float(m.group(1))
    return times.get("Parser", 0.0), times.get("PropagatePass", 0.0)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build_dir = os.environ.get("PAR_BUILD_DIR", os.path.join(root, "build"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_tool = os.path.join(build_dir, "bin", "par-opt")
    if not os.path.exists(default_tool):
        default_tool = shutil.which("par-opt") or default_tool
    parser.add_argument("--par-opt", default=default_tool,
                        help="par-opt binary (default: build/bin/par-opt, else PATH)")
    parser.add_argument("--layers", default="12,48,96",
                        help="comma-separated depths (default 12,48,96)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per depth; the fastest is reported")
    parser.add_argument("--keep", help="directory to keep the generated graphs in")
    args = parser.parse_args()
    if not os.path.exists(args.par_opt):
        sys.exit(f"par-opt not found at {args.par_opt}; build first (scripts/build.sh)")

    depths = [int(d) for d in args.layers.split(",")]
    workdir = args.keep or tempfile.mkdtemp(prefix="par-bench-")
    os.makedirs(workdir, exist_ok=True)
    rows = []
    for depth in depths:
        text, ops = build(depth)
        path = os.path.join(workdir, f"gpt-{depth}.mlir")
        with open(path, "w") as f:
            f.write(text)
        runs = [time_propagation(args.par_opt, path) for _ in range(args.repeat)]
        parse = min(r[0] for r in runs)
        prop = min(r[1] for r in runs)
        rows.append((depth, ops, parse, prop))

    base = rows[0][3] / rows[0][0] if rows[0][3] > 0 else 0.0
    print("propagation benchmark: GPT-style training graphs, mesh dp=2 x tp=4")
    print(f"par-opt: {args.par_opt}")
    print()
    print(f"| layers | ops    | parse (s) | propagate (s) | us/op | per-layer time vs {rows[0][0]} layers |")
    print("|-------:|-------:|----------:|--------------:|------:|------------------------:|")
    for depth, ops, parse, prop in rows:
        ratio = (prop / depth) / base if base else float("nan")
        print(f"| {depth:6d} | {ops:6d} | {parse:9.3f} | {prop:13.3f} | {prop / ops * 1e6:5.1f} | {ratio:23.2f} |")
    deepest = rows[-1]
    print()
    verdict = "meets" if deepest[3] < 1.0 else "MISSES"
    print(f"target: propagation under 1 s at {deepest[0]} layers: {deepest[3]:.3f} s ({verdict} the target)")
    if not args.keep:
        for depth in depths:
            os.remove(os.path.join(workdir, f"gpt-{depth}.mlir"))
        os.rmdir(workdir)


if __name__ == "__main__":
    main()
