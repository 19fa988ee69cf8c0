"""The graph builder: every op prints MLIR that par-opt accepts, shapes are
inferred like the dialect's verifiers, misuse is a ValueError naming the op
and the shape, locations point at the Python line."""
import re

import numpy as np
import pytest

import par
from par import P, Graph, Mesh, Partial, Replicate, Shard
from par import ops


def _x(g, shape=(4, 8), name="x", dtype="f32"):
    """A random data input (declared once per name)."""
    for inp in g.inputs:
        if inp.name == name:
            return inp.tensor
    return g.data(name, list(shape), dtype)


# One small graph per op of the catalogue; each returns the values to output.
OP_CASES = {
    "add": lambda g: _x(g) + _x(g, name="y"),
    "sub": lambda g: ops.sub(_x(g), _x(g, name="y")),
    "mul": lambda g: _x(g) * 2.0,
    "div": lambda g: 1.0 / _x(g),
    "max": lambda g: ops.max(_x(g), _x(g, name="y")),
    "min": lambda g: ops.min(_x(g), _x(g, name="y")),
    "neg": lambda g: -_x(g),
    "exp": lambda g: ops.exp(_x(g)),
    "log": lambda g: ops.log(_x(g)),
    "tanh": lambda g: ops.tanh(_x(g)),
    "sqrt": lambda g: ops.sqrt(_x(g)),
    "rsqrt": lambda g: ops.rsqrt(_x(g)),
    "gelu": lambda g: ops.gelu(_x(g)),
    "silu": lambda g: ops.silu(_x(g)),
    "relu": lambda g: ops.relu(_x(g)),
    "sigmoid": lambda g: ops.sigmoid(_x(g)),
    "compare": lambda g: ops.select(ops.compare("ge", _x(g), 0.0), _x(g, name="y"), 0.0),
    "select": lambda g: ops.select(ops.compare("lt", _x(g), _x(g, name="y")), _x(g), _x(g, name="z")),
    "convert": lambda g: ops.convert(ops.convert(_x(g), "bf16"), "f32"),
    "constant": lambda g: ops.constant(np.arange(6, dtype=np.float32).reshape(2, 3), graph=g),
    "broadcast": lambda g: ops.broadcast(_x(g, (8,)), [4, 8], dims=[1]),
    "reduce": lambda g: ops.reduce(_x(g), "max", [0]),
    "argmax": lambda g: ops.argmax(_x(g), 1),
    "argmin": lambda g: ops.argmin(_x(g), 0, "i64"),
    "transpose": lambda g: ops.transpose(_x(g, (2, 3, 4)), [2, 0, 1]),
    "reshape": lambda g: _x(g).reshape(2, -1),
    "slice": lambda g: ops.slice(_x(g), [1, 0], [4, 8], [2, 3]),
    "concat": lambda g: ops.concat([_x(g), _x(g, (4, 2), "y")], 1),
    "pad": lambda g: ops.pad(_x(g), [1, 0], [0, 2], [0, 1], fill=-1.0),
    "dot": lambda g: ops.dot(_x(g, (2, 4, 8)), _x(g, (2, 8, 3), "y"), ([2], [1]), ([0], [0])),
    "softmax": lambda g: ops.softmax(_x(g), 0),
    "log_softmax": lambda g: ops.log_softmax(_x(g), 1),
    "layer_norm": lambda g: ops.layer_norm(_x(g), g.param("g", [8], init="ones"),
                                           g.param("b", [8], init="zeros"), 1e-6),
    "rms_norm": lambda g: ops.rms_norm(_x(g), g.param("g", [8], init="ones")),
    "attention": lambda g: ops.attention(_x(g, (2, 8, 4, 8)), _x(g, (2, 8, 2, 8), "k"),
                                         _x(g, (2, 8, 2, 8), "v"), causal=True, scale=0.5),
    "embedding": lambda g: ops.embedding(g.param("table", [16, 8]),
                                         g.data("ids", [2, 4], "i32")),
    "gather": lambda g: ops.gather(_x(g, (5, 8)), g.data("at", [3, 2, 1], "i32"), [0]),
    "cross_entropy": lambda g: ops.cross_entropy(_x(g, (2, 4, 16)),
                                                 g.data("labels", [2, 4], "i32")),
    "rope": lambda g: ops.rope(_x(g, (2, 8, 4, 8)), theta=500000.0, position_offset=3),
    "adamw": lambda g: ops.adamw(g.param("p", [4, 8]), _x(g), g.param("m", [4, 8], init="zeros"),
                                 g.param("v", [4, 8], init="zeros"),
                                 ops.constant(1e-3, [], "f32", graph=g),
                                 ops.constant(1, [], "i32", graph=g), weight_decay=0.1),
    "sgd": lambda g: ops.sgd(g.param("p", [4, 8]), _x(g), g.param("b", [4, 8], init="zeros"),
                             ops.constant(0.1, [], "f32", graph=g), momentum=0.9, nesterov=True),
    "sharding_constraint": lambda g: par.constraint(ops.exp(_x(g)), P("dp", None)),
}


