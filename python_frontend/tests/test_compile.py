"""par.compile / Executable.run: plans, errors from par-opt and par-run as
ParError at the Python line, model families and the example scripts."""
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import par
from par import P, Graph, Mesh
from par import models as M
from par import ops

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).name


def _line(func, snippet):
    source, start = inspect.getsourcelines(func)
    for i, text in enumerate(source):
        if snippet in text:
            return start + i
    raise AssertionError(snippet)


def _megatron(mesh, w2_spec=P("tp", None)):
    g = Graph("megatron", mesh=mesh)
    x = g.data("x", [8, 16], sharding=P("dp", None))
    w1 = g.param("w1", [16, 64], init="normal(0.25)", sharding=P(None, "tp"))
    w2 = g.param("w2", [64, 16], init="normal(0.125)", sharding=w2_spec)
    h = ops.gelu(x @ w1)
    y = h @ w2  # row-parallel: partial over tp
    g.output(ops.reduce(y * y, "mean"), "loss")
    g.output(y, "y")
    return g


@pytest.mark.usefixtures("need_par_opt")
def test_bad_argument_sharding_is_a_located_par_error():
    g = _megatron(Mesh({"dp": 2, "tp": 2}), w2_spec=P("pp", None))
    with pytest.raises(par.ParError) as info:
        par.compile(g)
    err = info.value
    assert err.tool == "par-opt" and err.returncode == 1
    assert 'unknown axis "pp" in mesh @mesh' in str(err)
    error = next(d for d in err.diagnostics if d.severity == "error")
    # par-opt reports argument shardings on the function: the Graph's line...
    assert error.file.endswith(THIS) and error.line == _line(_megatron, 'g = Graph("megatron"')
    assert "argument #2" in error.message
    # ... and the frontend adds where that argument was declared.
    note = next(d for d in err.diagnostics if d.severity == "note")
    assert note.file.endswith(THIS) and note.line == _line(_megatron, 'w2 = g.param("w2"')
    assert "'w2'" in note.message


@pytest.mark.usefixtures("need_par_opt")
def test_bad_constraint_points_at_its_line():
    g = Graph("constrained", mesh=Mesh({"dp": 2}))
    x = g.data("x", [8, 16])
    y = par.constraint(ops.tanh(x), P("dp", "sp"))
    g.output(y, "y")
    with pytest.raises(par.ParError) as info:
        par.compile(g)
    error = info.value.diagnostics[0]
    assert error.severity == "error"
    assert error.file.endswith(THIS) and error.column == 9
    assert error.line == _line(test_bad_constraint_points_at_its_line, "y = par.constraint(")
    assert 'unknown axis "sp"' in error.message


@pytest.mark.usefixtures("need_par_opt")
def test_split_larger_than_dimension_is_reported():
    g = M.loss_graph(M.Llama(), 4, 16, mesh=Mesh({"tp": 4}), shardings=M.tensor_parallel())
    with pytest.raises(par.ParError) as info:
        par.compile(g)
    assert "a dimension cannot have more shards than elements" in str(info.value)
    assert any(d.severity == "note" and "layers.0.attn.wk" in d.message
               for d in info.value.diagnostics)


@pytest.mark.usefixtures("need_par_run")
def test_runtime_error_is_a_located_par_error(tmp_path):
    g = Graph("oob")
    tokens = g.tokens("tokens", [2, 8], vocab=64)
    targets = g.targets("targets", [2, 8], vocab=300)      # labels beyond the 64 logits
    logits = ops.embedding(g.param("table", [64, 64]), tokens)
    loss = ops.cross_entropy(logits, targets)
    g.output(loss, "loss")
    exe = par.compile(g, workdir=tmp_path)
    with pytest.raises(par.ParError) as info:
        exe.run(steps=1)
    err = info.value
    assert err.tool == "par-run"
    assert "is outside the vocabulary [0, 64)" in str(err)
    d = err.diagnostics[0]
    assert d.file.endswith(THIS)
    assert d.line == _line(test_runtime_error_is_a_located_par_error, "loss = ops.cross_entropy(")
    # The reference rejects the same label at the same place.
    with pytest.raises(par.reference.KernelError, match=r"label \d+ of token 0 is outside"):
        par.reference.run(g)
    with pytest.raises(par.ParError, match="-np 3 does not match"):
        exe.run(np=3)


@pytest.mark.usefixtures("need_par_run")
def test_plan_summary_and_run(tmp_path):
    g = _megatron(None)
    exe = par.compile(g, mesh="dp=2,tp=2", workdir=tmp_path)
    assert exe.num_ranks == 4 and (tmp_path / "megatron.mlir").read_text() == exe.mlir
    summary = exe.plan_summary()
    assert "program @megatron: 4 rank(s), mesh dp=2 x tp=2" in summary
    w1 = next(l for l in summary.splitlines() if l.strip().startswith("w1"))
    assert w1.split() == ["w1", "param", "16x64", "f32", '[{},', '{"tp"}]', "16x32"]
    # Megatron: one all-reduce over tp, at the row-parallel dot's line; the
    # mean loss is then summed over dp.
    locs = {tuple(exe.program["groups"][c["attrs"]["group"]]): c["loc"] for c in exe.collectives}
    assert len(exe.collectives) == 2
    assert locs[("tp",)].endswith(f"{THIS}:{_line(_megatron, 'y = h @ w2')}:9")
    assert locs[("dp",)].endswith(f"{THIS}:{_line(_megatron, 'g.output(ops.reduce(')}:14")
    assert f"all_reduce sum over [tp]  at {locs[('tp',)]}" in summary
    result = exe.run(steps=2, seed=4)
    assert [s.step for s in result.steps] == [1, 2]
    assert result.steps[0].tokens_per_s is None and result.steps[0].loss is not None
    errors = exe.check(result=result, steps=2, seed=4)
    assert max(errors.values()) < 1e-5, errors
    assert exe.input_sharding("w2").body() == '[{"tp"}, {}]'


