"""Compiling a graph with par-opt and running it with par-run.

    exe = par.compile(graph, mesh=Mesh({"dp": 2, "tp": 2}))
    print(exe.plan_summary())
    result = exe.run(steps=2)
    result.loss, result.outputs["loss"]

Compiler and runtime failures raise `ParError` with the located messages;
locations are the Python lines that built the failing op.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import reference
from .driver import Diagnostic, ParError, par_opt, par_run
from .graph import Graph
from .sharding import Mesh, ShardingSpec, SpecLike, spec_from_program

MeshLike = Union[Mesh, Mapping[str, int], str, None]

_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                "collective_permute", "all_slice")
_STEP_LINE = re.compile(
    r"^step (?P<step>\d+)(?P<rest>.*?)"
    r"\s+(?P<ms>\S+) ms\s+peak (?P<peak>.+?) \(plan (?P<plan>.+?)\)\s*$")
_PAIR = re.compile(r"(?P<name>[A-Za-z_.]+) (?P<value>\S+)|(?P<tps>\S+) tokens/s")


@dataclasses.dataclass
class Optimizer:
    """A training step for `compile(..., optimizer=...)`: par-opt's
    --par-autodiff turns the graph's loss into gradients and this update.
    `clip`: global gradient-norm clipping (0: off); the learning rate warms
    up over `warmup` steps, then follows a cosine to `min_lr_ratio * lr` at
    `decay_steps` (0: constant). `precision="bf16"` or `"fp16"` computes
    in low precision with fp32 master weights (fp16 with dynamic loss
    scaling). `zero=1|2|3` splits the optimizer states, gradients and
    parameters over `data_axis` (ZeRO). `remat` is par-opt's --par-remat:
    "full" keeps each layer's input and output only and recomputes the rest
    in the backward pass, "selective" recomputes the attention core,
    "auto:budget=SIZE" chooses per layer so the planned peak fits SIZE.
    `bucket`: the data-parallel gradient all-reduces travel in buckets of
    up to this size ("0": one per gradient)."""
    kind: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.0
    momentum: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    clip: float = 0.0
    warmup: int = 0
    decay_steps: int = 0
    min_lr_ratio: float = 0.1
    precision: str = "fp32"        # fp32, bf16 or fp16 (fp32 master weights)
    loss_scale: float = 65536.0    # fp16: initial dynamic loss scale
    scale_window: int = 1000       # fp16: clean steps before the scale doubles
    zero: int = 0                  # ZeRO stage 0-3 over data_axis
    data_axis: str = "dp"
    remat: Optional[str] = None    # none, selective, full or auto[:budget=SIZE]
    bucket: str = "25MiB"          # gradient all-reduce buckets (0: one per gradient)

    def pass_option(self) -> str:
        return (f"--par-autodiff=optimizer={self.kind} lr={self.lr!r} "
                f"weight-decay={self.weight_decay!r} momentum={self.momentum!r} "
                f"beta1={self.beta1!r} beta2={self.beta2!r} epsilon={self.eps!r} "
                f"clip={self.clip!r} warmup={self.warmup} decay-steps={self.decay_steps} "
                f"min-lr-ratio={self.min_lr_ratio!r} precision={self.precision} "
                f"loss-scale={self.loss_scale!r} scale-window={self.scale_window} "
                f"zero={self.zero} data-axis={self.data_axis} bucket={self.bucket}")

    def pass_options(self) -> List[str]:
        """par-opt's flags for this step: --par-autodiff, then --par-remat."""
        flags = [self.pass_option()]
        # A mode given, "none" included, is the user's (auto-shard keeps it).
        if self.remat is not None:
            flags.append(f"--par-remat={self.remat}")
        return flags


def AdamW(lr: float = 1e-3, **kw) -> Optimizer:
    return Optimizer("adamw", lr, **kw)


def SGD(lr: float = 1e-2, **kw) -> Optimizer:
    return Optimizer("sgd", lr, **kw)


