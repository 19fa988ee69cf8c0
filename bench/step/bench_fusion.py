#!/usr/bin/env python3
"""Training-step speed with and without --par-fuse, and against JAX, on CPUs.

Two GPT training steps (AdamW) from the frontend's models: GPT-tiny (2
layers, width 64, 16 tokens, vocabulary 128) and a 6-layer 256-wide GPT
(8 heads, 64 tokens, vocabulary 256), both at batch 8, on 1 rank and on 8
ranks data parallel (dp=8). Each is compiled by par with and without
--par-fuse and run for --steps steps with par-run; the same model and
optimizer written in JAX is jitted and run on the same CPU, with 8 host
devices (XLA_FLAGS=--xla_force_host_platform_device_count=8) sharding the
batch for the 8-rank rows. The three run in turn --rounds times (the
development machine's speed drifts by tens of percent within minutes).
Printed per model and rank count: the median step time after the first
step (of the median round), tokens/s, the planned peak per rank, the
fused/unfused ratio and par/JAX ratio (above 1: par is faster). Kernels
are launches: a batch of optimizer updates (the multi-tensor optimizer of
--par-fuse) counts once.

JAX is optional (`pip install jax`); without it the JAX columns say so.

  bench_fusion.py [--build build] [--steps 12] [--rounds 3] [--ranks 1,8] [--models tiny,6x256]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python_frontend"))

import par  # noqa: E402
from par import models  # noqa: E402

MODELS = {
    "tiny": (models.GPT2_CONFIGS["tiny"], 8, 16),
    "6x256": (models.GPTConfig(vocab_size=256, block_size=64, n_layer=6, n_head=8,
                               n_embd=256), 8, 64),
}


def par_compile(config, batch, seq, ranks, fuse, work):
    mesh = par.Mesh({"dp": ranks}) if ranks > 1 else None
    graph = models.loss_graph(models.GPT(config), batch, seq, mesh=mesh,
                              shardings=models.data_parallel() if mesh else {},
                              name="gpt")
    return par.compile(graph, mesh=mesh, optimizer=par.AdamW(lr=1e-3, weight_decay=0.01),
                       fuse=fuse, workdir=work)


def par_step(exe, batch, seq, steps):
    result = exe.run(steps=steps)
    ms = statistics.median(s.ms for s in result.steps[1:])
    instructions = exe.program["rank_classes"][0]["instructions"]
    # Launches: a batch of optimizer updates is one.
    launches = len(instructions) - sum(i.get("batch", 1) - 1 for i in instructions)
    return {"ms": ms, "tokens/s": batch * seq / ms * 1e3,
            "peak": result.memory["planned"], "kernels": launches,
            "losses": [s.loss for s in result.steps]}


def rounds(runs):
    """The run of median time among several."""
    return sorted(runs, key=lambda r: r["ms"])[len(runs) // 2]


# The same GPT-2 step in JAX: tied embeddings, biases, pre-norm blocks,
# tanh GELU, causal attention, mean cross-entropy, AdamW.
JAX_STEP = textwrap.dedent("""
    import json, sys, time
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    vocab, seq, layers, heads, width, batch, ranks, steps = map(int, sys.argv[1:9])
    key = jax.random.PRNGKey(0)
    def normal(shape):
        global key
        key, sub = jax.random.split(key)
        return 0.02 * jax.random.normal(sub, shape, jnp.float32)
    params = {"wte": normal((vocab, width)), "wpe": normal((seq, width)),
              "lnf_g": jnp.ones(width), "lnf_b": jnp.zeros(width), "blocks": []}
    for _ in range(layers):
        params["blocks"].append({
            "ln1_g": jnp.ones(width), "ln1_b": jnp.zeros(width),
            "qkv_w": normal((width, 3 * width)), "qkv_b": jnp.zeros(3 * width),
            "proj_w": normal((width, width)), "proj_b": jnp.zeros(width),
            "ln2_g": jnp.ones(width), "ln2_b": jnp.zeros(width),
            "fc_w": normal((width, 4 * width)), "fc_b": jnp.zeros(4 * width),
            "out_w": normal((4 * width, width)), "out_b": jnp.zeros(width)})
    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g + b
    def loss_fn(p, tokens, targets):
        x = p["wte"][tokens] + p["wpe"][None, :tokens.shape[1]]
        hd = width // heads
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        for blk in p["blocks"]:
            h = ln(x, blk["ln1_g"], blk["ln1_b"])
            qkv = h @ blk["qkv_w"] + blk["qkv_b"]
            q, k, v = jnp.split(qkv, 3, axis=-1)
            q, k, v = [t.reshape(t.shape[0], seq, heads, hd) for t in (q, k, v)]
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(hd)
            s = jnp.where(mask, s, -1e30)
            a = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)
            x = x + a.reshape(a.shape[0], seq, width) @ blk["proj_w"] + blk["proj_b"]
            h = ln(x, blk["ln2_g"], blk["ln2_b"])
            h = jax.nn.gelu(h @ blk["fc_w"] + blk["fc_b"], approximate=True)
            x = x + h @ blk["out_w"] + blk["out_b"]
        logits = ln(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()
    def step(p, m, v, t, tokens, targets):
        loss, g = jax.value_and_grad(loss_fn)(p, tokens, targets)
        b1, b2, lr, wd, eps = 0.9, 0.999, 1e-3, 0.01, 1e-8
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        def upd(p, m, v):
            mh, vh = m / (1 - b1 ** t), v / (1 - b2 ** t)
            return p - lr * (mh / (jnp.sqrt(vh) + eps) + wd * p)
        return jax.tree.map(upd, p, m, v), m, v, loss
    zeros = jax.tree.map(jnp.zeros_like, params)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (batch, seq), 0, vocab)
    targets = jnp.roll(tokens, -1, axis=1)
    if ranks > 1:
        mesh = Mesh(jax.devices()[:ranks], ("dp",))
        rows = NamedSharding(mesh, P("dp", None))
        tokens, targets = jax.device_put(tokens, rows), jax.device_put(targets, rows)
        params = jax.device_put(params, NamedSharding(mesh, P()))
        zeros = jax.device_put(zeros, NamedSharding(mesh, P()))
    fn = jax.jit(step)
    p, m, v = params, zeros, zeros
    times = []
    for t in range(1, steps + 1):
        start = time.perf_counter()
        p, m, v, loss = fn(p, m, v, float(t), tokens, targets)
        loss.block_until_ready()
        times.append(time.perf_counter() - start)
    times = sorted(times[1:])
    print(json.dumps({"ms": 1e3 * times[len(times) // 2]}))
""")


def jax_step(config, batch, seq, ranks, steps):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={ranks}",
               JAX_PLATFORMS="cpu")
    args = [sys.executable, "-c", JAX_STEP, str(config.vocab_size), str(seq),
            str(config.n_layer), str(config.n_head), str(config.n_embd), str(batch),
            str(ranks), str(steps)]
    ran = subprocess.run(args, capture_output=True, text=True, env=env)
    if ran.returncode:
        if "No module named 'jax'" in ran.stderr:
            return None
        sys.exit(f"the JAX step failed:\n{ran.stderr[-2000:]}")
    ms = json.loads(ran.stdout.strip().splitlines()[-1])["ms"]
    return {"ms": ms, "tokens/s": batch * seq / ms * 1e3}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--ranks", default="1,8")
    parser.add_argument("--models", default="tiny,6x256")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each, in turn; the median run is kept")
    args = parser.parse_args()
    os.environ["PATH"] = os.path.join(args.build, "bin") + os.pathsep + os.environ["PATH"]
    print("| model | ranks | par unfused (ms) | par fused (ms) | fused tokens/s | kernels "
          "unfused -> fused | planned peak unfused -> fused (KiB) | fused/unfused speed "
          "| JAX (ms) | par fused / JAX speed | losses |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for name in args.models.split(","):
        config, batch, seq = MODELS[name]
        for ranks in map(int, args.ranks.split(",")):
            # The three run in turn, --rounds times, so that drift in the
            # machine's speed hits each alike; each keeps its median run.
            with tempfile.TemporaryDirectory() as work:
                plain_exe = par_compile(config, batch, seq, ranks, False,
                                        os.path.join(work, "plain"))
                fused_exe = par_compile(config, batch, seq, ranks, True,
                                        os.path.join(work, "fused"))
                runs = {"plain": [], "fused": [], "jax": []}
                for _ in range(args.rounds):
                    runs["plain"].append(par_step(plain_exe, batch, seq, args.steps))
                    runs["fused"].append(par_step(fused_exe, batch, seq, args.steps))
                    runs["jax"].append(jax_step(config, batch, seq, ranks, args.steps))
            plain, fused = rounds(runs["plain"]), rounds(runs["fused"])
            jax = rounds(runs["jax"]) if runs["jax"][0] else None
            same = max(abs(a - b) / abs(b) for a, b in zip(fused["losses"], plain["losses"]))
            jax_ms = f"{jax['ms']:.2f}" if jax else "(no jax)"
            ratio = f"{jax['ms'] / fused['ms']:.2f}x" if jax else ""
            print(f"| {name} | {ranks} | {plain['ms']:.2f} | {fused['ms']:.2f} | "
                  f"{fused['tokens/s']:,.0f} | {plain['kernels']} -> {fused['kernels']} | "
                  f"{plain['peak'] / 1024:,.0f} -> {fused['peak'] / 1024:,.0f} | "
                  f"{plain['ms'] / fused['ms']:.2f}x | {jax_ms} | {ratio} | "
                  f"within {same:.1e} |", flush=True)


if __name__ == "__main__":
    main()