def test_every_dialect_op_has_a_case():
    assert set(OP_CASES) == set(ops.OPS)


def _build(name):
    g = Graph("op_" + name, mesh=Mesh({"dp": 2}))
    values = OP_CASES[name](g)
    for i, v in enumerate(values if isinstance(values, tuple) else (values,)):
        g.output(v, f"out{i}")
    return g


@pytest.mark.usefixtures("need_par_opt")
@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_op_parses_with_par_opt(name):
    g = _build(name)
    text = g.to_mlir()
    assert f"par.{name}" in text
    out = par.par_opt(text, ["--mlir-print-debuginfo"])
    assert f"par.{name}" in out
    # The locations survive par-opt and name this file.
    assert 'loc("' in out and "test_graph.py" in out


def test_shapes_are_inferred():
    g = Graph("shapes")
    x = g.data("x", [2, 16, 64])
    wq = g.param("wq", [64, 8, 4])
    q = ops.dot(x, wq, ([2], [0]))
    assert q.shape == (2, 16, 8, 4)
    s = ops.dot(q, q, ([3], [3]), ([0, 2], [0, 2]))
    assert s.shape == (2, 8, 16, 16)
    assert ops.reduce(x, "sum", [1]).shape == (2, 64)
    assert ops.reduce(x, "mean").shape == ()
    assert ops.transpose(x, [2, 0, 1]).shape == (64, 2, 16)
    assert ops.slice(x, [0, 1, 0], [2, 16, 64], [1, 2, 8]).shape == (2, 8, 8)
    assert x[:, 3].shape == (2, 64)
    assert x[..., ::2].shape == (2, 16, 32)
    assert ops.concat([x, x], 2).shape == (2, 16, 128)
    assert ops.embedding(g.param("t", [100, 32]), g.data("ids", [3, 5], "i64")).shape == (3, 5, 32)
    assert ops.compare("eq", x, x).dtype == "i1"
    assert ops.cross_entropy(x, g.data("l", [2, 16], "i32")).shape == ()
    assert (x @ g.param("w", [64, 10])).shape == (2, 16, 10)


