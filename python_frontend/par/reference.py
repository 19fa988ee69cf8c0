"""A numpy reference executor for par graphs.

Every op of the catalogue is evaluated in float64 with the semantics of
par-run's CPU kernels (lib/Runtime/Cpu/Kernels.cpp): the tanh form of GELU,
f32 epsilon/theta/scale attributes, causal masking with position offsets,
grouped KV heads, the half-split rope layout, zeros for out-of-range
embedding ids, the mean cross-entropy. Values of bf16/f16 tensors are
rounded to their type after every op (as the runtime stores them); f32 values
are kept in float64, so the reference is more accurate than the runtime and
comparisons need an f32 tolerance.

Parameters and data are reproduced bit for bit from par-run's counter-based
generator (lib/Runtime/Rng.cpp: splitmix64 keyed by the seed and the FNV-1a
hash of the input's name, indexed by the global element index), so
`run(graph, seed=s, steps=n)` computes what `par-run --seed s --steps n`
computes, for any sharding.
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional

import numpy as np

from .graph import FLOAT_DTYPES, INT_DTYPES, Graph, Op, parse_init

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


# ----------------------------------------------------------------------------
# The runtime's random numbers
# ----------------------------------------------------------------------------

def _mix_int(x: int) -> int:
    x &= _MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    x ^= x >> 31
    return x


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def stream_of(name: str) -> int:
    """FNV-1a over the name's UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & _MASK
    return h


