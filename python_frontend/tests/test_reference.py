"""The numpy reference against par-run: initial parameters and fed data bit
for bit, every op of the catalogue, and the MLP / GPT / Llama forward losses
under several shardings on 1, 2 and 4 ranks."""
import math

import numpy as np
import pytest

import par
from par import P, Graph, Mesh, Replicate, Shard
from par import models as M
from par import ops

pytestmark = pytest.mark.usefixtures("need_par_run")


def test_inputs_match_par_run_bit_for_bit(tmp_path):
    """Parameters (every init kind, f32 and bf16), random data and tokens
    from synthetic and file data, over several steps and seeds."""
    g = Graph("inputs")
    values = [
        g.param("layer.0.w", [7, 33], init="normal(0.02)"),
        g.param("u", [5, 3], init="uniform(-1, 2)"),
        g.param("half", [64], "bf16", init="normal(1.0)"),
        g.param("c", [3], init="constant(0.5)"),
        g.data("x", [3, 9]),
        g.tokens("tokens", [4, 6], vocab=50),
        g.targets("targets", [4, 6], vocab=50),
    ]
    for v in values:
        g.output(v, "out." + v.ssa)
    exe = par.compile(g, workdir=tmp_path)
    data = tmp_path / "corpus.txt"
    data.write_bytes(bytes(range(256)) * 3 + b"par")
    for seed, steps, source in ((0, 1, None), (7, 3, None), (3, 2, str(data))):
        got = exe.run(steps=steps, seed=seed, data=source, log_every=0).outputs
        want = par.reference.run(g, steps=steps, seed=seed, data=source)
        for name, value in want.items():
            assert np.array_equal(got[name], value), (name, seed)
    # Targets are the token windows shifted by one.
    fed = par.reference.feed_data(g, seed=0, step=1)
    stream = par.reference.random_bits(0, par.reference.stream_of("synthetic tokens"),
                                       np.arange(25, dtype=np.uint64)) % np.uint64(50)
    assert fed["tokens"].reshape(-1).tolist() == stream[:24].tolist()
    assert fed["targets"].reshape(-1).tolist() == stream[1:25].tolist()


def _catalogue():
    """One graph exercising every op on inputs that keep the results finite."""
    g = Graph("catalogue")
    x = g.data("x", [4, 8])
    y = g.data("y", [4, 8])
    ids = g.tokens("ids", [2, 4], vocab=50)            # some ids >= 40: zero rows
    labels = g.targets("labels", [2, 4], vocab=16)
    big = g.tokens("big", [4, 8], vocab=1000, dtype="i64")
    out = g.output
    pos = x * x + 1.0
    out(x + y, "add"); out(x - y, "sub"); out(x * y, "mul"); out(y / pos, "div")
    out(ops.max(x, y), "max"); out(ops.min(x, y), "min"); out(-x, "neg")
    out(ops.exp(x), "exp"); out(ops.log(pos), "log"); out(ops.tanh(x), "tanh")
    out(ops.sqrt(pos), "sqrt"); out(ops.rsqrt(pos), "rsqrt"); out(ops.gelu(x * 3.0), "gelu")
    out(ops.silu(x), "silu"); out(ops.relu(x), "relu"); out(ops.sigmoid(x), "sigmoid")
    out(ops.select(ops.compare("gt", x, y), x, y * 2.0), "select")
    out(ops.convert(ops.compare("le", x, 0.0), "f32"), "compare")
    out(ops.convert(x * 10.0, "i32"), "f2i")
    out(ops.convert(ops.gelu(ops.convert(x, "bf16")), "f32"), "bf16")
    out(ops.convert(ops.tanh(ops.convert(x, "f16")), "f32"), "f16")
    out((big * 3 - 7) / ops.relu(big - 500) + ops.max(-big, big), "int_arith")
    out(ops.reduce(big, "sum", [1]), "int_sum")
    out(ops.constant(np.linspace(-1, 1, 6).reshape(2, 3), graph=g), "constant")
    out(ops.broadcast(ops.slice(x, [0, 0], [1, 8]), [3, 4, 8], [1, 2]), "broadcast")
    for kind in ("sum", "max", "min", "mean"):
        out(ops.reduce(x, kind, [0]), "reduce_" + kind)
    out(ops.transpose(x.reshape(2, 2, 8), [2, 0, 1]), "transpose")
    out(ops.slice(x, [1, 1], [4, 8], [2, 3]), "slice")
    out(ops.concat([x, y[:, :3]], 1), "concat")
    out(ops.pad(x, [1, 0], [0, 2], [1, 1], fill=0.5), "pad")
    out(ops.dot(x.reshape(2, 2, 8), y.reshape(2, 2, 8), ([2], [2]), ([0], [0])), "dot")
    out(ops.softmax(x * 4.0, 0), "softmax")
    out(ops.log_softmax(x * 4.0, 1), "log_softmax")
    out(ops.argmax(x, 1), "argmax")
    out(ops.argmin(x, 0, "i64"), "argmin")
    out(ops.gather(x, g.data("at", [5, 1], "i32"), [0]), "gather")
    gamma = g.param("gamma", [8], init="uniform(0.5, 1.5)")
    beta = g.param("beta", [8], init="normal(0.3)")
    out(ops.layer_norm(x, gamma, beta, 1e-3), "layer_norm")
    out(ops.rms_norm(x, gamma), "rms_norm")
    q = g.data("q", [2, 6, 4, 8])
    k = g.data("k", [2, 9, 2, 8])
    v = g.data("v", [2, 9, 2, 8])
    out(ops.attention(q, k, v, causal=True, position_offset=3), "attention_causal")
    out(ops.attention(q, k, v, scale=0.7), "attention_full")
    out(ops.rope(q, theta=500.0, position_offset=5), "rope")
    table = g.param("table", [40, 8], init="normal(1.0)")
    out(ops.embedding(table, ids), "embedding")
    out(ops.cross_entropy(g.data("logits", [2, 4, 16]) * 3.0, labels), "cross_entropy")
    p = g.param("p", [4, 8], init="normal(1.0)")
    m = g.param("m", [4, 8], init="normal(0.1)")
    s = g.param("s", [4, 8], init="uniform(0.01, 0.1)")
    lr = ops.constant(0.05, [], graph=g)
    new = ops.adamw(p, x, m, s, lr, ops.constant(3, [], "i32", graph=g), weight_decay=0.1)
    for name, value in zip(("p", "m", "v"), new):
        out(value, "adamw_" + name)
    new = ops.sgd(p, x, m, lr, momentum=0.9, weight_decay=0.01, nesterov=True)
    out(new[0], "sgd_p"); out(new[1], "sgd_b")
    out(ops.exp(par.constraint(x, P(None, "tp"))), "constraint")
    return g