MISUSE = [
    ("add", lambda g: g.data("a", [4, 8]) + g.data("b", [8, 4]), "tensor<4x8xf32> and tensor<8x4xf32>"),
    ("add", lambda g: g.data("a", [4]) + g.data("b", [4], "f16"), "tensor<4xf16>"),
    ("exp", lambda g: ops.exp(g.data("a", [4], "i32")), "tensor<4xi32>"),
    ("dot", lambda g: g.data("a", [4, 8]) @ g.param("w", [16, 2]),
     "contracting dim 1 of lhs tensor<4x8xf32> has size 8"),
    ("dot", lambda g: ops.dot(g.data("a", [4, 8]), g.param("w", [8, 2]), ([1, 1], [0, 0])),
     "lists dimension 1 twice"),
    ("broadcast", lambda g: ops.broadcast(g.data("a", [3]), [4, 8]), "tensor<3xf32>"),
    ("broadcast", lambda g: ops.broadcast(g.data("a", [8]), [4, 8], [2]), "outside the result rank 2"),
    ("reshape", lambda g: g.data("a", [4, 8]).reshape(5, 6), "cannot reshape tensor<4x8xf32>"),
    ("transpose", lambda g: ops.transpose(g.data("a", [4, 8]), [0, 0]), "tensor<4x8xf32>"),
    ("reduce", lambda g: ops.reduce(g.data("a", [4, 8]), "sum", [2]), "outside rank 2"),
    ("reduce", lambda g: ops.reduce(g.data("a", [4], "i32"), "mean"), "tensor<4xi32>"),
    ("slice", lambda g: ops.slice(g.data("a", [4, 8]), [0, 0], [4, 9]), "dimension 1 of size 8"),
    ("concat", lambda g: ops.concat([g.data("a", [4, 8]), g.data("b", [3, 2])], 1),
     "tensor<3x2xf32> has size 3 in dimension 0"),
    ("softmax", lambda g: ops.softmax(g.data("a", [4, 8]), 2), "outside rank 2"),
    ("log_softmax", lambda g: ops.log_softmax(g.data("a", [4, 8], "i32")), "i32"),
    ("argmax", lambda g: ops.argmax(g.data("a", [4, 8]), 0, "f32"), "index type"),
    ("argmin", lambda g: ops.argmin(g.data("a", [4, 8]), 2), "outside rank 2"),
    ("gather", lambda g: ops.gather(g.data("a", [4, 8]), g.data("i", [3, 2], "i32"), [0]),
     "must be [entries..., 1]"),
    ("gather", lambda g: ops.gather(g.data("a", [4, 8]), g.data("i", [3, 1]), [0]), "i32"),
    ("pad", lambda g: ops.pad(g.data("a", [4, 8]), [1], [0]), "one entry per dim"),
    ("pad", lambda g: ops.pad(g.data("a", [4, 8]), [0, -1], [0, 0]), "must not be negative"),
    ("layer_norm", lambda g: ops.layer_norm(g.data("a", [4, 8]), g.param("g", [4]), g.param("b", [4])),
     "gamma must be 1-D of the normalized size 8, got tensor<4xf32>"),
    ("rms_norm", lambda g: ops.rms_norm(g.data("a", [4, 8]), g.param("g", [8], "bf16")),
     "gamma element type bf16"),
    ("attention", lambda g: ops.attention(g.data("q", [2, 8, 6, 4]), g.data("k", [2, 8, 4, 4]),
                                          g.data("v", [2, 8, 4, 4])),
     "query heads (6) must be a multiple of key/value heads (4)"),
    ("attention", lambda g: ops.attention(g.data("q", [2, 8, 4]), g.data("k", [2, 8, 4]),
                                          g.data("v", [2, 8, 4])), "tensor<2x8x4xf32>"),
    ("attention", lambda g: ops.attention(g.data("q", [2, 8, 4, 4]), g.data("k", [2, 4, 4, 4]),
                                          g.data("v", [2, 4, 4, 4]), causal=True),
     "within the key length 4"),
    ("embedding", lambda g: ops.embedding(g.param("t", [16, 8, 2]), g.data("i", [4], "i32")),
     "tensor<16x8x2xf32>"),
    ("embedding", lambda g: ops.embedding(g.param("t", [16, 8]), g.data("i", [4])), "tensor<4xf32>"),
    ("cross_entropy", lambda g: ops.cross_entropy(g.data("l", [4, 16]), g.data("y", [16], "i32")),
     "labels tensor<16xi32> must have the shape of the logits"),
    ("rope", lambda g: ops.rope(g.data("a", [2, 8, 4, 5])), "head_dim 5 must be even"),
    ("select", lambda g: ops.select(g.data("a", [4]), g.data("b", [4]), g.data("c", [4])),
     "pred must be an i1 tensor, got tensor<4xf32>"),
    ("adamw", lambda g: ops.adamw(*(g.param(n, [4]) for n in "pgmv"), g.data("lr", [2]),
                                  ops.constant(1, [], "i32", graph=g)), "lr must be a 0-d tensor"),
    ("sgd", lambda g: ops.sgd(g.param("p", [4]), g.param("g", [5]), g.param("b", [4]),
                              ops.constant(0.1, [], graph=g)), "grad tensor<5xf32>"),
    ("sharding_constraint", lambda g: par.constraint(g.data("a", [4, 8]), P("dp", None, None)),
     "3 entries but the tensor has rank 2"),
    ("constant", lambda g: ops.constant([1.0, 2.0], [3], graph=g), "does not match shape [3]"),
]


