"""Training steps compiled from Python (par.compile(..., optimizer=...))."""
from pathlib import Path

import pytest

import par
from par import models
from par.compile import parse_steps

CORPUS = Path(__file__).resolve().parents[2] / "data" / "tiny-corpus.txt"


def _gpt(mesh):
    shardings = {}
    if mesh is not None:
        shardings = {**models.data_parallel("dp"), **models.tensor_parallel("tp")}
    return models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 4, 16, mesh=mesh,
                             shardings=shardings, name="gpt_tiny")


@pytest.mark.usefixtures("need_par_run")
def test_sharded_training_matches_one_rank_and_learns(tmp_path):
    opt = par.AdamW(lr=3e-3, clip=1.0, warmup=3, decay_steps=12)
    mesh = par.Mesh({"dp": 2, "tp": 2})
    sharded = par.compile(_gpt(mesh), mesh=mesh, optimizer=opt, workdir=tmp_path / "s")
    single = par.compile(_gpt(None), optimizer=opt, workdir=tmp_path / "1")
    a = sharded.run(steps=12, data=str(CORPUS), log_every=1)
    b = single.run(steps=12, data=str(CORPUS), log_every=1)
    assert sharded.num_ranks == 4 and single.num_ranks == 1
    assert len(a.losses) == 12
    for x, y in zip(a.losses, b.losses):
        assert abs(x - y) <= 1e-4 * abs(y)
    # Every updated parameter and AdamW moment agrees after the last step
    # (absolutely where the true value is ~0). The key biases get no
    # gradient (softmax ignores a constant added to every key's score):
    # what AdamW makes of their rounding noise differs between the runs,
    # so they are checked to stay at that level instead.
    updates = {o["name"]: o.get("updates", "") for o in single.program["outputs"]}
    for name, value in b.outputs.items():
        if updates[name].split(".")[-1] == "bk":
            assert abs(value).max() < 1e-4 and abs(a.outputs[name]).max() < 1e-4, name
            continue
        close = abs(a.outputs[name] - value).max() < 1e-5
        assert close or par.max_relative_error(a.outputs[name], value) < 1e-4, name
    assert a.losses[-1] < a.losses[0] - 0.5
    # The schedule and the clipping norm are logged.
    assert a.steps[0].extras["lr"] == pytest.approx(1e-3, rel=1e-3)
    assert a.steps[2].extras["lr"] == pytest.approx(3e-3, rel=1e-3)
    assert a.steps[0].extras["grad_norm"] > 0


@pytest.mark.usefixtures("need_par_opt")
def test_training_states_are_parameters(tmp_path):
    exe = par.compile(_gpt(None), optimizer=par.SGD(lr=0.1, momentum=0.9),
                      workdir=tmp_path)
    inputs = {i["name"]: i for i in exe.program["inputs"]}
    assert inputs["step"]["role"] == "param"
    assert inputs["wte.momentum"]["init"] == {"kind": "zeros"}
    updated = {o.get("updates") for o in exe.program["outputs"]}
    assert {"wte", "wte.momentum", "step"} <= updated


@pytest.mark.usefixtures("need_par_run")
def test_check_compares_a_training_step_with_one_rank(tmp_path):
    # A training step has no numpy reference: check() runs the same step
    # compiled for one rank and compares every output and the logged losses.
    mesh = par.Mesh({"dp": 2, "tp": 2})
    exe = par.compile(_gpt(mesh), mesh=mesh, optimizer=par.SGD(lr=0.1, momentum=0.9),
                      workdir=tmp_path)
    errors = exe.check(steps=3, data=str(CORPUS))
    assert len(errors) == len(exe.program["outputs"]) + 1
    assert errors["losses"] < 1e-5 and errors["loss"] < 1e-5
    assert {"wte", "wte.momentum", "step"} <= set(errors)
    # The key biases' gradients vanish (softmax ignores a constant added to
    # every key's score): their values are rounding noise around zero.
    rest = {k: v for k, v in errors.items() if ".attn.bk" not in k}
    assert max(rest.values()) < 1e-4, rest