def test_every_op_matches_par_run(tmp_path):
    g = _catalogue()
    assert {op.kind for op in g.ops} == set(ops.OPS)
    exe = par.compile(g, workdir=tmp_path)
    got = exe.run(steps=2, seed=5, log_every=0).outputs
    want = par.reference.run(g, steps=2, seed=5)
    for name, value in want.items():
        tolerance = 1e-2 if name in ("bf16", "f16") else 2e-6
        err = par.max_relative_error(got[name], value)
        assert err < tolerance, f"{name}: relative error {err:.3g}"
    # Embedding ids beyond the table's 40 rows read zeros.
    ids = par.reference.feed_data(g, seed=5, step=2)["ids"]
    assert (ids >= 40).any()
    assert np.all(want["embedding"][ids >= 40] == 0)


# Shardings of the tiny models: 1 rank unannotated, then data, tensor and
# 2-D parallelism on 2 and 4 ranks.
SHARDINGS = {
    "1": (None, {}),
    "dp=2": (Mesh({"dp": 2}), M.data_parallel()),
    "tp=2": (Mesh({"tp": 2}), M.tensor_parallel()),
    "dp=2,tp=2": (Mesh({"dp": 2, "tp": 2}), {**M.data_parallel(), **M.tensor_parallel()}),
    # Megatron's sequence parallelism: the residual stream pinned by name.
    "tp=2,sequence": (Mesh({"tp": 2}), M.tensor_parallel(sequence=True)),
    "dp=2,tp=2,sequence": (Mesh({"dp": 2, "tp": 2}),
                           {**M.data_parallel(), **M.tensor_parallel(sequence=True)}),
}
MODELS = {
    "mlp": lambda: M.MLPModel(M.MLP_CONFIGS["tiny"]),
    "gpt": lambda: M.GPT(M.GPT2_CONFIGS["tiny"]),
    "llama": lambda: M.Llama(M.LLAMA_CONFIGS["tiny"]),
}
_REFERENCES = {}


def _reference(model):
    if model not in _REFERENCES:
        g = M.loss_graph(MODELS[model](), 4, 16, outputs=("loss", "logits", "hidden"))
        _REFERENCES[model] = (g, par.reference.run(g, steps=2, seed=3))
    return _REFERENCES[model]