@pytest.mark.parametrize("op,build,needle", MISUSE, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISUSE)])
def test_misuse_is_a_value_error_naming_op_and_shape(op, build, needle):
    g = Graph("bad", mesh=Mesh({"dp": 2}))
    with pytest.raises(ValueError) as info:
        build(g)
    message = str(info.value)
    assert message.startswith(op + ":") or message.startswith("sharding_constraint"), message
    assert needle in message, message


def test_input_declaration_errors():
    g = Graph("g")
    g.param("w", [4])
    with pytest.raises(ValueError, match="already exists"):
        g.param("w", [4])
    with pytest.raises(ValueError, match="parameters are floating point"):
        g.param("ids", [4], "i32")
    with pytest.raises(ValueError, match="init"):
        g.param("v", [4], init="gaussian(1)")
    with pytest.raises(ValueError, match="cannot be fed as 'random'"):
        g.data("t", [4], "i32", kind="random")
    with pytest.raises(ValueError, match="unknown dtype"):
        g.data("x", [4], "f8")
    with pytest.raises(ValueError, match="no outputs"):
        g.to_mlir()


def test_locations_point_at_the_python_line():
    g = Graph("locs")
    x = g.data("x", [4, 8])
    line = _line_of("y = ops.gelu(x)  # the gelu")
    y = ops.gelu(x)  # the gelu
    g.output(y, "y")
    text = g.to_mlir()
    gelu_line = next(l for l in text.splitlines() if "par.gelu" in l)
    assert re.search(r'loc\("[^"]*test_graph\.py":%d:9\)' % line, gelu_line), gelu_line
    basename = Graph("b", locations="basename")
    basename.output(ops.exp(basename.data("x", [2])), "y")
    assert 'loc("test_graph.py":' in basename.to_mlir()
    none = Graph("n", locations="none")
    none.output(ops.exp(none.data("x", [2])), "y")
    assert "loc(" not in none.to_mlir()


def _line_of(snippet):
    import inspect
    source, start = inspect.getsourcelines(test_locations_point_at_the_python_line)
    for i, line in enumerate(source):
        if line.strip() == snippet:
            return start + i
    raise AssertionError(snippet)


def _annotated(conventions):
    """The same model annotated with one sharding convention."""
    mesh = Mesh({"dp": 2, "tp": 2})
    g = Graph("conv", mesh=mesh)
    x = g.data("x", [8, 16], sharding=conventions["x"])
    w1 = g.param("w1", [16, 64], sharding=conventions["w1"])
    w2 = g.param("w2", [64, 16], sharding=conventions["w2"])
    z = g.param("z", [8, 16], sharding=conventions["z"])
    h = par.constraint(ops.gelu(x @ w1), conventions["h"])
    y = par.constraint(h @ w2, conventions["y"])
    g.output(y + z, "y")
    return g.to_mlir()


def test_jax_and_dtensor_conventions_give_identical_ir():
    jax = _annotated({"x": P("dp", None), "w1": P(None, "tp"), "w2": P("tp"),
                      "z": P(("dp", "tp"), None), "h": P("dp", "tp"), "y": P("dp", None)})
    dtensor = _annotated({"x": [Shard(0), Replicate()], "w1": [Replicate(), Shard(1)],
                          "w2": [Replicate(), Shard(0)], "z": [Shard(0), Shard(0)],
                          "h": [Shard(0), Shard(1)], "y": [Shard(0), Replicate()]})
    assert jax == dtensor
    assert '#par.sharding<@mesh, [{"dp", "tp"}, {}]>' in jax
    assert '<@mesh, [{"dp"}, {"tp"}]>' in jax