def as_mesh(mesh: MeshLike) -> Optional[Mesh]:
    if mesh is None or isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, str):
        return Mesh.parse(mesh)
    return Mesh(mesh)


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """Pipeline parallelism for compile(..., pipeline=Pipeline(...))
    (--par-pipeline, docs/pipelines.md).

    `microbatches`: micro-batches per step (default: one per stage; "auto":
    compile(builder, batch=B, auto_shard=...) tries each m that divides B);
    `schedule`: "gpipe", "1f1b", "interleaved", "zb-h1" or "auto"
    (--auto-shard's choice, else the smallest predicted bubble);
    `stages`: layers per stage, first stage first (default: balanced by
    FLOPs); `virtual`: model chunks per device (interleaved);
    `axis`: the mesh axis whose devices are the stages;
    `divide_batch`: the graph is built at the step's whole batch and the
    compiler divides it into the micro-batches (--par-pipeline
    divide-batch).

    Otherwise the graph's batch is one micro-batch: a model meant for a
    batch of B rows is built at `micro_batch(B, mesh)` rows and the step
    reads m of them.
    """
    microbatches: Union[int, str, None] = None
    schedule: str = "1f1b"
    stages: Optional[Sequence[int]] = None
    virtual: int = 1
    axis: str = "pp"
    divide_batch: bool = False

    def count(self, mesh: MeshLike = None) -> int:
        """The micro-batches per step (the stages when not given)."""
        if self.microbatches == "auto":
            raise ValueError("Pipeline: microbatches='auto' is chosen by compile(..., batch=, "
                             "auto_shard=)")
        if self.microbatches is not None:
            if self.microbatches < 1:
                raise ValueError(f"Pipeline: microbatches={self.microbatches} must be positive")
            return self.microbatches
        mesh = as_mesh(mesh)
        if mesh is None or self.axis not in mesh.axis_names:
            raise ValueError(f"Pipeline: no mesh axis {self.axis!r} to count the stages of; "
                             "give microbatches=")
        return mesh.shape[self.axis]

    def micro_batch(self, batch: int, mesh: MeshLike = None) -> int:
        """The rows to build the graph at for a `batch`-row step: one
        micro-batch's, or with divide_batch the whole batch (which the
        compiler divides)."""
        m = self.count(mesh)
        if batch % m:
            raise ValueError(f"Pipeline: microbatches={m} does not divide the batch of {batch} "
                             "rows (the graph's batch is one micro-batch: build it at batch/m)")
        return batch if self.divide_batch else batch // m

    def pass_option(self) -> str:
        """The --par-pipeline option."""
        options = [f"axis={self.axis}", f"schedule={self.schedule}"]
        if self.microbatches is not None:
            options.append(f"microbatches={self.microbatches}")
        if self.stages:
            options.append("layers=" + ",".join(str(int(n)) for n in self.stages))
        if self.virtual != 1:
            options.append(f"virtual={self.virtual}")
        if self.divide_batch:
            options.append("divide-batch")
        return "--par-pipeline=" + " ".join(options)


@dataclasses.dataclass
class StepLog:
    """One logged step of par-run; `extras` holds the other logged values
    (`lr`, `grad_norm`, ...). From `par-run --json` (what Executable.run
    reads) numbers are at full precision and the byte counts are exact."""
    step: int
    loss: Optional[float]
    tokens_per_s: Optional[float]
    ms: float
    peak: str
    plan: str
    extras: Dict[str, float] = dataclasses.field(default_factory=dict)
    peak_bytes: Optional[int] = None
    planned_bytes: Optional[int] = None

    def text(self) -> str:
        """The step as par-run's text log shows it."""
        parts = [f"step {self.step}"]
        if self.loss is not None:
            parts.append(f"loss {self.loss:.7g}")
        parts += [f"{name} {value:.4g}" for name, value in self.extras.items()]
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:.0f} tokens/s")
        parts.append(f"{self.ms:.2f} ms")
        parts.append(f"peak {self.peak} (plan {self.plan})")
        return "  ".join(parts)