@pytest.mark.parametrize("sharding", list(SHARDINGS))
@pytest.mark.parametrize("model", list(MODELS))
def test_model_loss_matches_reference(model, sharding, tmp_path):
    g, want = _reference(model)
    mesh, rules = SHARDINGS[sharding]
    exe = par.compile(g, mesh=mesh, shardings=rules, workdir=tmp_path)
    assert exe.num_ranks == (mesh.size if mesh else 1)
    if mesh is not None and "tp" in mesh.axis_names and "sequence" in sharding:
        # Megatron's sequence parallelism: each block's all-reduce is a
        # reduce-scatter (after it) and an all-gather (before it).
        kinds = [c["op"] for c in exe.collectives
                 if exe.program["groups"][c["attrs"]["group"]] == ["tp"]]
        if model != "mlp":
            assert kinds.count("reduce_scatter") >= 2 * 2 and "all_to_all" not in kinds, kinds
    elif mesh is not None and "tp" in mesh.axis_names:
        # Megatron: an all-reduce over tp after every attention and MLP.
        tp = [c for c in exe.collectives if exe.program["groups"][c["attrs"]["group"]] == ["tp"]]
        assert len(tp) >= 2 * 2 if model != "mlp" else len(tp) >= 2
    result = exe.run(steps=2, seed=3)
    assert [s.step for s in result.steps] == [1, 2]
    assert abs(result.steps[-1].loss - float(want["loss"])) < 5e-6
    assert result.memory["measured"] == [result.memory["planned"]] * exe.num_ranks
    for name in ("loss", "logits", "hidden"):
        err = par.max_relative_error(result.outputs[name], want[name])
        assert err < 1e-5, f"{name}: relative error {err:.3g}"
    assert math.isclose(result.loss, float(want["loss"]), rel_tol=1e-6)


def test_tied_vocab_parallel_gpt_with_dtensor_rules(tmp_path):
    """GPT's tied embedding split by vocabulary, with rules written as
    DTensor placements: same IR as the P() rules, same numbers."""
    mesh = Mesh({"dp": 2, "tp": 2})
    g, want = _reference("gpt")
    p_rules = {**M.data_parallel(), "wte": P("tp", None), "*.mlp.w_up": P(None, "tp")}
    d_rules = {"tokens": [Shard(0), Replicate()], "targets": [Shard(0), Replicate()],
               "wte": [Replicate(), Shard(0)], "*.mlp.w_up": [Replicate(), Shard(1)]}
    assert g.to_mlir(mesh, p_rules) == g.to_mlir(mesh, d_rules)
    exe = par.compile(g, mesh=mesh, shardings=d_rules, workdir=tmp_path)
    assert exe.input_sharding("wte").body() == '[{"tp"}, {}]'
    result = exe.run(steps=2, seed=3, log_every=0)
    assert par.max_relative_error(result.outputs["logits"], want["logits"]) < 1e-5


def test_updates_carry_parameters_across_steps(tmp_path):
    """Outputs with `updates` replace their parameters after every step (an
    AdamW step on a sharded parameter, three steps of fresh gradients)."""
    mesh = Mesh({"dp": 2})
    g = Graph("adamw_steps", mesh=mesh)
    p = g.param("p", [8, 4], init="normal(1.0)", sharding=P("dp", None))
    m = g.param("m", [8, 4], init="zeros", sharding=P("dp", None))
    v = g.param("v", [8, 4], init="zeros", sharding=P("dp", None))
    grad = g.data("grad", [8, 4], sharding=P("dp", None))
    lr = ops.constant(0.1, [], graph=g)
    p1, m1, v1 = ops.adamw(p, grad, m, v, lr, ops.constant(1, [], "i32", graph=g))
    g.output(p1, "p", updates=p)
    g.output(m1, "m", updates="m")
    g.output(v1, "v", updates=2)
    g.output(ops.reduce(p1 * p1, "sum"), "loss")
    exe = par.compile(g, workdir=tmp_path)
    assert [o.get("updates") for o in exe.program["outputs"]] == ["p", "m", "v", None]
    result = exe.run(steps=3, seed=2)
    want = par.reference.run(g, steps=3, seed=2)
    one_step = par.reference.run(g, steps=1, seed=2)
    assert par.max_relative_error(want["p"], one_step["p"]) > 1e-3  # the steps compound
    for name in ("p", "m", "v", "loss"):
        assert par.max_relative_error(result.outputs[name], want[name]) < 1e-5, name


def test_uneven_vocabulary_split(tmp_path):
    """A vocabulary of 127 split over tp=2 (padded pieces of 64) with a tied
    head, as GPT-2's 50257 would be."""
    config = M.GPTConfig(vocab_size=127, block_size=16, n_layer=1, n_head=4, n_embd=64)
    g = M.loss_graph(M.GPT(config), 4, 16, outputs=("loss", "logits"))
    exe = par.compile(g, mesh=Mesh({"dp": 2, "tp": 2}), workdir=tmp_path,
                      shardings={**M.data_parallel(), **M.tensor_parallel(vocab=True)})
    assert exe.input_sharding("wte").body() == '[{"tp"}, {}]'
    errors = exe.check(steps=2, seed=1)
    assert max(errors.values()) < 1e-5, errors