def test_partial_and_open_dims():
    mesh = Mesh({"dp": 2, "tp": 2})
    spec = par.to_spec([Shard(0), Partial()], 2, mesh)
    assert spec.body() == '[{"dp"}, {}], partial={"tp"}'
    assert P("dp", P.UNCONSTRAINED).to_spec(2).body() == '[{"dp"}, {?}]'
    with pytest.raises(ValueError, match="need one entry per mesh axis"):
        par.to_spec([Shard(0)], 2, mesh)
    with pytest.raises(ValueError, match="appears more than once"):
        P("dp", "dp").to_spec(2)
    with pytest.raises(ValueError, match="need a mesh"):
        Graph("g").param("w", [4], sharding=[Shard(0)])


def test_sharding_rules_and_overrides():
    g = Graph("rules", mesh=Mesh({"tp": 2}), shardings={"*.w_up": P(None, "tp")})
    a = g.param("l0.w_up", [4, 8])
    b = g.param("l0.w_down", [8, 4])
    g.output(ops.dot(a, b), "y")
    text = g.to_mlir()
    assert 'par.name = "l0.w_up", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>' in text
    over = g.to_mlir(shardings={"l0.w_down": P("tp", None)})
    assert '"l0.w_down", par.init = "normal(0.02)", par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>' in over


def test_token_inputs_get_their_role_and_vocab():
    g = Graph("lm")
    ids = g.data("ids", [2, 8], "i32")
    labels = g.data("labels", [2, 8], "i32")
    table = g.param("wte", [50, 16])
    logits = ops.dot(ops.embedding(table, ids), table, ([2], [1]))
    g.output(ops.cross_entropy(logits, labels), "loss")
    text = g.to_mlir()
    assert 'par.data = "tokens", par.vocab = 50' in text
    assert 'par.data = "targets", par.vocab = 50' in text


def test_mesh_parsing_and_coords():
    mesh = Mesh.parse("dp=2,tp=4")
    assert mesh.shape == {"dp": 2, "tp": 4} and mesh.size == 8
    assert mesh.coords(6) == {"dp": 1, "tp": 2} and mesh.device({"dp": 1, "tp": 2}) == 6
    assert Mesh.parse("4x2").axis_names == ("x", "y")
    assert mesh.to_mlir() == 'par.mesh @mesh <["dp"=2, "tp"=4]>'
    with pytest.raises(ValueError):
        Mesh({"dp": 0})


def test_visualize_sharding():
    mesh = Mesh({"dp": 2, "tp": 2})
    text = par.visualize_sharding([8, 16], [Replicate(), Shard(1)], mesh, name="w")
    assert text.splitlines()[0] == 'w: 8x16 f32 sharded [{}, {"tp"}] over mesh dp=2 x tp=2'
    assert "dev 0,2" in text and "dev 1,3" in text
    assert "[:, 0:8]" in text and "[:, 8:16]" in text
    assert "per device: 8x8" in text
    grid = par.visualize_sharding([8, 16], P("dp", "tp"), mesh)
    rows = [l for l in grid.splitlines() if "dev" in l]
    assert ["dev 0" in rows[0], "dev 1" in rows[0], "dev 2" in rows[1], "dev 3" in rows[1]] == [True] * 4
    uneven = par.visualize_sharding([10], P(("dp", "tp")), mesh)
    assert "[9:10]" in uneven