@pytest.mark.usefixtures("need_par_run")
def test_checkpoint_resume_and_nonfinite_stop(tmp_path):
    g = _megatron(None)
    exe = par.compile(g, mesh="dp=2,tp=2", optimizer=par.SGD(lr=0.1),
                      workdir=tmp_path)
    whole = exe.run(steps=3, seed=2, log_every=1)
    ckpt = tmp_path / "ckpt"
    first = exe.run(steps=2, seed=2, save=str(ckpt), save_every=1, keep=2)
    saves = [e for e in first.events if e["event"] == "save"]
    assert [e["step"] for e in saves] == [1, 2]
    assert sorted(p.name.split("-")[1] for p in ckpt.glob("step-*")) == ["1", "2"]
    rest = exe.run(steps=1, seed=2, load=str(ckpt), log_every=1)
    assert [s.step for s in rest.steps] == [3]
    assert abs(rest.steps[0].loss - whole.steps[2].loss) <= 1e-6 * abs(whole.steps[2].loss)
    # A learning rate that overflows the update stops the run (code 4).
    wild = par.compile(g, mesh="dp=2,tp=2", optimizer=par.SGD(lr=1e38),
                       workdir=tmp_path / "wild")
    with pytest.raises(par.ParError) as error:
        wild.run(steps=3, seed=2, on_nonfinite="stop")
    assert error.value.returncode == 4
    assert "is not finite; stopping (--on-nonfinite=stop)" in str(error.value)


def test_parse_step_lines():
    from par.compile import parse_steps
    steps = parse_steps(
        "par-run: x on 4 rank(s)\n"
        "step 1  loss 5.544515  10907 tokens/s  5.87 ms  peak 149.1 KiB (plan 149.1 KiB)\n"
        "step 2  0.04 ms  peak 1.5 KiB (plan 1.5 KiB)\n")
    assert [(s.step, s.loss, s.tokens_per_s, s.ms) for s in steps] == [
        (1, 5.544515, 10907.0, 5.87), (2, None, None, 0.04)]
    assert steps[0].peak == "149.1 KiB" and steps[1].plan == "1.5 KiB"


@pytest.mark.parametrize("family,size,params", [
    ("gpt2", "124M", 124_439_808), ("gpt2", "350M", 354_823_168),
    ("gpt2", "774M", 774_030_080), ("gpt2", "1.5B", 1_557_611_200),
    ("llama", "7B", 6_738_415_616), ("llama", "13B", 13_015_864_320),
    ("llama", "70B", 68_976_648_192),
])
def test_model_family_parameter_counts(family, size, params):
    g = getattr(M, family)(size, batch=1, seq=128)
    assert g.num_params() == params
    assert [o.name for o in g.outputs] == ["loss"]
    assert g.input_named("tokens").vocab_size == g.input_named("targets").vocab_size


def test_gpt2_initializers_follow_gpt2():
    g = M.gpt2("124M", batch=1, seq=64)
    init = {i.name: i.init for i in g.params}
    assert init["wte"] == "normal(0.02)" and init["wpe"] == "normal(0.01)"
    assert init["h0.attn.wq"] == "normal(0.02)"
    assert init["h0.attn.wo"] == init["h11.mlp.w_down"] == "normal(0.00408248)"  # 0.02/sqrt(24)
    assert init["h3.ln1.g"] == "ones" and init["h3.ln1.b"] == init["h3.mlp.b_up"] == "zeros"
    with pytest.raises(ValueError, match="longer than the model's 1024"):
        M.gpt2("124M", batch=1, seq=2048)


@pytest.mark.usefixtures("need_par_opt")
def test_large_models_compile_sharded():
    g = M.gpt2("124M", batch=8, seq=1024)
    exe = par.compile(g, mesh=Mesh({"dp": 2, "tp": 4}),
                      shardings={**M.data_parallel(), **M.tensor_parallel()})
    assert exe.num_ranks == 8
    assert exe.input_sharding("h5.mlp.w_up").local_shape([768, 3072], exe.program_mesh()) == (768, 768)
    # Megatron: two all-reduces over tp per block.
    tp = [c for c in exe.collectives if exe.program["groups"][c["attrs"]["group"]] == ["tp"]]
    assert len(tp) == 2 * 12


EXAMPLES = {"mlp": "mlp/mlp", "gpt-tiny": "gpt-tiny/gpt_tiny", "llama-tiny": "llama-tiny/llama_tiny"}


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_example_mlir_is_up_to_date(example):
    stem = ROOT / "examples" / EXAMPLES[example]
    out = subprocess.run([sys.executable, str(stem.with_suffix(".py"))], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert out == stem.with_suffix(".mlir").read_text(), \
        f"regenerate: python3 examples/{EXAMPLES[example]}.py > examples/{EXAMPLES[example]}.mlir"


@pytest.mark.usefixtures("need_par_run")
def test_example_runs_and_matches_reference():
    proc = subprocess.run([sys.executable, str(ROOT / "examples/llama-tiny/llama_tiny.py"), "--run",
                           "--steps", "2"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("match")
    assert "program @llama_tiny: 4 rank(s), mesh dp=2 x tp=2" in proc.stdout