@pytest.mark.usefixtures("need_par_run")
def test_zero3_flattened_views_match_one_rank(tmp_path):
    # On dp=3 no dim of the tiny GPT's matrices divides 3: ZeRO-3 splits
    # them as flat views (pieces of ceil(numel / 3)), and the dumped
    # outputs come back in the parameters' own shapes.
    mesh = par.Mesh({"dp": 3})
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 6, 16, mesh=mesh,
                              shardings=models.data_parallel("dp"), name="gpt_tiny")
    exe = par.compile(graph, mesh=mesh, optimizer=par.AdamW(lr=3e-3, clip=1.0, zero=3),
                      workdir=tmp_path)
    views = {i["name"]: i for i in exe.program["inputs"] if "view" in i}
    assert views["wte"]["global_shape"] == [128 * 64] and views["wte"]["view"] == [128, 64]
    assert views["h0.attn.wq.m"]["view"] == [64, 4, 16]
    errors = exe.check(steps=3, data=str(CORPUS))
    assert errors["losses"] < 1e-5
    # The key biases' gradients vanish (see above): rounding noise. Elsewhere
    # too, a gradient element that nearly cancels is rounding noise that
    # AdamW scales to an update of up to lr (3e-3 here) either way, and dp=3
    # sums in another order than one rank: 2.2e-4 of h1.attn.wv's largest
    # value with OpenBLAS's Haswell kernels, under 1e-4 with others. A
    # misplaced or misordered flat piece errs by O(1).
    rest = {k: v for k, v in errors.items() if ".attn.bk" not in k}
    assert max(rest.values()) < 1e-3, rest


@pytest.mark.usefixtures("need_par_run")
def test_full_remat_trains_exactly_like_the_plain_step(tmp_path):
    # remat="full" recomputes each layer in the backward pass: the same
    # kernels on the same inputs, so the same losses and outputs, with
    # fewer activation buffers kept from the forward pass.
    mesh = par.Mesh({"dp": 2, "tp": 2})
    opt = par.AdamW(lr=3e-3)
    plain = par.compile(_gpt(mesh), mesh=mesh, optimizer=opt, workdir=tmp_path / "p")
    remat = par.compile(_gpt(mesh), mesh=mesh, optimizer=opt, remat="full",
                        workdir=tmp_path / "r")
    a = plain.run(steps=3, data=str(CORPUS), log_every=1)
    b = remat.run(steps=3, data=str(CORPUS), log_every=1)
    assert a.losses == b.losses
    for name, value in a.outputs.items():
        assert (b.outputs[name] == value).all(), name
    with pytest.raises(ValueError, match="remat= applies to a training step"):
        par.compile(_gpt(None), remat="full", workdir=tmp_path / "x")


@pytest.mark.usefixtures("need_par_run")
def test_remat_modes_train_exactly_like_the_plain_step(tmp_path):
    # Attention written from its parts (fused_attention=False) on four
    # layers of 64 tokens: "selective" recomputes its score-sized values,
    # "auto" fits a budget between the plain and the full peak; every mode
    # trains as the plain step and par-run measures the planned peak.
    config = models.GPTConfig(vocab_size=128, block_size=64, n_layer=4, n_head=4, n_embd=32,
                              fused_attention=False)
    mesh = par.Mesh({"dp": 2, "tp": 2})
    shardings = {**models.data_parallel("dp"), **models.tensor_parallel("tp")}
    graph = models.loss_graph(models.GPT(config), 4, 64, mesh=mesh, shardings=shardings,
                              name="gpt_unfused")
    opt = par.AdamW(lr=3e-3)
    runs = {}
    for mode in ("none", "selective", "full", "auto:budget=1400KiB"):
        exe = par.compile(graph, mesh=mesh, optimizer=opt, remat=mode,
                          workdir=tmp_path / mode.split(":")[0])
        runs[mode] = exe.run(steps=2, data=str(CORPUS), log_every=1)
    peaks = {mode: run.memory["planned"] for mode, run in runs.items()}
    for mode, run in runs.items():
        assert run.losses == runs["none"].losses, mode
        assert max(run.memory["measured"]) == run.memory["planned"], mode
    assert peaks["full"] < peaks["selective"] < peaks["none"], peaks
    assert peaks["auto:budget=1400KiB"] <= 1400 * 1024 < peaks["none"], peaks


def test_pipeline_trains_like_one_rank(tmp_path):
    # Four layers over pp=2 x dp=2, two micro-batches of 2 rows per data
    # replica, 1F1B: the same losses as the whole batch of 8 on one rank.
    config = models.GPTConfig(vocab_size=64, block_size=16, n_layer=4, n_head=2, n_embd=16)
    mesh = par.Mesh({"pp": 2, "dp": 2})
    piped = models.loss_graph(models.GPT(config), 4, 16, mesh=mesh,
                              shardings=models.data_parallel("dp"), name="gpt_pp")
    whole = models.loss_graph(models.GPT(config), 8, 16, name="gpt_whole")
    opt = par.AdamW(lr=3e-3)
    exe = par.compile(piped, mesh=mesh, optimizer=opt, pipeline="microbatches=2",
                      workdir=tmp_path / "pp")
    assert [c["ranks"] for c in exe.program["rank_classes"]] == [[0, 1], [2, 3]]
    got = exe.run(steps=3, data=str(CORPUS), log_every=1)
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(
        steps=3, data=str(CORPUS), log_every=1)
    assert len(got.losses) == 3
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-5 * abs(b)
    with pytest.raises(ValueError):
        par.compile(whole, pipeline=True)