def random_bits(seed: int, stream: int, index) -> np.ndarray:
    key = _mix_int(_mix_int((seed + _GOLDEN) & _MASK) ^ stream)
    idx = np.asarray(index, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return _mix(np.uint64(key) + idx * np.uint64(_GOLDEN))


def random_uniform(seed: int, stream: int, index) -> np.ndarray:
    return (random_bits(seed, stream, index) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def random_normal(seed: int, stream: int, index) -> np.ndarray:
    idx = np.asarray(index, dtype=np.uint64)
    u1 = random_uniform(seed, stream, np.uint64(2) * idx)
    u2 = random_uniform(seed, stream, np.uint64(2) * idx + np.uint64(1))
    return np.sqrt(-2.0 * np.log(1.0 - u1)) * np.cos(2.0 * math.pi * u2)


# ----------------------------------------------------------------------------
# Element types
# ----------------------------------------------------------------------------

def _bf16_round(f32: np.ndarray) -> np.ndarray:
    bits = f32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    nan = np.isnan(f32)
    rounded = np.where(nan, ((bits >> 16) | 0x40) << 16, rounded)
    return (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def store(values, dtype: str) -> np.ndarray:
    """Values as the runtime stores them in `dtype` (double -> float ->
    bf16/f16 with round-to-nearest-even; float -> int truncates), returned
    as float64 for float types and native integers otherwise."""
    values = np.asarray(values)
    if dtype == "i1":
        return values != 0
    if dtype in INT_DTYPES:
        if np.issubdtype(values.dtype, np.floating):
            values = np.trunc(values)
        return values.astype(np.int64).astype(np.int32 if dtype == "i32" else np.int64)
    values = values.astype(np.float64)
    if dtype == "f64":
        return values
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = values.astype(np.float32)
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return f32.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        return _bf16_round(f32).astype(np.float64)
    return f32.astype(np.float64)


def _result(values, dtype: str) -> np.ndarray:
    """An op result: rounded for bf16/f16 (stored narrow), exact for f32/f64."""
    if dtype in ("bf16", "f16", "i1") or dtype in INT_DTYPES:
        return store(values, dtype)
    return np.asarray(values, dtype=np.float64)


def _f32(value: float) -> float:
    return float(np.float32(value))


# ----------------------------------------------------------------------------
# Inputs, as par-run fills them
# ----------------------------------------------------------------------------

def init_param(name: str, shape, dtype: str, init: str, seed: int = 0) -> np.ndarray:
    kind, numbers = parse_init(init)
    count = math.prod(shape)
    if kind == "normal":
        values = numbers[0] * random_normal(seed, stream_of(name), np.arange(count, dtype=np.uint64))
    elif kind == "uniform":
        low, high = numbers
        values = low + (high - low) * random_uniform(seed, stream_of(name),
                                                     np.arange(count, dtype=np.uint64))
    elif kind == "constant":
        values = np.full(count, numbers[0])
    elif kind == "ones":
        values = np.ones(count)
    else:
        values = np.zeros(count)
    return store(values.reshape(shape), dtype)


def init_params(graph: Graph, seed: int = 0) -> Dict[str, np.ndarray]:
    """Every parameter as `par-run --seed seed` initializes it."""
    return {p.name: init_param(p.name, p.shape, p.dtype, p.init, seed) for p in graph.params}


def _data_bytes(data) -> Optional[bytes]:
    if data is None or data == "synthetic":
        return None
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    with open(data, "rb") as f:
        return f.read()


def feed_data(graph: Graph, seed: int = 0, step: int = 1, data=None) -> Dict[str, np.ndarray]:
    """Every data input of step `step` (from 1). `data`: None for synthetic
    tokens, a file path or bytes (par-run --data FILE)."""
    text = _data_bytes(data)
    fed = {}
    for inp in graph.inputs:
        if inp.role != "data":
            continue
        count = math.prod(inp.shape)
        index = np.arange(count, dtype=np.uint64)
        if inp.feed == "random":
            stream = stream_of(inp.name) ^ ((step * _GOLDEN) & _MASK)
            fed[inp.name] = store(random_normal(seed, stream, index).reshape(inp.shape), inp.dtype)
            continue
        row = inp.shape[-1] if inp.shape else 1
        rows = count // row if row else 0
        shift = 1 if inp.feed == "targets" else 0
        position = (step - 1) * rows * row + np.arange(count, dtype=np.int64) + shift
        vocab = inp.vocab_size
        if text is None:
            bits = random_bits(seed, stream_of("synthetic tokens"), position.astype(np.uint64))
            tokens = (bits % np.uint64(vocab)).astype(np.int64)
        else:
            raw = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
            tokens = raw[position % len(raw)] % vocab
        fed[inp.name] = store(tokens.reshape(inp.shape), inp.dtype)
    return fed


# ----------------------------------------------------------------------------
# Ops
# ----------------------------------------------------------------------------

class KernelError(ValueError):
    """An op the runtime would reject at run time (e.g. a label outside the
    vocabulary)."""


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # C++ truncating division; x / 0 gives 0 and x / -1 the wrapped negation.
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.abs(a64) // np.abs(safe)
    q = np.where((a64 < 0) != (safe < 0), -q, q)
    q = np.where(b64 == 0, 0, q)
    with np.errstate(over="ignore"):
        q = np.where(b64 == -1, -a, q.astype(a.dtype))
    return q.astype(a.dtype)


def _binary(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if kind == "add":
            return a + b
        if kind == "sub":
            return a - b
        if kind == "mul":
            return a * b
        if kind == "div":
            return a / b if a.dtype.kind == "f" else _int_div(a, b)
        if kind == "max":
            return np.maximum(a, b)
        return np.minimum(a, b)


def _gelu(x):
    k = 0.7978845608028654
    return 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x * x * x)))


_UNARY = {
    "neg": lambda x: -x,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "gelu": _gelu,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "relu": lambda x: np.where(x < 0, np.zeros_like(x), x),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


def _reduce(kind: str, x: np.ndarray, dims) -> np.ndarray:
    axes = tuple(dims)
    if kind in ("sum", "mean"):
        if x.dtype.kind == "f":
            total = np.sum(x, axis=axes, dtype=np.float64)
            if kind == "mean":
                count = math.prod(x.shape[d] for d in axes)
                total = total / count
            return total
        with np.errstate(over="ignore"):
            return np.sum(x, axis=axes, dtype=x.dtype)
    if x.dtype.kind == "f":
        initial = -np.inf if kind == "max" else np.inf
    else:
        info = np.iinfo(x.dtype)
        initial = info.min if kind == "max" else info.max
    fn = np.max if kind == "max" else np.min
    return fn(x, axis=axes, initial=initial)


def _dot(lhs, rhs, lb, rb, lc, rc) -> np.ndarray:
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    batch = [lhs.shape[d] for d in lb]
    m = [lhs.shape[d] for d in lf]
    n = [rhs.shape[d] for d in rf]
    k = math.prod(lhs.shape[d] for d in lc)
    a = np.transpose(lhs, lb + lf + lc).reshape(math.prod(batch), math.prod(m), k)
    b = np.transpose(rhs, rb + rc + rf).reshape(math.prod(batch), k, math.prod(n))
    return np.matmul(a, b).reshape(batch + m + n)


def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    shifted = x - np.max(x, axis=dim, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


def _layer_norm(x, gamma, beta, eps):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * (1.0 / np.sqrt(var + _f32(eps))) * gamma + beta


def _rms_norm(x, gamma, eps):
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x * (1.0 / np.sqrt(ms + _f32(eps))) * gamma


def _attention(q, k, v, causal, scale, offset):
    b, s, h, d = q.shape
    t, hkv = k.shape[1], k.shape[2]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    scale = _f32(scale)
    group = h // hkv
    kk = np.repeat(k, group, axis=2)  # query head j reads KV head j // group
    vv = np.repeat(v, group, axis=2)
    scores = np.einsum("bshd,bthd->bhst", q, kk) * scale
    if t == 0:
        return np.zeros(q.shape)
    offset = int(np.clip(offset, -s - 1, t))
    visible = np.clip(np.arange(s) + offset + 1, 0, t) if causal else np.full(s, t)
    mask = np.arange(t)[None, :] < visible[:, None]           # [s, t]
    scores = np.where(mask, scores, -np.inf)
    rowmax = np.max(scores, axis=-1, keepdims=True)
    rowmax = np.where(np.isfinite(rowmax), rowmax, 0.0)
    e = np.where(mask, np.exp(scores - rowmax), 0.0)
    total = np.sum(e, axis=-1, keepdims=True)
    probs = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return np.einsum("bhst,bthd->bshd", probs, vv)


def _embedding(table, ids):
    vocab = table.shape[0]
    ok = (ids >= 0) & (ids < vocab)
    rows = table[np.where(ok, ids, 0)]
    return np.where(ok[..., None], rows, 0.0)


def _gather(operand, indices, dims):
    inside = np.ones(indices.shape[:-1], bool)
    coords = []
    for j, d in enumerate(dims):
        c = indices[..., j]
        inside &= (c >= 0) & (c < operand.shape[d])
        coords.append(np.where(inside, c, 0))
    # Move the indexed dims to the front and pick with the coordinates.
    rest = [d for d in range(operand.ndim) if d not in dims]
    moved = np.transpose(operand, list(dims) + rest)
    picked = moved[tuple(np.where(inside, c, 0) for c in coords)]
    mask = inside.reshape(inside.shape + (1,) * len(rest))
    return np.where(mask, picked, 0)


def _cross_entropy(logits, labels):
    vocab = logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    lab = labels.reshape(-1).astype(np.int64)
    if lab.size == 0:
        return np.float64(0.0)
    bad = np.nonzero((lab < 0) | (lab >= vocab))[0]
    if bad.size:
        t = int(bad[0])
        raise KernelError(f"cross_entropy: label {int(lab[t])} of token {t} is outside the "
                             f"vocabulary [0, {vocab})")
    rowmax = np.max(flat, axis=1)
    lse = rowmax + np.log(np.sum(np.exp(flat - rowmax[:, None]), axis=1))
    return np.float64(np.mean(lse - flat[np.arange(lab.size), lab]))


def _rope(x, theta, offset):
    _, s, _, d = x.shape
    half = d // 2
    positions = np.arange(s, dtype=np.float64) + offset
    inv = np.power(float(_f32(theta)), -2.0 * np.arange(half) / d)
    angle = positions[:, None] * inv[None, :]                  # [s, half]
    cos, sin = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
    lo, hi = x[..., :half], x[..., half:]
    return np.concatenate([lo * cos - hi * sin, lo * sin + hi * cos], axis=-1)


def _adamw(p, g, m, v, lr, step, a):
    t = float(step)
    if not t >= 1:
        raise KernelError(f"adamw: step must be >= 1 (steps are 1-based), got {t}")
    b1, b2, eps, wd = (_f32(a[k]) for k in ("beta1", "beta2", "epsilon", "weight_decay"))
    c1 = 1.0 / (1.0 - math.pow(_f32(a["beta1"]), t))
    c2 = 1.0 / (1.0 - math.pow(_f32(a["beta2"]), t))
    m1 = b1 * m + (1.0 - b1) * g
    v1 = b2 * v + (1.0 - b2) * g * g
    p1 = p - float(lr) * ((m1 * c1) / (np.sqrt(v1 * c2) + eps) + wd * p)
    return p1, m1, v1


def _sgd(p, g, buf, lr, a):
    mu, wd = _f32(a["momentum"]), _f32(a["weight_decay"])
    step = g + wd * p
    b1 = mu * buf + step
    p1 = p - float(lr) * (step + mu * b1 if a["nesterov"] else b1)
    return p1, b1


def evaluate_op(op: Op, args) -> list:
    """The results of one op on numpy operands."""
    k, a = op.kind, op.attrs
    out = op.results[0]
    if k in ("add", "sub", "mul", "div", "max", "min"):
        return [_result(_binary(k, args[0], args[1]), out.dtype)]
    if k in _UNARY:
        with np.errstate(all="ignore"):
            return [_result(_UNARY[k](args[0]), out.dtype)]
    if k == "compare":
        return [_COMPARE[a["direction"]](args[0], args[1])]
    if k == "select":
        return [np.where(args[0], args[1], args[2])]
    if k == "convert":
        src = args[0]
        if out.dtype in FLOAT_DTYPES:
            return [store(src.astype(np.float64), out.dtype)]
        return [store(src, out.dtype)]
    if k == "constant":
        return [store(a["value"], out.dtype)]
    if k == "broadcast":
        shape = [1] * out.rank
        for i, d in enumerate(a["dims"]):
            shape[d] = args[0].shape[i]
        return [np.broadcast_to(args[0].reshape(shape), out.shape).copy()]
    if k == "reduce":
        return [_result(_reduce(a["kind"], args[0], a["dims"]), out.dtype)]
    if k == "transpose":
        return [np.transpose(args[0], a["perm"])]
    if k == "reshape":
        return [args[0].reshape(out.shape)]
    if k == "slice":
        index = tuple(slice(s, l, st) for s, l, st in zip(a["starts"], a["limits"], a["strides"]))
        return [args[0][index]]
    if k == "pad":
        x = args[0]
        inner = a.get("interior") or [0] * x.ndim
        shape = [lo + n + max(n - 1, 0) * i + hi
                 for n, lo, hi, i in zip(x.shape, a["low"], a["high"], inner)]
        fill = a["fill"]
        if x.dtype.kind in "iu":
            # As par-run's kernel: NaN is 0, out of range clamps, else truncates.
            info = np.iinfo(x.dtype)
            fill = (0 if np.isnan(fill) else info.min if fill <= info.min
                    else info.max if fill >= info.max else int(fill))
        elif x.dtype == np.bool_:
            fill = fill != 0
        r = np.full(shape, fill, dtype=x.dtype)
        r[tuple(slice(lo, lo + (n - 1) * (i + 1) + 1 if n else lo, i + 1)
                for n, lo, i in zip(x.shape, a["low"], inner))] = x
        return [_result(r, out.dtype)]
    if k == "concat":
        return [np.concatenate(args, axis=a["dim"])]
    if k == "dot":
        if args[0].dtype.kind != "f":
            raise KernelError("dot: par-run's CPU kernel contracts float tensors only")
        return [_result(_dot(args[0], args[1], a["lhs_batch"], a["rhs_batch"],
                             a["lhs_contract"], a["rhs_contract"]), out.dtype)]
    with np.errstate(all="ignore"):
        if k == "softmax":
            return [_result(_softmax(args[0], a["dim"]), out.dtype)]
        if k in ("argmax", "argmin"):
            x = args[0]
            # The first NaN wins, as in par-run's kernel; else the first extreme.
            nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
            pick = (np.argmax if k == "argmax" else np.argmin)(x, axis=a["dim"])
            first_nan = np.argmax(nan, axis=a["dim"])
            pick = np.where(np.any(nan, axis=a["dim"]), first_nan, pick)
            return [_result(pick, out.dtype)]
        if k == "log_softmax":
            return [_result(_log_softmax(args[0], a["dim"]), out.dtype)]
        if k == "layer_norm":
            return [_result(_layer_norm(*args, a["epsilon"]), out.dtype)]
        if k == "rms_norm":
            return [_result(_rms_norm(*args, a["epsilon"]), out.dtype)]
        if k == "attention":
            return [_result(_attention(*args, a["causal"], a["scale"], a["position_offset"]),
                            out.dtype)]
        if k == "gather":
            return [_result(_gather(args[0], args[1], a["dims"]), out.dtype)]
        if k == "embedding":
            return [_result(_embedding(*args), out.dtype)]
        if k == "cross_entropy":
            return [_result(_cross_entropy(*args), out.dtype)]
        if k == "rope":
            return [_result(_rope(args[0], a["theta"], a["position_offset"]), out.dtype)]
        if k == "adamw":
            return [_result(r, out.dtype) for r in _adamw(*args, a)]
        if k == "sgd":
            return [_result(r, out.dtype) for r in _sgd(*args, a)]
    if k == "sharding_constraint":
        return [args[0]]
    raise NotImplementedError(f"reference: no semantics for par.{k}")


def evaluate(graph: Graph, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Runs the graph once on `inputs` (by input name); returns every output
    by name."""
    values: Dict[int, np.ndarray] = {}
    for inp in graph.inputs:
        if inp.name not in inputs:
            raise KeyError(f"reference: no value for input {inp.name!r}")
        value = np.asarray(inputs[inp.name])
        if tuple(value.shape) != inp.shape:
            raise ValueError(f"reference: input {inp.name!r} has shape {list(value.shape)}, "
                             f"expected {list(inp.shape)}")
        values[id(inp.tensor)] = store(value, inp.dtype) if inp.dtype in INT_DTYPES + ("i1",) \
            else np.asarray(value, dtype=np.float64)
    live = graph._live_ops()
    for op in graph.ops:
        if id(op) not in live:
            continue
        try:
            results = evaluate_op(op, [values[id(t)] for t in op.operands])
        except KernelError as err:
            raise KernelError(f"{op.loc}: {err}") from None
        for tensor, value in zip(op.results, results):
            values[id(tensor)] = np.asarray(value)
    return {out.name: values[id(out.tensor)] for out in graph.outputs}


def run(graph: Graph, steps: int = 1, seed: int = 0, data=None,
        params: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, np.ndarray]:
    """What `par-run --steps steps --seed seed [--data data]` computes: the
    outputs after the last step (outputs with `updates` replace their
    parameter between steps). `params` overrides initial parameter values."""
    state = init_params(graph, seed)
    if params:
        for name, value in params.items():
            state[name] = store(value, graph.input_named(name).dtype)
    outputs: Dict[str, np.ndarray] = {}
    for step in range(1, steps + 1):
        inputs = dict(state)
        inputs.update(feed_data(graph, seed, step, data))
        outputs = evaluate(graph, inputs)
        for out in graph.outputs:
            if out.updates is not None:
                target = graph.inputs[out.updates]
                state[target.name] = store(outputs[out.name], target.dtype)
    return outputs


__all__ = ["evaluate", "evaluate_op", "run", "init_params", "init_param", "feed_data",
           "store", "random_bits", "random_uniform", "random_normal", "stream_of",
           "KernelError"]
