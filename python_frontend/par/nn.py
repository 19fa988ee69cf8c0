"""Layers built from par ops.

A module declares its parameters on the graph of the first tensor it is
called with, named `<module name>.<param>` (e.g. `h0.attn.wq`), so sharding
rules can address them by pattern (`"*.attn.wq": P(None, "tp", None)`).
Calling a module twice on one graph reuses its parameters (tied weights).

Layouts follow the par examples: activations are [batch, seq, hidden];
attention weights keep heads as their own dimension (wq: [hidden, heads,
head_dim], wo: [heads, head_dim, hidden]) so tensor parallelism splits heads
with a plain dimension sharding.
"""
from __future__ import annotations

import math
import weakref
from typing import Dict, Optional, Sequence

import numpy as np

from . import graph as ops
from .graph import Graph, Tensor


def _normal(std: float) -> str:
    return f"normal({std:.6g})"


class Module:
    """Base class: a name prefix, a parameter dtype, and per-graph
    parameter declarations."""

    def __init__(self, name: str, dtype: str = "f32"):
        self.name = name
        self.dtype = ops.dtype_of(dtype)
        self._declared: "weakref.WeakKeyDictionary[Graph, Dict[str, Tensor]]" = \
            weakref.WeakKeyDictionary()

    def qualified(self, pname: str) -> str:
        if not pname:
            return self.name
        return f"{self.name}.{pname}" if self.name else pname

    @ops.transparent
    def param(self, graph: Graph, pname: str, shape: Sequence[int], init: str) -> Tensor:
        """Declares (once per graph) and returns parameter `pname`."""
        table = self._declared.setdefault(graph, {})
        if pname not in table:
            table[pname] = graph.param(self.qualified(pname), list(shape), self.dtype, init=init)
        return table[pname]

    def _check_last(self, x: Tensor, size: int) -> None:
        if not isinstance(x, Tensor):
            raise ValueError(f"{type(self).__name__} {self.name!r}: expected a Tensor, got "
                             f"{type(x).__name__}")
        if x.rank < 1 or x.shape[-1] != size:
            raise ValueError(f"{type(self).__name__} {self.name!r}: expected an input whose last "
                             f"dimension is {size}, got {x.type}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Linear(Module):
    """y = x @ w (+ b); w: [in, out]."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool = False,
                 name: str = "linear", init_std: float = 0.02, dtype: str = "f32"):
        super().__init__(name, dtype)
        self.in_features, self.out_features = in_features, out_features
        self.bias, self.init_std = bias, init_std

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.in_features)
        w = self.param(x.graph, "w", [self.in_features, self.out_features], _normal(self.init_std))
        y = ops.dot(x, w, ([x.rank - 1], [0]), name=self.qualified("y"))
        if self.bias:
            b = self.param(x.graph, "b", [self.out_features], "zeros")
            y = ops.add(y, ops.broadcast(b, y.shape, [y.rank - 1]), name=self.qualified("yb"))
        return y


class Embedding(Module):
    """Token embedding table [vocab, dim], named after the module."""

    def __init__(self, vocab_size: int, dim: int, *, name: str = "wte",
                 init_std: float = 0.02, dtype: str = "f32"):
        super().__init__(name, dtype)
        self.vocab_size, self.dim, self.init_std = vocab_size, dim, init_std

    def table(self, graph: Graph) -> Tensor:
        return self.param(graph, "", [self.vocab_size, self.dim], _normal(self.init_std))

    def __call__(self, ids: Tensor) -> Tensor:
        if not isinstance(ids, Tensor):
            raise ValueError(f"Embedding {self.name!r}: expected a Tensor of ids")
        return ops.embedding(self.table(ids.graph), ids, name=self.qualified("x"))

    def attend(self, x: Tensor) -> Tensor:
        """Logits against the table (a tied output head): [..., vocab]."""
        self._check_last(x, self.dim)
        return ops.dot(x, self.table(x.graph), ([x.rank - 1], [1]), name="logits")


class LayerNorm(Module):
    def __init__(self, dim: int, *, eps: float = 1e-5, name: str = "ln", dtype: str = "f32"):
        super().__init__(name, dtype)
        self.dim, self.eps = dim, eps

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.dim)
        g = self.param(x.graph, "g", [self.dim], "ones")
        b = self.param(x.graph, "b", [self.dim], "zeros")
        return ops.layer_norm(x, g, b, self.eps, name=self.qualified("y"))


class RMSNorm(Module):
    def __init__(self, dim: int, *, eps: float = 1e-6, name: str = "norm", dtype: str = "f32"):
        super().__init__(name, dtype)
        self.dim, self.eps = dim, eps

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.dim)
        g = self.param(x.graph, "g", [self.dim], "ones")
        return ops.rms_norm(x, g, self.eps, name=self.qualified("y"))


_ACTIVATIONS = {"gelu": ops.gelu, "relu": ops.relu, "silu": ops.silu, "tanh": ops.tanh,
                "sigmoid": ops.sigmoid}


class MLP(Module):
    """w_down(act(w_up x)) with GELU by default (GPT-2); params w_up [dim,
    hidden], w_down [hidden, dim] and with `bias` b_up, b_down."""

    def __init__(self, dim: int, hidden: int, *, activation: str = "gelu", bias: bool = False,
                 name: str = "mlp", init_std: float = 0.02, out_std: Optional[float] = None,
                 dtype: str = "f32"):
        super().__init__(name, dtype)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {', '.join(_ACTIVATIONS)}, "
                             f"got {activation!r}")
        self.dim, self.hidden, self.activation, self.bias = dim, hidden, activation, bias
        self.init_std = init_std
        self.out_std = init_std if out_std is None else out_std

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.dim)
        g = x.graph
        w_up = self.param(g, "w_up", [self.dim, self.hidden], _normal(self.init_std))
        h = ops.dot(x, w_up, ([x.rank - 1], [0]), name=self.qualified("up"))
        if self.bias:
            b_up = self.param(g, "b_up", [self.hidden], "zeros")
            h = ops.add(h, ops.broadcast(b_up, h.shape, [h.rank - 1]))
        h = _ACTIVATIONS[self.activation](h, name=self.qualified(self.activation))
        w_down = self.param(g, "w_down", [self.hidden, self.dim], _normal(self.out_std))
        y = ops.dot(h, w_down, ([h.rank - 1], [0]), name=self.qualified("down"))
        if self.bias:
            b_down = self.param(g, "b_down", [self.dim], "zeros")
            y = ops.add(y, ops.broadcast(b_down, y.shape, [y.rank - 1]))
        return y


class SwiGLU(Module):
    """w_down(silu(w_gate x) * (w_up x)) (Llama)."""

    def __init__(self, dim: int, hidden: int, *, name: str = "mlp", init_std: float = 0.02,
                 out_std: Optional[float] = None, dtype: str = "f32"):
        super().__init__(name, dtype)
        self.dim, self.hidden, self.init_std = dim, hidden, init_std
        self.out_std = init_std if out_std is None else out_std

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.dim)
        g = x.graph
        w_gate = self.param(g, "w_gate", [self.dim, self.hidden], _normal(self.init_std))
        w_up = self.param(g, "w_up", [self.dim, self.hidden], _normal(self.init_std))
        w_down = self.param(g, "w_down", [self.hidden, self.dim], _normal(self.out_std))
        last = [x.rank - 1]
        gate = ops.silu(ops.dot(x, w_gate, (last, [0]), name=self.qualified("gate")),
                        name=self.qualified("silu"))
        up = ops.dot(x, w_up, (last, [0]), name=self.qualified("up"))
        h = ops.mul(gate, up, name=self.qualified("h"))
        return ops.dot(h, w_down, ([h.rank - 1], [0]), name=self.qualified("down"))


class Attention(Module):
    """Multi-head causal self-attention on [batch, seq, dim] with grouped KV
    heads (`n_kv_heads` dividing `n_heads`) and optional rotary embeddings.

    Params: wq [dim, H, Dh], wk/wv [dim, Hkv, Dh], wo [H, Dh, dim]; with
    `bias` also bq [H, Dh], bk/bv [Hkv, Dh], bo [dim].
    """

    def __init__(self, dim: int, n_heads: int, n_kv_heads: Optional[int] = None,
                 head_dim: Optional[int] = None, *, causal: bool = True,
                 rope_theta: Optional[float] = None, bias: bool = False, name: str = "attn",
                 init_std: float = 0.02, out_std: Optional[float] = None, dtype: str = "f32",
                 fused: bool = True):
        super().__init__(name, dtype)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if not fused and n_kv_heads != n_heads:
            raise ValueError(f"Attention {name!r}: unfused attention needs as many key/value "
                             f"heads as query heads, got {n_kv_heads} and {n_heads}")
        if head_dim is None:
            if dim % n_heads:
                raise ValueError(f"Attention {name!r}: dim {dim} is not divisible by "
                                 f"{n_heads} heads; pass head_dim")
            head_dim = dim // n_heads
        if n_kv_heads <= 0 or n_heads % n_kv_heads:
            raise ValueError(f"Attention {name!r}: {n_heads} query heads are not a multiple of "
                             f"{n_kv_heads} key/value heads")
        if rope_theta is not None and head_dim % 2:
            raise ValueError(f"Attention {name!r}: rotary embeddings need an even head_dim, "
                             f"got {head_dim}")
        self.dim, self.n_heads, self.n_kv_heads, self.head_dim = dim, n_heads, n_kv_heads, head_dim
        self.causal, self.rope_theta, self.bias = causal, rope_theta, bias
        self.init_std = init_std
        self.out_std = init_std if out_std is None else out_std
        self.fused = fused

    def _unfused(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Attention from its parts, as models without a fused kernel write
        it: scores q.k over the head dim, the causal mask, a softmax, the
        value product. Its score-sized values are what `--par-remat=selective`
        recomputes."""
        seq, head_dim = q.shape[1], q.shape[3]
        scores = ops.dot(q, k, ([3], [3]), ([0, 2], [0, 2]), name=self.qualified("scores"))
        scale = ops.constant(1.0 / math.sqrt(head_dim), scores.shape, q.dtype, graph=q.graph)
        scores = ops.mul(scores, scale, name=self.qualified("scaled"))
        if self.causal:
            visible = np.tril(np.ones((seq, k.shape[1]), dtype=np.bool_))
            mask = ops.broadcast(ops.constant(visible, graph=q.graph), scores.shape, [2, 3])
            lowest = ops.constant(-3.0e38, scores.shape, q.dtype, graph=q.graph)
            scores = ops.select(mask, scores, lowest, name=self.qualified("masked"))
        p = ops.softmax(scores, -1, name=self.qualified("p"))
        a = ops.dot(p, v, ([3], [1]), ([0, 1], [0, 2]), name=self.qualified("pv"))
        return ops.transpose(a, [0, 2, 1, 3], name=self.qualified("a"))

    def _project(self, x: Tensor, pname: str, heads: int, what: str) -> Tensor:
        g = x.graph
        w = self.param(g, f"w{pname}", [self.dim, heads, self.head_dim], _normal(self.init_std))
        if not self.bias:
            return ops.dot(x, w, ([2], [0]), name=self.qualified(what))
        y = ops.dot(x, w, ([2], [0]), name=self.qualified(what + "0"))
        b = self.param(g, f"b{pname}", [heads, self.head_dim], "zeros")
        return ops.add(y, ops.broadcast(b, y.shape, [2, 3]), name=self.qualified(what))

    def __call__(self, x: Tensor) -> Tensor:
        self._check_last(x, self.dim)
        if x.rank != 3:
            raise ValueError(f"Attention {self.name!r}: expected [batch, seq, {self.dim}], got {x.type}")
        q = self._project(x, "q", self.n_heads, "q")
        k = self._project(x, "k", self.n_kv_heads, "k")
        v = self._project(x, "v", self.n_kv_heads, "v")
        if self.rope_theta is not None:
            q = ops.rope(q, self.rope_theta, name=self.qualified("q_rope"))
            k = ops.rope(k, self.rope_theta, name=self.qualified("k_rope"))
        if self.fused:
            a = ops.attention(q, k, v, causal=self.causal, name=self.qualified("a"))
        else:
            a = self._unfused(q, k, v)
        wo = self.param(x.graph, "wo", [self.n_heads, self.head_dim, self.dim],
                        _normal(self.out_std))
        o = ops.dot(a, wo, ([2, 3], [0, 1]), name=self.qualified("o"))
        if self.bias:
            bo = self.param(x.graph, "bo", [self.dim], "zeros")
            o = ops.add(o, ops.broadcast(bo, o.shape, [2]))
        return o


class GPTBlock(Module):
    """x + attn(ln1(x)), then x + mlp(ln2(x)) (pre-norm, GELU MLP)."""

    def __init__(self, dim: int, n_heads: int, *, n_kv_heads: Optional[int] = None,
                 mlp_hidden: Optional[int] = None, bias: bool = True, ln_eps: float = 1e-5,
                 n_layers: int = 1, rope_theta: Optional[float] = None, name: str = "h0",
                 init_std: float = 0.02, dtype: str = "f32", fused_attention: bool = True):
        super().__init__(name, dtype)
        # GPT-2: residual projections scaled by 1/sqrt(2 * layers).
        out_std = init_std / math.sqrt(2 * n_layers)
        self.ln1 = LayerNorm(dim, eps=ln_eps, name=self.qualified("ln1"), dtype=dtype)
        self.attn = Attention(dim, n_heads, n_kv_heads, rope_theta=rope_theta, bias=bias,
                              name=self.qualified("attn"), init_std=init_std, out_std=out_std,
                              dtype=dtype, fused=fused_attention)
        self.ln2 = LayerNorm(dim, eps=ln_eps, name=self.qualified("ln2"), dtype=dtype)
        self.mlp = MLP(dim, mlp_hidden or 4 * dim, activation="gelu", bias=bias,
                       name=self.qualified("mlp"), init_std=init_std, out_std=out_std,
                       dtype=dtype)

    def __call__(self, x: Tensor) -> Tensor:
        x = ops.add(x, self.attn(self.ln1(x)), name=self.qualified("x1"))
        return ops.add(x, self.mlp(self.ln2(x)), name=self.qualified("x2"))


class LlamaBlock(Module):
    """x + attn(rms(x)) with GQA and rope, then x + swiglu(rms(x))."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: Optional[int] = None, *,
                 ffn_hidden: int, norm_eps: float = 1e-5, rope_theta: float = 10000.0,
                 name: str = "layers.0", init_std: float = 0.02, dtype: str = "f32"):
        super().__init__(name, dtype)
        self.attn_norm = RMSNorm(dim, eps=norm_eps, name=self.qualified("attn_norm"), dtype=dtype)
        self.attn = Attention(dim, n_heads, n_kv_heads, rope_theta=rope_theta, bias=False,
                              name=self.qualified("attn"), init_std=init_std, dtype=dtype)
        self.mlp_norm = RMSNorm(dim, eps=norm_eps, name=self.qualified("mlp_norm"), dtype=dtype)
        self.mlp = SwiGLU(dim, ffn_hidden, name=self.qualified("mlp"), init_std=init_std,
                          dtype=dtype)

    def __call__(self, x: Tensor) -> Tensor:
        x = ops.add(x, self.attn(self.attn_norm(x)), name=self.qualified("x1"))
        return ops.add(x, self.mlp(self.mlp_norm(x)), name=self.qualified("x2"))


__all__ = ["Module", "Linear", "Embedding", "LayerNorm", "RMSNorm", "MLP", "SwiGLU",
           "Attention", "GPTBlock", "LlamaBlock"]