def test_divided_batch_trains_like_one_rank(tmp_path):
    # The graph at the whole batch of 8; the compiler divides it into 4
    # micro-batches of 2 rows (divide_batch), pp=2 x dp=2, 1F1B.
    config = models.GPTConfig(vocab_size=64, block_size=16, n_layer=4, n_head=2, n_embd=16)
    mesh = par.Mesh({"pp": 2, "dp": 2})
    piped = models.loss_graph(models.GPT(config), 8, 16, mesh=mesh,
                              shardings=models.data_parallel("dp"), name="gpt_divided")
    whole = models.loss_graph(models.GPT(config), 8, 16, name="gpt_whole")
    opt = par.AdamW(lr=3e-3)
    pipe = par.Pipeline(microbatches=4, divide_batch=True)
    assert pipe.pass_option().endswith("microbatches=4 divide-batch")
    assert pipe.micro_batch(8) == 8 and par.Pipeline(microbatches=4).micro_batch(8) == 2
    exe = par.compile(piped, mesh=mesh, optimizer=opt, pipeline=pipe, workdir=tmp_path / "pp")
    assert "4 micro-batches dividing the step's batch" in exe.comm_report
    got = exe.run(steps=3, data=str(CORPUS), log_every=1)
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(
        steps=3, data=str(CORPUS), log_every=1)
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-5 * abs(b)
    with pytest.raises(par.ParError, match="microbatches=3 does not divide the batch of 8"):
        par.compile(piped, mesh=mesh, optimizer=opt, workdir=tmp_path / "bad",
                    pipeline=par.Pipeline(microbatches=3, divide_batch=True))


def test_pipeline_options():
    pipe = par.Pipeline(microbatches=4, schedule="interleaved", virtual=2, stages=[1, 1, 1, 1])
    assert pipe.pass_option() == ("--par-pipeline=axis=pp schedule=interleaved microbatches=4 "
                                  "layers=1,1,1,1 virtual=2")
    assert par.Pipeline().pass_option() == "--par-pipeline=axis=pp schedule=1f1b"
    assert par.Pipeline(microbatches=4).micro_batch(8) == 2
    assert par.Pipeline().micro_batch(8, {"pp": 4, "dp": 2}) == 2
    with pytest.raises(ValueError, match="microbatches=3 does not divide the batch of 8 rows"):
        par.Pipeline(microbatches=3).micro_batch(8)
    with pytest.raises(ValueError, match="no mesh axis 'pp'"):
        par.Pipeline().count({"dp": 2})
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 2, 16)
    with pytest.raises(ValueError, match="pipeline_stages= needs pipeline="):
        par.compile(graph, optimizer=par.AdamW(), pipeline_stages=[1, 1])


def test_pipeline_object_and_stages_train_like_one_rank(tmp_path):
    # Four layers over pp=2 placed 3 + 1 (pipeline_stages), zero-bubble
    # schedule, a batch of 4 divided into 2 micro-batches.
    config = models.GPTConfig(vocab_size=64, block_size=16, n_layer=4, n_head=2, n_embd=16)
    mesh = par.Mesh({"pp": 2})
    pipe = par.Pipeline(microbatches=2, schedule="zb-h1")
    piped = models.loss_graph(models.GPT(config), pipe.micro_batch(4), 16, mesh=mesh,
                              name="gpt_zb")
    whole = models.loss_graph(models.GPT(config), 4, 16, name="gpt_whole")
    opt = par.AdamW(lr=3e-3)
    exe = par.compile(piped, mesh=mesh, optimizer=opt, pipeline=pipe, pipeline_stages=[3, 1],
                      workdir=tmp_path / "pp")
    assert "holds layers 0-2" in exe.comm_report and "holds layer 3" in exe.comm_report
    assert exe.program["pipeline"]["schedule"] == "zb-h1"
    got = exe.run(steps=3, data=str(CORPUS), log_every=1)
    assert "par-run: pipeline bubble (zb-h1, 2 stages x 2 micro-batches): predicted" in got.text
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(
        steps=3, data=str(CORPUS), log_every=1)
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-5 * abs(b)