@dataclasses.dataclass
class RunResult:
    steps: List[StepLog]
    outputs: Dict[str, np.ndarray]       # global values after the last step
    memory: Dict[str, Any]               # {"planned": bytes, "measured": [per rank]}
    stdout: str                          # par-run's JSON log, one event a line
    command: List[str]

    @property
    def events(self) -> List[Dict[str, Any]]:
        """Every JSON event par-run logged (start, step, save, warning,
        end)."""
        return [_json_event(line) for line in self.stdout.splitlines()
                if line.startswith("{")]

    @property
    def text(self) -> str:
        """The run's log as par-run prints it without --json."""
        lines: List[str] = []
        later: List[str] = []
        for event in self.events:
            kind = event.get("event")
            if kind == "start":
                lines.append(f"par-run: {event['function']} on {event['ranks']} rank(s) "
                             f"(mesh {event['mesh']}), {event['backend']} backend, "
                             f"{event['instructions']} instructions, arena "
                             f"{_human(event['arena_bytes'])} per rank")
                lines.append(f"par-run: data: {event['data']}, seed {event['seed']}")
            elif kind == "step":
                lines.append(_step_of(event).text())
            elif kind == "save":
                lines.append(f"par-run: saved step {event['step']} to {event['dir']}")
            elif kind == "stages":
                # A pipeline: each stage's peak, printed after the end line.
                later += [f"par-run: rank class {n} (ranks {json.dumps(c['ranks'])}): measured "
                          f"peak {_human(c['peak_bytes'])} of {_human(c['planned_bytes'])} "
                          "planned" for n, c in enumerate(event["stages"])]
            elif kind == "bubble":
                b = event["bubble"]
                idle = ", ".join(f"{x:.3f}" for x in b["measured"])
                later.append(f"par-run: pipeline bubble ({b['schedule']}, {b['stages']} stages "
                             f"x {b['microbatches']} micro-batches): predicted "
                             f"{b['predicted']:.3f}; from the measured instruction times "
                             f"{b['replayed']:.3f}; wall-clock idle over busy per stage {idle}")
            elif kind == "end" and event["steps"] > 0:
                lines.append(f"par-run: {event['steps']} step(s) in {event['seconds']:.3f} s; "
                             f"measured peak {_human(event['peak_bytes'])} of "
                             f"{_human(event['planned_bytes'])} planned per rank")
        return "\n".join(lines + later)

    @property
    def losses(self) -> List[Optional[float]]:
        return [s.loss for s in self.steps]

    @property
    def loss(self) -> Optional[float]:
        """The last step's loss: the `loss` output when dumped (full
        precision), else the logged one."""
        if "loss" in self.outputs:
            return float(self.outputs["loss"])
        logged = [s.loss for s in self.steps if s.loss is not None]
        return logged[-1] if logged else None


def _number(value: Any) -> Optional[float]:
    """A number of the JSON log: non-finite ones are "nan", "inf", "-inf"."""
    return None if value is None else float(value)


def _json_event(line: str) -> Dict[str, Any]:
    return json.loads(line)


def _step_of(event: Dict[str, Any]) -> StepLog:
    return StepLog(int(event["step"]), _number(event.get("loss")),
                   _number(event.get("tokens_per_s")), float(event["seconds"]) * 1e3,
                   _human(event["peak_bytes"]), _human(event["planned_bytes"]),
                   {name: float(value) for name, value in event.get("log", {}).items()},
                   int(event["peak_bytes"]), int(event["planned_bytes"]))


def parse_steps(stdout: str) -> List[StepLog]:
    """The logged steps of a par-run run: its JSON lines (--json) or its
    text step lines."""
    steps = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            event = _json_event(line)
            if event.get("event") == "step":
                steps.append(_step_of(event))
            continue
        m = _STEP_LINE.match(line.strip())
        if not m:
            continue
        values: Dict[str, float] = {}
        tps = None
        for pair in _PAIR.finditer(m["rest"]):
            if pair["tps"]:
                tps = float(pair["tps"])
            else:
                values[pair["name"]] = float(pair["value"])
        loss = values.pop("loss", None)
        steps.append(StepLog(int(m["step"]), loss, tps, float(m["ms"]), m["peak"],
                             m["plan"], values))
    return steps


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1 << 20:
        return f"{n / 1024:.1f} KiB"
    if n < 1 << 30:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / (1 << 30):.2f} GiB"


def _shape_text(shape) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


