"""Python frontend of par: build sharded programs, compile them with
par-opt, run them with par-run, and check them against a numpy reference.

    import par
    from par import P, Mesh

    mesh = Mesh({"dp": 2, "tp": 2})
    g = par.models.loss_graph(par.models.GPT(par.models.GPT2_CONFIGS["tiny"]), 4, 16,
                              shardings={**par.models.data_parallel(),
                                         **par.models.tensor_parallel()})
    exe = par.compile(g, mesh=mesh)
    print(exe.plan_summary())
    print(exe.run(steps=2).losses)

The graph builder is `par.Graph` plus one function per dialect op
(`par.ops.dot`, `par.ops.attention`, ...); `par.nn` has layers, `par.models`
model families, `par.reference` the numpy executor.
"""
from . import graph as ops
from . import models, nn, reference
from .compile import (SGD, AdamW, Executable, Optimizer, Pipeline, RunResult, StepLog,
                      compile, max_relative_error)
from .driver import Diagnostic, ParError, find_tool, par_opt, par_run
from .graph import (DTYPES, Graph, Input, Location, Op, Output, Tensor, add, argmax, argmin,
                    attention, broadcast,
                    compare, concat, constant, convert, cross_entropy, div, dot, embedding, exp,
                    gather, gelu, layer_norm, log, log_softmax, matmul, maximum, minimum, mul, neg, reduce, relu,
                    pad, reshape, rms_norm, rope, rsqrt, select, sgd, adamw, sigmoid, silu, slice,
                    softmax, sqrt, sub, tanh, transpose, sharding_constraint)
from .sharding import (Mesh, P, Partial, PartitionSpec, Placement, Replicate, Shard,
                       ShardingSpec, constraint, to_spec)
from .visualize import show_sharding, visualize_sharding

__all__ = [
    # driver
    "Diagnostic", "ParError", "find_tool", "par_opt", "par_run",
    # graph
    "Graph", "Tensor", "Op", "Input", "Output", "Location", "DTYPES", "ops",
    "add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "tanh", "sqrt",
    "rsqrt", "gelu", "silu", "relu", "sigmoid", "compare", "select", "convert", "constant",
    "broadcast", "reduce", "argmax", "argmin", "transpose", "reshape", "slice", "pad", "concat", "dot", "matmul",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "attention", "embedding", "gather", "cross_entropy", "rope",
    "adamw", "sgd", "sharding_constraint",
    # sharding
    "Mesh", "P", "PartitionSpec", "Placement", "Shard", "Replicate", "Partial", "ShardingSpec",
    "constraint", "to_spec",
    # compile / run
    "compile", "Executable", "RunResult", "StepLog", "max_relative_error", "Optimizer",
    "AdamW", "SGD", "Pipeline",
    # the rest
    "visualize_sharding", "show_sharding", "nn", "models", "reference",
]
__version__ = "0.1.0"