def test_pipeline_with_context_and_tensor_parallel_stages(tmp_path):
    # pp=2 x sp=2 x tp=2: each stage splits the sequence over sp (context
    # parallel) and heads and MLP units over tp; 2 micro-batches of 4 rows
    # train like the batch of 8 on one rank.
    config = models.GPT2_CONFIGS["tiny"]
    mesh = par.Mesh({"pp": 2, "sp": 2, "tp": 2})
    shardings = dict(models.tensor_parallel("tp"))
    shardings.update({"tokens": par.P(None, "sp"), "targets": par.P(None, "sp")})
    pipe = par.Pipeline(microbatches=2)
    piped = models.loss_graph(models.GPT(config), pipe.micro_batch(8, mesh), 16, mesh=mesh,
                              shardings=shardings, name="gpt_3d")
    whole = models.loss_graph(models.GPT(config), 8, 16, name="gpt_whole")
    opt = par.AdamW(lr=3e-3)
    got = par.compile(piped, mesh=mesh, optimizer=opt, pipeline=pipe,
                      workdir=tmp_path / "pp").run(steps=3, data=str(CORPUS), log_every=1)
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(
        steps=3, data=str(CORPUS), log_every=1)
    assert len(got.losses) == 3
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-5 * abs(b)


def test_auto_shard_chooses_the_microbatches(tmp_path):
    # Pipeline(microbatches="auto"): the model is built at batch/m rows for
    # each m that divides the batch of 8; --auto-shard's predicted step
    # picks one, and the step trains like the batch of 8 on one rank.
    config = models.GPTConfig(vocab_size=64, block_size=16, n_layer=4, n_head=2, n_embd=16)
    mesh = par.Mesh({"pp": 2})

    def build(rows):
        return models.loss_graph(models.GPT(config), rows, 16, mesh=mesh, name="gpt_m")

    opt = par.AdamW(lr=3e-3)
    pipe = par.Pipeline(microbatches="auto")
    exe = par.compile(build, mesh=mesh, optimizer=opt, auto_shard="hardware=cpu-local",
                      pipeline=pipe, batch=8, workdir=tmp_path / "pp")
    tried = exe.microbatch_search
    assert [m for m, _ in tried] == [2, 4, 8]
    chosen = min(tried, key=lambda entry: entry[1])[0]
    assert exe.program["pipeline"]["microbatches"] == chosen
    got = exe.run(steps=3, data=str(CORPUS), log_every=1)
    whole = models.loss_graph(models.GPT(config), 8, 16, name="gpt_whole")
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(
        steps=3, data=str(CORPUS), log_every=1)
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-5 * abs(b)
    with pytest.raises(ValueError, match="needs a graph builder"):
        par.compile(whole, mesh=mesh, optimizer=opt, auto_shard=True, pipeline=pipe, batch=8)
    with pytest.raises(ValueError, match="needs batch="):
        par.compile(build, mesh=mesh, optimizer=opt, auto_shard=True, pipeline=pipe)
    with pytest.raises(ValueError, match="give auto_shard="):
        par.compile(build, mesh=mesh, optimizer=opt, pipeline=pipe, batch=8)


def test_pipeline_bf16_untied_model_trains_like_one_rank(tmp_path):
    # Llama (untied embeddings) in bf16 over pp=2 with 2 micro-batches:
    # every gradient is accumulated in f32 (the last one made right before
    # the next micro-batch's copies), the losses as one rank's to bf16's
    # resolution.
    mesh = par.Mesh({"pp": 2})
    config = models.LLAMA_CONFIGS["tiny"]
    opt = par.AdamW(lr=3e-3, precision="bf16")
    piped = models.loss_graph(models.Llama(config), 2, 16, mesh=mesh, name="llama_pp")
    got = par.compile(piped, mesh=mesh, optimizer=opt, pipeline=par.Pipeline(microbatches=2),
                      workdir=tmp_path / "pp").run(steps=3, log_every=1)
    whole = models.loss_graph(models.Llama(config), 4, 16, name="llama_whole")
    want = par.compile(whole, optimizer=opt, workdir=tmp_path / "one").run(steps=3, log_every=1)
    for a, b in zip(got.losses, want.losses):
        assert abs(a - b) <= 1e-2 * abs(b)