class Executable:
    """A compiled program: the MLIR it came from, the program par-run runs,
    and how to run it."""

    def __init__(self, graph: Graph, mesh: Optional[Mesh], mlir: str, source: Path,
                 program_path: Path, workdir: Path, comm_report: str,
                 optimizer: Optional["Optimizer"] = None):
        self.graph = graph
        self.optimizer = optimizer
        self.mesh = mesh
        self.mlir = mlir
        self.source = source
        self.program_path = program_path
        self.workdir = workdir
        self.comm_report = comm_report
        #: With Pipeline(microbatches="auto"): (m, predicted step seconds)
        #: for each micro-batch count tried.
        self.microbatch_search: List[Tuple[int, float]] = []
        with open(program_path) as f:
            self.program: Dict[str, Any] = json.load(f)

    @property
    def num_ranks(self) -> int:
        return int(self.program["num_ranks"])

    @property
    def instructions(self) -> List[Dict[str, Any]]:
        return self.program["rank_classes"][0]["instructions"]

    @property
    def collectives(self) -> List[Dict[str, Any]]:
        """The first rank class's collective instructions (see
        collectives_of for a pipeline's other stages)."""
        return self.collectives_of(0)

    def collectives_of(self, rank_class: int) -> List[Dict[str, Any]]:
        """The collective instructions of one rank class (a pipeline
        stage)."""
        return [i for i in self.program["rank_classes"][rank_class]["instructions"]
                if i["op"] in _COLLECTIVES]

    def input_sharding(self, name: str) -> ShardingSpec:
        """The sharding the compiler chose for an input (after propagation)."""
        for inp in self.program["inputs"]:
            if inp["name"] == name:
                return spec_from_program(inp["sharding"])
        raise KeyError(name)

    def program_mesh(self) -> Mesh:
        axes = [(a["name"], a["size"]) for a in self.program["mesh"]["axes"]]
        return Mesh(axes, self.program["mesh"].get("name") or "mesh")

    def plan_summary(self) -> str:
        """Mesh, per-rank memory, every input/output with its global and
        per-device shape, and the collectives each rank runs."""
        p = self.program
        rc = p["rank_classes"][0]
        mesh = self.program_mesh()
        lines = [f"program @{p['function']}: {p['num_ranks']} rank(s), mesh {mesh.describe()}",
                 f"  {len(rc['instructions'])} instructions, {len(self.collectives)} collectives, "
                 f"arena {_human(rc['arena_bytes'])} per rank "
                 f"(peak live {_human(rc['peak_live_bytes'])})"]
        rows = []
        for kind, items in (("in", p["inputs"]), ("out", p["outputs"])):
            for item in items:
                spec = spec_from_program(item["sharding"])
                local = spec.local_shape(item["global_shape"], mesh)
                role = item.get("role", "output") if kind == "in" else "output"
                if kind == "in" and role == "data":
                    role = item.get("data", "data")
                rows.append((item["name"], role, f"{_shape_text(item['global_shape'])} {item['dtype']}",
                             spec.body(), _shape_text(local)))
        widths = [max(len(r[i]) for r in rows + [("name", "role", "global", "sharding", "local")])
                  for i in range(5)]
        header = ("name", "role", "global", "sharding", "local")
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if self.collectives:
            lines.append("  collectives per step:")
            for inst in self.collectives:
                attrs = inst.get("attrs", {})
                axes = p["groups"][attrs["group"]] if "group" in attrs else []
                kind = f" {attrs['kind']}" if "kind" in attrs else ""
                lines.append(f"    {inst['op']}{kind} over [{', '.join(axes)}]  at {inst.get('loc', '?')}")
        return "\n".join(lines)

    def run(self, np: Optional[int] = None, steps: int = 1, data: Optional[str] = None,
            seed: int = 0, *, log_every: int = 1, timeout: Optional[float] = None,
            dump_outputs: bool = True, save: Optional[str] = None,
            save_every: Optional[int] = None, keep: Optional[int] = None,
            load: Optional[str] = None, on_nonfinite: Optional[str] = None,
            extra_args: Sequence[str] = (),
            process_timeout: Optional[float] = 600) -> RunResult:
        """Runs the program with par-run on `np` ranks (default: the mesh's
        device count); returns the per-step logs and the global value of
        every output after the last step.

        `save`/`save_every`/`keep`/`load` checkpoint and resume
        (docs/par-run.md: saves are atomic, `load` takes the newest complete
        checkpoint); `on_nonfinite` is "stop" (a ParError with return code
        4), "skip" or "warn"."""
        args = ["-np", str(np if np is not None else self.num_ranks), "--steps", str(steps),
                "--seed", str(seed), "--log-every", str(log_every), "--json"]
        for flag, value in (("--save", save), ("--save-every", save_every),
                            ("--keep", keep), ("--load", load),
                            ("--on-nonfinite", on_nonfinite)):
            if value is not None:
                args += [flag, str(value)]
        if data is not None:
            args += ["--data", str(data)]
        if timeout is not None:
            args += ["--timeout", str(timeout)]
        dump = self.workdir / f"{self.graph.name}.outputs.json"
        if dump_outputs:
            if dump.exists():
                dump.unlink()
            args += ["--dump-outputs", str(dump)]
        args += list(extra_args)
        stdout = par_run(str(self.program_path), args, timeout=process_timeout)
        outputs: Dict[str, np.ndarray] = {}
        memory: Dict[str, Any] = {}
        if dump_outputs:
            with open(dump) as f:
                doc = json.load(f)
            memory = doc.get("memory", {})
            for name, out in doc["outputs"].items():
                values = _np.asarray(out["values"], dtype=_np.float64).reshape(out["shape"])
                outputs[name] = values
        return RunResult(parse_steps(stdout), outputs, memory, stdout,
                         ["par-run", str(self.program_path)] + args)

    def reference(self, steps: int = 1, seed: int = 0, data: Optional[str] = None
                  ) -> Dict[str, np.ndarray]:
        """The numpy reference of what run() computes."""
        return reference.run(self.graph, steps=steps, seed=seed, data=data)

    def check(self, steps: int = 1, seed: int = 0, data: Optional[str] = None,
              result: Optional[RunResult] = None) -> Dict[str, float]:
        """Relative error (max|run - reference| / max|reference|) of every
        output of a par-run run (`result`, or a fresh one) against the numpy
        reference of the same steps, seed and data. A training step has no
        numpy reference: it is compared with the same step compiled for one
        rank (every output, and `losses`: the largest relative difference of
        the losses logged at each step)."""
        if self.optimizer is not None:
            return self._check_against_one_rank(steps, seed, data, result)
        if result is None:
            result = self.run(steps=steps, seed=seed, data=data, log_every=0)
        want = self.reference(steps=steps, seed=seed, data=data)
        return {name: max_relative_error(result.outputs[name], value)
                for name, value in want.items()}

    def _check_against_one_rank(self, steps: int, seed: int, data: Optional[str],
                                result: Optional[RunResult]) -> Dict[str, float]:
        if result is None:
            result = self.run(steps=steps, seed=seed, data=data, log_every=1)
        mesh = self.mesh or self.graph.mesh
        # The same axes, each of size 1: the shardings still verify.
        single_mesh = Mesh([(axis, 1) for axis in mesh.axis_names], name=mesh.name) \
            if mesh is not None else None
        single = compile(self.graph, single_mesh, optimizer=self.optimizer,
                         workdir=self.workdir / "one-rank")
        want = single.run(steps=steps, seed=seed, data=data, log_every=1)
        # Outputs that replace a parameter or state are named after it.
        label = {o["name"]: o.get("updates", o["name"]) for o in self.program["outputs"]}
        errors = {label.get(name, name): max_relative_error(result.outputs[name], value)
                  for name, value in want.outputs.items()}
        logged = {s.step: s.loss for s in result.steps if s.loss is not None}
        pairs = [(logged[s.step], s.loss) for s in want.steps
                 if s.loss is not None and s.step in logged]
        if pairs:
            errors["losses"] = max(abs(a - b) / max(abs(b), 1e-30) for a, b in pairs)
        return errors

    def __repr__(self) -> str:
        return (f"Executable(@{self.graph.name}, {self.num_ranks} rank(s), "
                f"program={str(self.program_path)!r})")


