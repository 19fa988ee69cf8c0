"""Model families and their forward loss graphs.

    model = GPT(GPT2_CONFIGS["124M"])
    g = model.to_graph(batch=8, seq=1024)           # tokens, targets -> loss
    g = loss_graph(Llama(LLAMA_CONFIGS["tiny"]), batch=4, seq=16,
                   mesh=Mesh({"dp": 2, "tp": 2}),
                   shardings={**data_parallel(), **tensor_parallel()})

Every graph takes `tokens` and `targets` ([batch, seq] i32, fed by par-run
as token windows and the same windows shifted by one) and returns the mean
cross-entropy `loss`. Training (gradients, optimizer) is not in the compiler
yet; these are forward + loss programs.

Initializers follow GPT-2: weights normal(0.02), residual output
projections normal(0.02 / sqrt(2 * layers)), position embeddings
normal(0.01), biases zeros, norm gains ones.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional

from . import graph as ops
from .graph import Graph, Tensor
from .nn import MLP, Embedding, GPTBlock, LayerNorm, Linear, LlamaBlock, Module, RMSNorm
from .sharding import Mesh, P, SpecLike


# ----------------------------------------------------------------------------
# Configurations
# ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 50257
    block_size: int = 1024          # longest sequence (learned position table)
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_kv_head: Optional[int] = None  # None: multi-head (as GPT-2)
    mlp_ratio: int = 4
    bias: bool = True
    tie_embeddings: bool = True
    ln_eps: float = 1e-5
    dtype: str = "f32"
    fused_attention: bool = True     # False: scores, softmax and value product as separate ops

    def padded(self, multiple: int = 64) -> "GPTConfig":
        """The vocabulary rounded up (50257 -> 50304), so it splits evenly."""
        vocab = -(-self.vocab_size // multiple) * multiple
        return dataclasses.replace(self, vocab_size=vocab)


GPT2_CONFIGS: Dict[str, GPTConfig] = {
    "124M": GPTConfig(n_layer=12, n_head=12, n_embd=768),
    "350M": GPTConfig(n_layer=24, n_head=16, n_embd=1024),
    "774M": GPTConfig(n_layer=36, n_head=20, n_embd=1280),
    "1.5B": GPTConfig(n_layer=48, n_head=25, n_embd=1600),
    "tiny": GPTConfig(vocab_size=128, block_size=16, n_layer=2, n_head=4, n_embd=64),
}


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 32000
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: Optional[int] = None
    ffn_hidden: int = 11008
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq: int = 4096
    tie_embeddings: bool = False
    dtype: str = "f32"


LLAMA_CONFIGS: Dict[str, LlamaConfig] = {
    "7B": LlamaConfig(dim=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_hidden=11008),
    "13B": LlamaConfig(dim=5120, n_layers=40, n_heads=40, n_kv_heads=40, ffn_hidden=13824),
    "70B": LlamaConfig(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672),
    "tiny": LlamaConfig(vocab_size=128, dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
                        ffn_hidden=160, max_seq=16),
}


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    """A token MLP language model: embedding, residual GELU MLPs, head."""
    vocab_size: int = 128
    dim: int = 64
    hidden: int = 256
    n_layers: int = 2
    dtype: str = "f32"


MLP_CONFIGS: Dict[str, MLPConfig] = {"tiny": MLPConfig()}


# ----------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------

class LanguageModel(Module):
    """tokens [batch, seq] -> logits [batch, seq, vocab]; `loss` adds the
    cross-entropy against targets."""
    vocab_size: int
    max_seq: Optional[int] = None
    default_batch: int = 4

    wte: Embedding
    lm_head: Optional[Linear] = None

    def hidden(self, tokens: Tensor) -> Tensor:
        """The final hidden state [batch, seq, dim]."""
        raise NotImplementedError

    def head(self, hidden: Tensor) -> Tensor:
        """Logits: the tied embedding table, or the separate head."""
        return self.wte.attend(hidden) if self.lm_head is None else self.lm_head(hidden)

    def __call__(self, tokens: Tensor) -> Tensor:
        return self.head(self.hidden(tokens))

    def _check_tokens(self, tokens: Tensor) -> None:
        if not isinstance(tokens, Tensor) or tokens.rank != 2 or tokens.dtype not in ops.INT_DTYPES:
            raise ValueError(f"{type(self).__name__}: tokens must be a [batch, seq] integer "
                             f"Tensor, got {tokens!r}")
        if self.max_seq is not None and tokens.shape[1] > self.max_seq:
            raise ValueError(f"{type(self).__name__}: sequence {tokens.shape[1]} is longer than "
                             f"the model's {self.max_seq}")

    def loss(self, tokens: Tensor, targets: Tensor) -> Tensor:
        return ops.cross_entropy(self(tokens), targets, name="loss")

    def to_graph(self, batch: Optional[int] = None, seq: Optional[int] = None, **kwargs) -> Graph:
        return loss_graph(self, batch or self.default_batch, seq or self.max_seq or 16, **kwargs)


class GPT(LanguageModel):
    """GPT-2: token + learned position embeddings, pre-norm blocks, final
    layer norm, head tied to the token embedding."""

    def __init__(self, config: GPTConfig = GPT2_CONFIGS["tiny"], name: str = ""):
        super().__init__(name, config.dtype)
        c = self.config = config
        self.vocab_size, self.max_seq = c.vocab_size, c.block_size
        self.wte = Embedding(c.vocab_size, c.n_embd, name="wte", dtype=c.dtype)
        self.blocks = [GPTBlock(c.n_embd, c.n_head, n_kv_heads=c.n_kv_head,
                                mlp_hidden=c.mlp_ratio * c.n_embd, bias=c.bias, ln_eps=c.ln_eps,
                                n_layers=c.n_layer, name=f"h{i}", dtype=c.dtype,
                                fused_attention=c.fused_attention)
                       for i in range(c.n_layer)]
        self.ln_f = LayerNorm(c.n_embd, eps=c.ln_eps, name="ln_f", dtype=c.dtype)
        self.lm_head = None if c.tie_embeddings else Linear(c.n_embd, c.vocab_size,
                                                            name="lm_head", dtype=c.dtype)

    def hidden(self, tokens: Tensor) -> Tensor:
        self._check_tokens(tokens)
        c = self.config
        batch, seq = tokens.shape
        x = self.wte(tokens)
        wpe = self.param(tokens.graph, "wpe", [c.block_size, c.n_embd], "normal(0.01)")
        if seq < c.block_size:
            wpe = ops.slice(wpe, [0, 0], [seq, c.n_embd], name="wpe_used")
        x = ops.add(x, ops.broadcast(wpe, [batch, seq, c.n_embd], [1, 2]), name="x0")
        for i, block in enumerate(self.blocks):
            with tokens.graph.layer(i):
                x = block(x)
        return self.ln_f(x)


class Llama(LanguageModel):
    """Llama: token embedding, RMSNorm blocks with GQA + rope and SwiGLU,
    final RMSNorm, untied head."""

    def __init__(self, config: LlamaConfig = LLAMA_CONFIGS["tiny"], name: str = ""):
        super().__init__(name, config.dtype)
        c = self.config = config
        self.vocab_size, self.max_seq = c.vocab_size, c.max_seq
        self.wte = Embedding(c.vocab_size, c.dim, name="wte", dtype=c.dtype)
        self.blocks = [LlamaBlock(c.dim, c.n_heads, c.n_kv_heads, ffn_hidden=c.ffn_hidden,
                                  norm_eps=c.norm_eps, rope_theta=c.rope_theta,
                                  name=f"layers.{i}", dtype=c.dtype)
                       for i in range(c.n_layers)]
        self.norm = RMSNorm(c.dim, eps=c.norm_eps, name="norm", dtype=c.dtype)
        self.lm_head = None if c.tie_embeddings else Linear(c.dim, c.vocab_size, name="lm_head",
                                                            dtype=c.dtype)

    def hidden(self, tokens: Tensor) -> Tensor:
        self._check_tokens(tokens)
        x = self.wte(tokens)
        for i, block in enumerate(self.blocks):
            with tokens.graph.layer(i):
                x = block(x)
        return self.norm(x)


class MLPModel(LanguageModel):
    """Embedding, `n_layers` residual GELU MLPs (x + mlp(x)), linear head."""

    def __init__(self, config: MLPConfig = MLP_CONFIGS["tiny"], name: str = ""):
        super().__init__(name, config.dtype)
        c = self.config = config
        self.vocab_size = c.vocab_size
        self.wte = Embedding(c.vocab_size, c.dim, name="wte", dtype=c.dtype)
        self.mlps = [MLP(c.dim, c.hidden, name=f"l{i}.mlp", dtype=c.dtype)
                     for i in range(c.n_layers)]
        self.lm_head = Linear(c.dim, c.vocab_size, name="lm_head", dtype=c.dtype)

    def hidden(self, tokens: Tensor) -> Tensor:
        self._check_tokens(tokens)
        x = self.wte(tokens)
        for i, mlp in enumerate(self.mlps):
            with tokens.graph.layer(i):
                x = ops.add(x, mlp(x), name=f"l{i}.x")
        return x


# ----------------------------------------------------------------------------
# Graphs
# ----------------------------------------------------------------------------

def loss_graph(model: LanguageModel, batch: int, seq: int, *, mesh: Optional[Mesh] = None,
               shardings: Optional[Mapping[str, SpecLike]] = None, name: Optional[str] = None,
               outputs: tuple = ("loss",), locations: str = "relative") -> Graph:
    """The forward loss program of `model`: tokens, targets -> loss.

    `outputs` may add "logits" and "hidden" (the final hidden state) to the
    returned values. `shardings` maps input-name patterns to shardings.
    """
    unknown = set(outputs) - {"loss", "logits", "hidden"}
    if unknown:
        raise ValueError(f"loss_graph: unknown outputs {sorted(unknown)}")
    name = name or type(model).__name__.lower()
    g = Graph(name, mesh=mesh, shardings=shardings, locations=locations)
    tokens = g.tokens("tokens", [batch, seq], model.vocab_size)
    targets = g.targets("targets", [batch, seq], model.vocab_size)
    hidden = model.hidden(tokens)
    logits = model.head(hidden)
    loss = ops.cross_entropy(logits, targets, name="loss")
    g.output(loss, "loss")
    if "logits" in outputs:
        g.output(logits, "logits")
    if "hidden" in outputs:
        g.output(hidden, "hidden")
    return g


def gpt2(size: str = "124M", batch: int = 4, seq: Optional[int] = None, **kwargs) -> Graph:
    """The loss graph of a GPT-2 size: "124M", "350M", "774M", "1.5B" or "tiny"."""
    config = _pick(GPT2_CONFIGS, size, "GPT-2")
    return loss_graph(GPT(config), batch, seq or config.block_size,
                      name=kwargs.pop("name", "gpt2_" + _symbol(size)), **kwargs)


def llama(size: str = "7B", batch: int = 4, seq: Optional[int] = None, **kwargs) -> Graph:
    """The loss graph of a Llama size: "7B", "13B", "70B" or "tiny"."""
    config = _pick(LLAMA_CONFIGS, size, "Llama")
    return loss_graph(Llama(config), batch, seq or config.max_seq,
                      name=kwargs.pop("name", "llama_" + _symbol(size)), **kwargs)


def mlp(size: str = "tiny", batch: int = 4, seq: int = 16, **kwargs) -> Graph:
    config = _pick(MLP_CONFIGS, size, "MLP")
    return loss_graph(MLPModel(config), batch, seq, name=kwargs.pop("name", "mlp"), **kwargs)


def _pick(table, size, family):
    if isinstance(size, (GPTConfig, LlamaConfig, MLPConfig)):
        return size
    if size not in table:
        raise ValueError(f"{family}: unknown size {size!r}; known: {', '.join(table)}")
    return table[size]


def _symbol(size: str) -> str:
    return size.replace(".", "_")


# ----------------------------------------------------------------------------
# Sharding presets (input-name patterns -> shardings)
# ----------------------------------------------------------------------------

def data_parallel(axis: str = "dp") -> Dict[str, SpecLike]:
    """Split the batch of tokens and targets over `axis`."""
    return {"tokens": P(axis, None), "targets": P(axis, None)}


def tensor_parallel(axis: str = "tp", vocab: Optional[bool] = None,
                    sequence: bool = False) -> Dict[str, SpecLike]:
    """Megatron: attention heads and MLP hidden units split over `axis`
    (q/k/v and up/gate projections by output, output projections by input),
    so each block needs one all-reduce after attention and one after the
    MLP. `vocab=True` also splits the embedding table and head by vocabulary.

    `sequence=True` adds Megatron's sequence parallelism: the residual stream
    (the embedding output and each block's two residual sums) is split over
    the sequence on the same axis, so layer norms and residual adds run on
    1/t of the tokens, each block's all-reduce becomes a reduce-scatter and
    its input an all-gather, and the activations kept between them shrink by
    t. The layout of everything else follows by propagation
    (docs/propagation.md, "Megatron's sequence parallelism"). `vocab`
    defaults to `sequence`, as in Megatron: with a whole embedding table,
    the table's gradient summed from split tokens would be all-reduced
    (vocabulary x width elements) every step."""
    if vocab is None:
        vocab = sequence
    rules: Dict[str, SpecLike] = {
        "*.attn.wq": P(None, axis, None), "*.attn.wk": P(None, axis, None),
        "*.attn.wv": P(None, axis, None), "*.attn.wo": P(axis, None, None),
        "*.attn.bq": P(axis, None), "*.attn.bk": P(axis, None), "*.attn.bv": P(axis, None),
        "*.mlp.w_up": P(None, axis), "*.mlp.w_gate": P(None, axis), "*.mlp.b_up": P(axis),
        "*.mlp.w_down": P(axis, None),
    }
    if vocab:
        rules.update({"wte": P(axis, None), "lm_head.w": P(None, axis), "lm_head.b": P(axis)})
    if sequence:
        stream = P(P.UNCONSTRAINED, axis, None)  # the batch stays open for data parallel
        rules.update({"wte.x": stream, "x0": stream, "*.x1": stream, "*.x2": stream})
    return rules


__all__ = ["GPTConfig", "LlamaConfig", "MLPConfig", "GPT2_CONFIGS", "LLAMA_CONFIGS",
           "MLP_CONFIGS", "LanguageModel", "GPT", "Llama", "MLPModel", "loss_graph", "gpt2",
           "llama", "mlp", "data_parallel", "tensor_parallel"]