def test_layer_stage_marks_place_the_pipeline_stages(tmp_path):
    # `with g.layer(i, stage=s)` prints par.stage on the layer's ops;
    # --par-pipeline takes the split 3 + 1 from the marks.
    g = par.Graph("staged", mesh=par.Mesh({"pp": 2}))
    h = g.data("x", [4, 8])
    for i in range(4):
        w = g.param(f"w{i}", [8, 8])
        with g.layer(i, stage=0 if i < 3 else 1):
            h = par.tanh(par.matmul(h, w))
    g.output(par.reduce(h * h, "mean"), "loss")
    assert "par.layer = 3 : i64, par.stage = 1 : i64" in g.to_mlir()
    exe = par.compile(g, optimizer=par.SGD(lr=0.1), pipeline="microbatches=2",
                      workdir=tmp_path)
    assert "holds layers 0-2" in exe.comm_report and "holds layer 3" in exe.comm_report
    with pytest.raises(ValueError, match="layer: the stage must be a non-negative integer"):
        g.layer(0, stage=-1)


def test_optimizer_pass_option():
    text = par.AdamW(lr=0.5, clip=2.0, warmup=4).pass_option()
    assert text.startswith("--par-autodiff=optimizer=adamw lr=0.5 ")
    assert "clip=2.0" in text and "warmup=4" in text
    assert text.endswith(" data-axis=dp bucket=25MiB")
    assert par.AdamW().pass_options() == [par.AdamW().pass_option()]
    assert par.AdamW(remat="auto:budget=1GiB").pass_options()[1] == "--par-remat=auto:budget=1GiB"


def test_step_lines_with_logged_values():
    steps = parse_steps(
        "step 3  loss 2.5  grad_norm 1.25  lr 0.001  900 tokens/s  2.00 ms  peak 1 KiB (plan 1 KiB)")
    assert steps[0].loss == 2.5 and steps[0].tokens_per_s == 900
    assert steps[0].extras == {"grad_norm": 1.25, "lr": 0.001}


def test_json_step_lines_keep_full_precision():
    # par-run --json: numbers at full precision, non-finite ones as strings.
    steps = parse_steps(
        '{"event":"start","function":"f"}\n'
        '{"event":"step","step":4,"loss":2.6123456789e-05,"log":{"grad_norm":"inf"},'
        '"seconds":0.002,"peak_bytes":2048,"planned_bytes":4096,"tokens_per_s":900.0}\n'
        '{"event":"step","step":5,"loss":"nan","log":{},"seconds":0.001,'
        '"peak_bytes":2048,"planned_bytes":4096}\n')
    assert steps[0].loss == 2.6123456789e-05 and steps[0].extras["grad_norm"] == float("inf")
    assert steps[0].peak == "2.0 KiB" and steps[0].planned_bytes == 4096
    assert steps[0].ms == pytest.approx(2.0) and steps[1].tokens_per_s is None
    assert steps[1].loss != steps[1].loss  # NaN
    assert steps[0].text() == ("step 4  loss 2.612346e-05  grad_norm inf  900 tokens/s  "
                               "2.00 ms  peak 2.0 KiB (plan 4.0 KiB)")


@pytest.mark.usefixtures("need_par_run")
def test_auto_shard_plan_trains_like_one_rank(tmp_path):
    # No annotations: --auto-shard chooses every sharding (on a profile where
    # splitting pays, so the plan is sharded), the report carries the plan,
    # and the sharded run equals one rank.
    profile = Path(__file__).resolve().parents[2] / "test" / "Integration" / "profiles" / \
        "slow-compute.json"
    opt = par.AdamW(lr=3e-3, clip=1.0)
    mesh = par.Mesh({"dp": 2, "tp": 2})
    graph = models.loss_graph(models.GPT(models.GPT2_CONFIGS["tiny"]), 4, 16, mesh=mesh,
                              name="gpt_tiny")
    auto = par.compile(graph, mesh=mesh, optimizer=opt, workdir=tmp_path / "a",
                       auto_shard=f"hardware={profile}")
    assert "auto-shard plan on 'slow-compute'" in auto.comm_report
    assert "predicted step on 'slow-compute'" in auto.comm_report
    # The plan splits the work: collectives run.
    assert "all_" in auto.comm_report or "reduce_scatter" in auto.comm_report
    single = par.compile(_gpt(None), optimizer=opt, workdir=tmp_path / "1")
    a = auto.run(steps=4, data=str(CORPUS), log_every=1)
    b = single.run(steps=4, data=str(CORPUS), log_every=1)
    for x, y in zip(a.losses, b.losses):
        assert abs(x - y) <= 1e-4 * abs(y)