_np = np


def _argument_notes(err: ParError, graph: Graph) -> None:
    """Errors par-opt reports on the function about `argument #N` get a
    note at the Python line that declared that input."""
    notes = []
    for d in err.diagnostics:
        if d.severity != "error":
            continue
        for match in re.finditer(r"argument #(\d+)", d.message):
            index = int(match.group(1))
            if index < len(graph.inputs):
                inp = graph.inputs[index]
                notes.append(Diagnostic(inp.loc.file, inp.loc.line, inp.loc.column, "note",
                                        f"argument #{index} is input {inp.name!r}, declared here"))
    err.diagnostics.extend(notes)


def compile(graph_or_model, mesh: MeshLike = None, *,  # noqa: A001
            shardings: Optional[Mapping[str, SpecLike]] = None,
            workdir: Union[str, os.PathLike, None] = None,
            partition: Optional[bool] = None,
            optimizer: Optional[Optimizer] = None,
            auto_shard: Union[bool, str] = False,
            remat: Optional[str] = None,
            pipeline: Union[bool, str, Pipeline, None] = None,
            pipeline_stages: Optional[Sequence[int]] = None,
            batch: Optional[int] = None,
            fuse: bool = False,
            extra_args: Sequence[str] = (), timeout: Optional[float] = 300) -> Executable:
    """Writes the graph's MLIR, runs par-opt (--par-propagate --par-partition
    --emit-program on a mesh of more than one device; the unsharded program
    otherwise) and returns an Executable.

    `graph_or_model`: a Graph, or an object with `to_graph()`.
    `mesh`: a Mesh, {"dp": 2, ...} or "dp=2,tp=2" (default: the graph's).
    `shardings`: input-name patterns -> shardings, overriding the graph's.
    `optimizer`: compile a training step (par.AdamW(...), par.SGD(...)):
    gradients of the loss and the update, optimizer states as new
    parameters; run() then trains.
    `auto_shard`: let par-opt --auto-shard choose the shardings around the
    graph's own (True, or its options: "hardware=cpu-local memory=8GiB");
    the plan and its alternatives are in the Executable's report.
    `remat`: rematerialization of a training step (--par-remat: "none",
    "selective", "full" or "auto:budget=SIZE"; the optimizer's own `remat`
    otherwise).
    `pipeline`: split a training step's layers into stages over the mesh's
    `pp` axis (--par-pipeline: True, a Pipeline(...), or the pass's
    options such as "microbatches=4 schedule=gpipe"). The graph's batch is
    one micro-batch: the step reads `microbatches` of them
    (Pipeline.micro_batch divides a batch; docs/pipelines.md).
    `pipeline_stages`: layers per stage, first stage first (with
    `pipeline`; default: balanced by FLOPs).
    `batch`: with `Pipeline(microbatches="auto")` and `auto_shard`, the rows
    of a step; `graph_or_model` is then a builder, rows -> Graph, called
    at batch/m rows for each micro-batch count m that divides the batch
    (more than one), and the plan --auto-shard predicts fastest is kept
    (`Executable.microbatch_search` lists each m's predicted step).
    `fuse`: run chains of element-wise ops as single kernels (--par-fuse;
    docs/training.md, "Fusion"): the same numbers, fewer passes over memory.
    """
    if isinstance(pipeline, Pipeline) and pipeline.microbatches == "auto":
        return _search_microbatches(
            graph_or_model, batch, mesh=mesh, shardings=shardings, workdir=workdir,
            partition=partition, optimizer=optimizer, auto_shard=auto_shard, remat=remat,
            pipeline=pipeline, pipeline_stages=pipeline_stages, fuse=fuse,
            extra_args=extra_args, timeout=timeout)
    graph = graph_or_model
    if not isinstance(graph, Graph):
        if hasattr(graph_or_model, "to_graph"):
            graph = graph_or_model.to_graph()
        else:
            raise TypeError(f"compile: expected a Graph or a model with to_graph(), got "
                            f"{type(graph_or_model).__name__}")
    mesh = as_mesh(mesh) or graph.mesh
    mlir = graph.to_mlir(mesh=mesh, shardings=shardings)
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"par-{graph.name}-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"{graph.name}.mlir"
    source.write_text(mlir)
    program = work / f"{graph.name}.parprog"
    if partition is None:
        # The one-device program path takes no sharding ops: a graph with
        # constraints is partitioned even for one device.
        live = graph._live_ops()
        pins = graph.value_pins(mesh, shardings)
        constrained = any((op.kind == "sharding_constraint" or id(op) in pins)
                          and id(op) in live for op in graph.ops)
        partition = (mesh is not None and mesh.size > 1) or constrained
    if remat is not None:
        if optimizer is None:
            raise ValueError("compile: remat= applies to a training step; give optimizer=")
        optimizer = dataclasses.replace(optimizer, remat=remat)
    args = optimizer.pass_options() if optimizer is not None else []
    if pipeline_stages is not None and not pipeline:
        raise ValueError("compile: pipeline_stages= needs pipeline=")
    pipelined = bool(pipeline)
    if pipeline:
        if optimizer is None:
            raise ValueError("compile: pipeline= applies to a training step; give optimizer=")
        if isinstance(pipeline, Pipeline):
            if pipeline_stages is not None:
                pipeline = dataclasses.replace(pipeline, stages=list(pipeline_stages))
            option = pipeline.pass_option()
        else:
            option = "--par-pipeline" if pipeline is True else f"--par-pipeline={pipeline}"
            if pipeline_stages is not None:
                counts = "layers=" + ",".join(str(int(n)) for n in pipeline_stages)
                option += (" " if "=" in option else "=") + counts
        args.append(option)
        partition = True
    if auto_shard:
        args.append("--auto-shard" if auto_shard is True else f"--auto-shard={auto_shard}")
        partition = True
    if partition:
        args += ["--par-propagate", "--par-partition", "--par-comm-report"]
    if fuse:
        args.append("--par-fuse")
    if auto_shard or pipelined:
        # The plan, its alternatives and the predicted step; each pipeline
        # stage's memory, transfers and predicted bubble: on stdout.
        args += ["--par-schedule", "--par-report"]
    args += [f"--emit-program={program}", "-o", os.devnull, *extra_args]
    try:
        report = par_opt(mlir, args, source_name=str(source), timeout=timeout)
    except ParError as err:
        _argument_notes(err, graph)
        raise
    return Executable(graph, mesh, mlir, source, program, work, report, optimizer)