@pytest.mark.usefixtures("need_par_opt")
def test_output_attributes_reach_par_opt():
    g = Graph("outs", mesh=Mesh({"dp": 2}))
    w = g.param("w", [4, 8], sharding=P("dp", None))
    x = g.data("x", [4, 8])
    g.output(w + x, "w_next", updates=w, sharding=P("dp", None))
    g.output(ops.reduce(x, "sum"), "loss")
    text = g.to_mlir()
    assert ('tensor<4x8xf32> {par.name = "w_next", par.updates = 0, '
            'par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}') in text
    out = par.par_opt(text, ["--par-propagate"])
    assert "par.updates = 0" in out
    with pytest.raises(ValueError, match="cannot update parameter 'w'"):
        g.output(ops.reduce(x, "sum"), "bad", updates="w")
    with pytest.raises(ValueError, match="is not a parameter"):
        g.output(x, "bad", updates="x")


def test_layer_scopes_mark_ops():
    g = Graph("layers")
    x = g.data("x", [2, 8], "f32")
    with g.layer(0):
        h = ops.tanh(x)
        with g.layer(3):
            k = ops.exp(h)
        m = ops.neg(k)
    y = ops.relu(m)
    assert [op.layer for op in g.ops] == [0, 3, 0, None]
    g.output(y, "y")
    text = g.to_mlir()
    assert text.count("{par.layer = 0 : i64}") == 2 and "{par.layer = 3 : i64}" in text
    with pytest.raises(ValueError, match="layer: the index must be a non-negative integer"):
        g.layer(-1)


@pytest.mark.usefixtures("need_par_opt")
def test_model_blocks_are_layers_and_autodiff_keeps_them():
    from par import models
    g = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 2, 8)
    layers = {op.layer for op in g.ops}
    assert layers == {None} | set(range(models.GPT2_CONFIGS["tiny"].n_layer))
    out = par.par_opt(g.to_mlir(), ["--par-autodiff=optimizer=adamw"])
    # Every layer has forward and backward ops.
    for layer in range(models.GPT2_CONFIGS["tiny"].n_layer):
        mark = f"par.layer = {layer} : i64, par.phase = #par.phase<"
        assert mark + "forward>" in out and mark + "backward>" in out


def test_shardings_pin_named_values():
    """A `shardings` pattern matching the name given to an op's result pins
    it with a sharding constraint under that name (the residual stream of
    tensor_parallel(sequence=True)); a value whose rank the pattern does not
    fit is an error naming it."""
    g = Graph("pins", mesh=Mesh({"tp": 2}), shardings={"h.x1": P(None, "tp", None)})
    x = g.param("x", [2, 4, 8])
    y = par.add(x, x, name="h.x1")
    g.output(par.neg(y, name="out"), "out")
    text = g.to_mlir()
    assert '%h.x1.unpinned = "par.add"' in text
    assert ('%h.x1 = par.sharding_constraint %h.x1.unpinned <@mesh, [{}, {"tp"}, {}]>'
            in text)
    assert '"par.neg"(%h.x1)' in text
    # Patterns given when printing take precedence, as for inputs.
    text = g.to_mlir(shardings={"h.*": P("tp", None, None)})
    assert ('%h.x1 = par.sharding_constraint %h.x1.unpinned <@mesh, [{"tp"}, {}, {}]>'
            in text)
    # A pattern that matches an input is the inputs' alone.
    text = g.to_mlir(shardings={"*": P(None, None, "tp")})
    assert ('%h.x1 = par.sharding_constraint %h.x1.unpinned <@mesh, [{}, {"tp"}, {}]>'
            in text)
    with pytest.raises(ValueError, match="h.x1"):
        g.to_mlir(shardings={"h.x1": P(None, None, None, "tp")})


def test_pins_carry_layer_marks():
    g = Graph("pins", mesh=Mesh({"tp": 2}), shardings={"*.y": P(None, "tp")})
    x = g.param("x", [2, 4])
    with g.layer(3):
        y = par.neg(x, name="b.y")
    g.output(par.exp(y, name="out"), "out")
    assert ('%b.y = par.sharding_constraint %b.y.unpinned <@mesh, [{}, {"tp"}]> '
            '{par.layer = 3 : i64}' in g.to_mlir())