def _search_microbatches(builder, batch, *, workdir, auto_shard, pipeline, **options):
    """compile() for each micro-batch count that divides `batch`; the one
    --auto-shard predicts fastest."""
    if not callable(builder) or isinstance(builder, Graph) or hasattr(builder, "to_graph"):
        raise ValueError("compile: Pipeline(microbatches='auto') needs a graph builder "
                         "(rows -> Graph) to build the model at each micro-batch size")
    if not isinstance(batch, int) or batch < 2:
        raise ValueError("compile: Pipeline(microbatches='auto') needs batch=, the rows of a "
                         "step (at least 2)")
    if not auto_shard:
        raise ValueError("compile: Pipeline(microbatches='auto') is chosen by --auto-shard's "
                         "predicted step; give auto_shard=")
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="par-microbatches-"))
    tried = []
    best = None
    failure = None
    for m in (d for d in range(2, batch + 1) if batch % d == 0):
        # A count that cannot be planned (nothing fits, interleaving with m
        # not a multiple of the stages) is not a candidate; the others are.
        try:
            # With divide_batch the compiler divides the whole batch itself.
            rows = batch if pipeline.divide_batch else batch // m
            exe = compile(builder(rows), workdir=work / f"m{m}", auto_shard=auto_shard,
                          pipeline=dataclasses.replace(pipeline, microbatches=m), **options)
        except ParError as err:
            failure = err
            continue
        found = re.search(r"^\s*predicted step ([0-9.eE+-]+) s", exe.comm_report, re.M)
        if not found:
            raise ParError(f"compile: no predicted step in --auto-shard's report for "
                           f"microbatches={m}")
        seconds = float(found.group(1))
        tried.append((m, seconds))
        if best is None or seconds < best[1]:
            best = (exe, seconds)
    if best is None:
        raise failure
    exe = best[0]
    exe.microbatch_search = tried
    return exe


def max_relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max|got - want| / max|want| (as test/Integration/equivalence.py)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return math.inf
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


__all__ = ["compile", "Pipeline", "Executable", "RunResult", "StepLog", "parse_steps", "as_mesh",
           "max_relative_error", "Optimizer", "AdamW", "SGD"]
