"""Building par programs from Python.

A `Graph` collects inputs (parameters and data), ops and outputs; every op
of the par dialect has a function here that checks its operands, infers the
result shape and records the Python line that called it. `Graph.to_mlir()`
prints the program as one `func.func` (plus the `par.mesh`), each op carrying
`loc("file.py":LINE:COL)` so compiler and runtime errors point back at the
Python source.

    g = Graph("mlp", mesh=Mesh({"dp": 2, "tp": 2}))
    x = g.data("x", [8, 16], sharding=P("dp", None))
    w = g.param("w", [16, 64], init="normal(0.02)", sharding=P(None, "tp"))
    y = gelu(x @ w)
    g.output(reduce(y * y, "mean", [0, 1]), "loss")
    print(g.to_mlir())
"""
from __future__ import annotations

import builtins
import dataclasses
import fnmatch
import json
import math
import os
import re
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .sharding import Mesh, ShardingSpec, SpecLike, to_spec

# The op catalogue generated from ParOps.td (scripts/gen-catalogue.py):
# operands, results, attribute kinds and defaults of every runtime op.
with open(os.path.join(os.path.dirname(__file__), "op_catalogue.json")) as _f:
    CATALOGUE = json.load(_f)


def _default(op: str, attr: str):
    """The ODS default of an attribute (the value the op holds)."""
    for spec in CATALOGUE["ops"][op]["attrs"]:
        if spec["name"] == attr:
            return spec["default"]
    raise KeyError(f"par.{op} has no attribute '{attr}'")

# This module defines slice/max/min ops; the Python builtins stay reachable.
_py_slice = builtins.slice
_py_max = builtins.max

FLOAT_DTYPES = ("f32", "bf16", "f16", "f64")
INT_DTYPES = ("i32", "i64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("i1",)
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES

_DTYPE_ALIASES = {
    "float32": "f32", "float": "f32", "bfloat16": "bf16", "float16": "f16", "half": "f16",
    "float64": "f64", "double": "f64", "int32": "i32", "int64": "i64", "bool": "i1",
}

INIT_KINDS = ("normal", "uniform", "constant", "zeros", "ones")
DATA_KINDS = ("tokens", "targets", "random")
REDUCE_KINDS = ("sum", "max", "min", "mean")
COMPARE_DIRECTIONS = ("eq", "ne", "lt", "le", "gt", "ge")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames in these files are machinery, not model code: locations skip them.
_INTERNAL_FILES = {os.path.join(_PACKAGE_DIR, f) for f in
                   ("graph.py", "sharding.py", "compile.py", "reference.py", "visualize.py",
                    "__init__.py")}


def dtype_of(value: Any) -> str:
    """Normalizes a dtype spelling (`"f32"`, `"float32"`, `np.float32`)."""
    if isinstance(value, str):
        name = _DTYPE_ALIASES.get(value, value)
    else:
        try:
            name = _DTYPE_ALIASES.get(np.dtype(value).name, None)
        except TypeError:
            name = None
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {value!r}; expected one of {', '.join(DTYPES)}")
    return name


def tensor_type(shape: Sequence[int], dtype: str) -> str:
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{dtype}>" if dims else f"tensor<{dtype}>"


# ----------------------------------------------------------------------------
# Source locations
# ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int

    def mlir(self) -> str:
        escaped = self.file.replace("\\", "\\\\").replace('"', '\\"')
        return f'loc("{escaped}":{self.line}:{self.column})'

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def _frame_column(frame) -> int:
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return 1
    try:
        for index, pos in enumerate(positions()):
            if index == frame.f_lasti // 2:
                return (pos[2] or 0) + 1
    except (TypeError, ValueError):
        pass
    return 1


def _display_path(path: str, style: str) -> str:
    if style == "absolute":
        return os.path.abspath(path)
    if style == "basename":
        return os.path.basename(path)
    full = os.path.abspath(path)
    cwd = os.getcwd()
    if full.startswith(cwd + os.sep):
        return os.path.relpath(full, cwd)
    return full


_TRANSPARENT_CODES: set = set()


def transparent(func):
    """Marks a helper whose callers, not itself, own the ops it creates
    (their locations skip its frame)."""
    _TRANSPARENT_CODES.add(func.__code__)
    return func


def caller_location(style: str = "relative") -> Location:
    """The innermost Python frame outside par's machinery."""
    frame = sys._getframe(1)
    while frame is not None and (
            frame.f_code in _TRANSPARENT_CODES
            or os.path.abspath(frame.f_code.co_filename) in _INTERNAL_FILES):
        frame = frame.f_back
    if frame is None:
        return Location("<python>", 0, 0)
    return Location(_display_path(frame.f_code.co_filename, style), frame.f_lineno,
                    _frame_column(frame))


# ----------------------------------------------------------------------------
# Tensors, ops, inputs, outputs
# ----------------------------------------------------------------------------

class Tensor:
    """A value of a Graph: a static shape and an element type."""

    __slots__ = ("graph", "shape", "dtype", "ssa", "op", "input", "origin", "__weakref__")
    __array_priority__ = 1000  # numpy scalars defer to Tensor's operators

    def __init__(self, graph: "Graph", shape: Sequence[int], dtype: str, ssa: str):
        self.graph = graph
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.ssa = ssa
        self.op: Optional[Op] = None
        self.input: Optional[Input] = None
        # The input this value carries unchanged (through constraints), for
        # inferring what feeds token ids.
        self.origin: Optional[Input] = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.dtype)

    @property
    def name(self) -> str:
        return self.ssa

    def __repr__(self) -> str:
        return f"Tensor(%{self.ssa}: {self.type})"

    def __hash__(self) -> int:
        return id(self)

    # Arithmetic: Python numbers become splat constants of the other
    # operand's type; shapes must match exactly (use broadcast()).
    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __sub__(self, other): return sub(self, other)
    def __rsub__(self, other): return sub(other, self)
    def __mul__(self, other): return mul(self, other)
    def __rmul__(self, other): return mul(other, self)
    def __truediv__(self, other): return div(self, other)
    def __rtruediv__(self, other): return div(other, self)
    def __neg__(self): return neg(self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __getitem__(self, index):
        return _getitem(self, index)

    def reshape(self, *shape, name=None):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        return reshape(self, shape, name=name)

    def transpose(self, *perm, name=None):
        if len(perm) == 1 and isinstance(perm[0], (list, tuple)):
            perm = perm[0]
        if not perm:
            perm = tuple(reversed(range(self.rank)))
        return transpose(self, perm, name=name)

    @property
    def T(self):
        return transpose(self, tuple(reversed(range(self.rank))))

    def astype(self, dtype, name=None):
        return convert(self, dtype, name=name)

    def sum(self, dims=None, name=None):
        return reduce(self, "sum", dims, name=name)

    def mean(self, dims=None, name=None):
        return reduce(self, "mean", dims, name=name)

    def max(self, dims=None, name=None):
        return reduce(self, "max", dims, name=name)

    def min(self, dims=None, name=None):
        return reduce(self, "min", dims, name=name)


@dataclasses.dataclass
class Op:
    """One par op: its kind (the mnemonic), operands, results, attributes
    (plain Python values; the reference executor reads them) and location."""
    kind: str
    operands: List[Tensor]
    results: List[Tensor]
    attrs: Dict[str, Any]
    loc: Location
    #: The model layer (block) the op was built in (`Graph.layer`), printed
    #: as `par.layer`: autodiff gives its gradient the same layer.
    layer: Optional[int] = None
    #: The pipeline stage its layer runs in (`Graph.layer(i, stage=s)`),
    #: printed as `par.stage` (docs/pipelines.md).
    stage: Optional[int] = None
    #: The name given to its single result, which `shardings` patterns
    #: match (docs/python-frontend.md: a matching value is pinned).
    name: Optional[str] = None

    @property
    def result(self) -> Tensor:
        return self.results[0]


@dataclasses.dataclass
class Input:
    """A function argument: a parameter (initialized once, persists) or data
    (refilled every step)."""
    index: int
    name: str
    tensor: Tensor
    role: str                      # "param" | "data"
    init: Optional[str]            # params: "normal(0.02)", "zeros", ...
    data: Optional[str]            # data: "tokens" | "targets" | "random"
    vocab: Optional[int]           # tokens/targets
    sharding: Optional[ShardingSpec]
    loc: Location
    data_inferred: bool = False    # data kind filled in from how it is used
    vocab_given: bool = False

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.tensor.shape

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    @property
    def feed(self) -> Optional[str]:
        """What fills a data input: tokens, targets or random."""
        if self.role != "data":
            return None
        return self.data or ("tokens" if self.dtype in INT_DTYPES else "random")

    @property
    def vocab_size(self) -> Optional[int]:
        if self.role != "data" or self.dtype not in INT_DTYPES:
            return None
        return self.vocab or 256


@dataclasses.dataclass
class Output:
    index: int
    name: str
    tensor: Tensor
    updates: Optional[int]
    sharding: Optional[ShardingSpec]
    loc: Location


_SSA_OK = re.compile(r"[A-Za-z_$.\-][A-Za-z0-9_$.\-]*")
_current: List["Graph"] = []


def current_graph() -> Optional["Graph"]:
    return _current[-1] if _current else None


def parse_init(spec: str) -> Tuple[str, Tuple[float, ...]]:
    """`"normal(0.02)"` -> ("normal", (0.02,)); raises ValueError."""
    text = spec.replace(" ", "")
    match = re.fullmatch(r"(normal|uniform|constant)\(([^()]*)\)|(zeros|ones)", text)
    if not match:
        raise ValueError(f"init {spec!r}: expected \"normal(STD)\", \"uniform(LOW, HIGH)\", "
                         "\"constant(VALUE)\", \"zeros\" or \"ones\"")
    if match.group(3):
        return match.group(3), ()
    kind = match.group(1)
    try:
        numbers = tuple(float(v) for v in match.group(2).split(","))
    except ValueError:
        raise ValueError(f"init {spec!r}: the arguments must be numbers") from None
    expected = 2 if kind == "uniform" else 1
    if len(numbers) != expected:
        raise ValueError(f"init {spec!r}: {kind} takes {expected} number(s)")
    return kind, numbers


class _LayerScope:
    """Marks the ops a graph builds inside it with a layer (nested: inner
    wins)."""

    def __init__(self, graph: "Graph", index: int, stage: Optional[int] = None):
        self.graph, self.index, self.stage, self.outer = graph, index, stage, None

    def __enter__(self) -> "_LayerScope":
        self.outer = (self.graph._layer, self.graph._stage)
        self.graph._layer, self.graph._stage = self.index, self.stage
        return self

    def __exit__(self, *exc) -> None:
        self.graph._layer, self.graph._stage = self.outer


class Graph:
    """A par program under construction: one function of a module.

    `mesh` (optional) is declared in the module and resolves DTensor
    placements; `shardings` maps input-name patterns (fnmatch, e.g.
    `"*.attn.wq"`) to shardings for inputs declared without one;
    `locations` is how file names are written in `loc(...)`: "relative" (to
    the working directory when below it), "absolute", "basename" or "none".
    """

    def __init__(self, name: str = "main", mesh: Optional[Mesh] = None,
                 shardings: Optional[Mapping[str, SpecLike]] = None,
                 locations: str = "relative"):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
            raise ValueError(f"Graph: function name {name!r} is not a valid symbol")
        if locations not in ("relative", "absolute", "basename", "none"):
            raise ValueError(f"Graph: locations must be relative, absolute, basename or none, "
                             f"got {locations!r}")
        self.name = name
        self.mesh = mesh
        self.rules: Dict[str, SpecLike] = dict(shardings or {})
        self.locations = locations
        self.inputs: List[Input] = []
        self.outputs: List[Output] = []
        self.ops: List[Op] = []
        self._names: set = set()
        self._counter = 0
        self._layer: Optional[int] = None
        self._stage: Optional[int] = None
        self.loc = self.location()

    # -- context -------------------------------------------------------------
    def __enter__(self) -> "Graph":
        _current.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _current.remove(self)

    def layer(self, index: int, stage: Optional[int] = None) -> "_LayerScope":
        """`with graph.layer(i):` marks the ops built inside as layer i;
        `stage=s` also places the layer in pipeline stage s (--par-pipeline
        takes the stages from these marks when every layer has one)."""
        for name, value in (("index", index), ("stage", stage)):
            if value is None and name == "stage":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"layer: the {name} must be a non-negative integer, "
                                 f"got {value!r}")
        return _LayerScope(self, index, stage)

    def location(self) -> Location:
        if self.locations == "none":
            return Location("<python>", 0, 0)
        return caller_location(self.locations)

    def _fresh(self, hint: Optional[str]) -> str:
        if hint:
            base = re.sub(r"[^A-Za-z0-9_$.\-]", "_", str(hint))
            if not _SSA_OK.fullmatch(base):
                base = "v" + base
        else:
            base = str(self._counter)
            self._counter += 1
        name, n = base, 1
        while name in self._names:
            name = f"{base}_{n}"
            n += 1
        self._names.add(name)
        return name

    def _new_tensor(self, shape, dtype, hint=None) -> Tensor:
        return Tensor(self, shape, dtype, self._fresh(hint))

    def _add_op(self, kind: str, operands: Sequence[Tensor], result_types, attrs,
                names=None) -> Op:
        if isinstance(names, str) or names is None:
            names = [names] * len(result_types)
        results = [self._new_tensor(shape, dtype, name)
                   for (shape, dtype), name in zip(result_types, names)]
        op = Op(kind, list(operands), results, dict(attrs), self.location(),
                self._layer, self._stage if self._layer is not None else None)
        for r in results:
            r.op = op
        if len(results) == 1 and isinstance(names[0], str) and names[0]:
            op.name = names[0]
        self.ops.append(op)
        return op

    # -- inputs ----------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: Any = "f32", *,
              role: Optional[str] = None, init: Optional[str] = None,
              data: Optional[str] = None, vocab: Optional[int] = None,
              sharding: SpecLike = None) -> Tensor:
        """Declares a function argument. Floats default to parameters,
        integers to data (as par-run infers)."""
        dtype = dtype_of(dtype)
        shape = _check_shape("input", shape)
        if not isinstance(name, str) or not name:
            raise ValueError("input: the name must be a non-empty string")
        if any(i.name == name for i in self.inputs):
            raise ValueError(f"input: an input named {name!r} already exists")
        if role is None:
            role = "param" if dtype in FLOAT_DTYPES and data is None else "data"
        if role not in ("param", "data"):
            raise ValueError(f"input {name!r}: role must be 'param' or 'data', got {role!r}")
        if role == "param":
            if dtype not in FLOAT_DTYPES:
                raise ValueError(f"input {name!r}: parameters are floating point, got {dtype}")
            if data is not None or vocab is not None:
                raise ValueError(f"input {name!r}: data/vocab are for data inputs, not parameters")
            init = "normal(0.02)" if init is None else init
            parse_init(init)
        else:
            if init is not None:
                raise ValueError(f"input {name!r}: init is for parameters, not data")
            if data is not None and data not in DATA_KINDS:
                raise ValueError(f"input {name!r}: data must be one of {', '.join(DATA_KINDS)}, "
                                 f"got {data!r}")
            is_int = dtype in INT_DTYPES
            if dtype == "i1":
                raise ValueError(f"input {name!r}: i1 inputs cannot be fed")
            if data is not None and (data == "random") == is_int:
                raise ValueError(f"input {name!r} of type {tensor_type(shape, dtype)} cannot be "
                                 f"fed as {data!r} data (tokens and targets are integers, random "
                                 "data is floating point)")
            if data is None and not is_int:
                data = "random"
            if vocab is not None and (not isinstance(vocab, int) or vocab <= 0):
                raise ValueError(f"input {name!r}: vocab must be a positive integer, got {vocab!r}")
            if vocab is not None and not is_int:
                raise ValueError(f"input {name!r}: vocab is for integer token inputs")
        tensor = self._new_tensor(shape, dtype, name)
        if sharding is None:
            sharding = self._rule_for(name)
        spec = to_spec(sharding, len(shape), self.mesh, what=f"sharding of input {name!r}")
        inp = Input(len(self.inputs), name, tensor, role, init, data, vocab, spec,
                    self.location(), vocab_given=vocab is not None)
        tensor.input = inp
        tensor.origin = inp
        self.inputs.append(inp)
        return tensor

    def param(self, name: str, shape: Sequence[int], dtype: Any = "f32", *,
              init: str = "normal(0.02)", sharding: SpecLike = None) -> Tensor:
        return self.input(name, shape, dtype, role="param", init=init, sharding=sharding)

    def data(self, name: str, shape: Sequence[int], dtype: Any = "f32", *,
             kind: Optional[str] = None, vocab: Optional[int] = None,
             sharding: SpecLike = None) -> Tensor:
        return self.input(name, shape, dtype, role="data", data=kind, vocab=vocab,
                          sharding=sharding)

    def tokens(self, name: str, shape: Sequence[int], vocab: int, dtype: Any = "i32", *,
               sharding: SpecLike = None) -> Tensor:
        return self.data(name, shape, dtype, kind="tokens", vocab=vocab, sharding=sharding)

    def targets(self, name: str, shape: Sequence[int], vocab: int, dtype: Any = "i32", *,
                sharding: SpecLike = None) -> Tensor:
        return self.data(name, shape, dtype, kind="targets", vocab=vocab, sharding=sharding)

    def output(self, tensor: Tensor, name: Optional[str] = None, *,
               updates: Union[int, str, Tensor, None] = None,
               sharding: SpecLike = None) -> Tensor:
        """Returns `tensor` from the function; `updates` names the parameter
        (index, name or its tensor) it replaces after every step."""
        _check_tensor("output", "value", tensor)
        if tensor.graph is not self:
            raise ValueError("output: the value belongs to another graph")
        name = name or f"result{len(self.outputs)}"
        if any(o.name == name for o in self.outputs):
            raise ValueError(f"output: an output named {name!r} already exists")
        index = None
        if updates is not None:
            index = self._input_index(updates, "output")
            target = self.inputs[index]
            if target.role != "param":
                raise ValueError(f"output {name!r}: updates input {target.name!r}, which is not a parameter")
            if target.shape != tensor.shape or target.dtype != tensor.dtype:
                raise ValueError(f"output {name!r} of type {tensor.type} cannot update parameter "
                                 f"{target.name!r} of type {target.tensor.type}")
        spec = to_spec(sharding, tensor.rank, self.mesh, what=f"sharding of output {name!r}")
        self.outputs.append(Output(len(self.outputs), name, tensor, index, spec, self.location()))
        return tensor

    def _input_index(self, ref, what) -> int:
        if isinstance(ref, Tensor):
            if ref.input is None or ref.graph is not self:
                raise ValueError(f"{what}: {ref!r} is not an input of this graph")
            return ref.input.index
        if isinstance(ref, str):
            for inp in self.inputs:
                if inp.name == ref:
                    return inp.index
            raise ValueError(f"{what}: no input named {ref!r}")
        if isinstance(ref, int) and 0 <= ref < len(self.inputs):
            return ref
        raise ValueError(f"{what}: {ref!r} is not an input index")

    def _rule_for(self, name: str) -> SpecLike:
        for pattern, spec in self.rules.items():
            if fnmatch.fnmatchcase(name, pattern):
                return spec
        return None

    # -- queries -------------------------------------------------------------
    @property
    def params(self) -> List[Input]:
        return [i for i in self.inputs if i.role == "param"]

    def num_params(self) -> int:
        return sum(math.prod(i.shape) for i in self.params)

    def input_named(self, name: str) -> Input:
        return self.inputs[self._input_index(name, "input_named")]

    def output_named(self, name: str) -> Output:
        for out in self.outputs:
            if out.name == name:
                return out
        raise KeyError(name)

    # -- printing ----------------------------------------------------------------
    def value_pins(self, mesh: Optional[Mesh] = None,
                   shardings: Optional[Mapping[str, SpecLike]] = None) -> Dict[int, Tuple]:
        """The values pinned by a sharding pattern (`shardings` first, then the
        graph's): {id(op): (spec, name of the value before the pin)} for each
        op whose result's given name a pattern matches. The op prints that
        value and a `par.sharding_constraint` defines the result's own name
        (Megatron's sequence parallelism pins the residual stream this way).
        A pattern that matches an input is the inputs' alone: only patterns
        that match no input pin values, so a broad weight pattern never pins
        activations by accident."""
        mesh = mesh or self.mesh
        inputs = [inp.name for inp in self.inputs]
        rules = [(pattern, rule)
                 for pattern, rule in list((shardings or {}).items()) + list(self.rules.items())
                 if not any(fnmatch.fnmatchcase(name, pattern) for name in inputs)]
        pins = {}
        for op in self.ops:
            if op.name is None or op.kind in ("sharding_constraint", "constant"):
                continue
            for pattern, rule in rules:
                if fnmatch.fnmatchcase(op.name, pattern):
                    result = op.result
                    spec = to_spec(rule, result.rank, mesh,
                                   what=f"sharding of value {op.name!r}")
                    if spec is not None:
                        unpinned, n = f"{result.ssa}.unpinned", 1
                        while unpinned in self._names:
                            unpinned, n = f"{result.ssa}.unpinned{n}", n + 1
                        pins[id(op)] = (spec, unpinned)
                    break
        return pins

    def resolved_shardings(self, mesh: Optional[Mesh] = None,
                           shardings: Optional[Mapping[str, SpecLike]] = None
                           ) -> List[Optional[ShardingSpec]]:
        """The sharding of every input: `shardings` (name patterns) first,
        then the one given at declaration."""
        mesh = mesh or self.mesh
        result = []
        for inp in self.inputs:
            spec = inp.sharding
            for pattern, override in (shardings or {}).items():
                if fnmatch.fnmatchcase(inp.name, pattern):
                    spec = to_spec(override, len(inp.shape), mesh,
                                   what=f"sharding of input {inp.name!r}")
                    break
            result.append(spec)
        return result

    def to_mlir(self, mesh: Optional[Mesh] = None,
                shardings: Optional[Mapping[str, SpecLike]] = None,
                header: Optional[str] = None) -> str:
        """The module text: the mesh (this graph's, or `mesh`) and the
        function. `shardings` overrides input shardings by name pattern."""
        if not self.outputs:
            raise ValueError(f"graph {self.name!r} has no outputs; declare them with Graph.output")
        mesh = mesh or self.mesh
        specs = self.resolved_shardings(mesh, shardings)
        live = self._live_ops()
        pins = self.value_pins(mesh, shardings)
        if mesh is None:
            # Annotations without a mesh: declare their axes with size 1 (a
            # one-device program that still verifies).
            used: List[str] = []
            annotations = specs + [o.sharding for o in self.outputs] + [
                op.attrs["sharding"] for op in self.ops
                if op.kind == "sharding_constraint" and id(op) in live] + [
                pins[id(op)][0] for op in self.ops if id(op) in pins and id(op) in live]
            for spec in annotations:
                if spec is not None:
                    for axis in spec.axes() + spec.partial + spec.replicated:
                        if axis not in used:
                            used.append(axis)
            if used:
                mesh = Mesh([(axis, 1) for axis in used])
        mesh_name = mesh.name if mesh else "mesh"
        loc = (lambda l: "") if self.locations == "none" else (lambda l: " " + l.mlir())
        lines = []
        if header:
            lines += ["// " + h if h else "//" for h in header.splitlines()]
        if mesh is not None:
            lines.append(mesh.to_mlir())
        args = []
        for inp, spec in zip(self.inputs, specs):
            attrs = [f'par.name = "{_escape(inp.name)}"']
            default_role = "param" if inp.dtype in FLOAT_DTYPES else "data"
            if inp.role != default_role:
                attrs.append(f'par.role = "{inp.role}"')
            if inp.role == "param":
                attrs.append(f'par.init = "{inp.init}"')
            else:
                attrs.append(f'par.data = "{inp.feed}"')
                if inp.dtype in INT_DTYPES:
                    attrs.append(f"par.vocab = {inp.vocab_size}")
            if spec is not None:
                attrs.append(f"par.sharding = {spec.attr(mesh_name)}")
            args.append(f"%{inp.tensor.ssa}: {inp.tensor.type} {{{', '.join(attrs)}}}"
                        + loc(inp.loc))
        results = []
        for out in self.outputs:
            attrs = [f'par.name = "{_escape(out.name)}"']
            if out.updates is not None:
                attrs.append(f"par.updates = {out.updates}")
            if out.sharding is not None:
                attrs.append(f"par.sharding = {out.sharding.attr(mesh_name)}")
            results.append(f"{out.tensor.type} {{{', '.join(attrs)}}}")
        indent = " " * (len(f"func.func @{self.name}("))
        lines.append(f"func.func @{self.name}(" + (",\n" + indent).join(args) + ")")
        lines.append("    -> (" + ", ".join(results) + ") {")
        for op in self.ops:
            if id(op) in live:
                pin = pins.get(id(op))
                lines.append("  " + _format_op(op, mesh_name, pin and pin[1]) + loc(op.loc))
                if pin:
                    spec, unpinned = pin
                    result = op.results[0]
                    lines.append(f"  %{result.ssa} = par.sharding_constraint %{unpinned} "
                                 f"<@{mesh_name}, {spec.body()}>{_marks_text(op)} : "
                                 f"{result.type}"
                                 + loc(op.loc))
        values = ", ".join("%" + o.tensor.ssa for o in self.outputs)
        types = ", ".join(o.tensor.type for o in self.outputs)
        ret_loc = self.outputs[-1].loc
        lines.append(f"  return {values} : {types}" + loc(ret_loc))
        lines.append("}" + loc(self.loc))
        return "\n".join(lines) + "\n"

    def _live_ops(self) -> set:
        """Ops some output depends on (others are not printed)."""
        live, stack = set(), [o.tensor for o in self.outputs]
        while stack:
            t = stack.pop()
            if t.op is None or id(t.op) in live:
                continue
            live.add(id(t.op))
            stack.extend(t.op.operands)
        return live

    def __str__(self) -> str:
        return self.to_mlir()

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}: {len(self.inputs)} inputs, {len(self.ops)} ops, "
                f"{len(self.outputs)} outputs)")


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ----------------------------------------------------------------------------
# Printing ops
# ----------------------------------------------------------------------------

def format_float(value: float, dtype: str = "f32") -> str:
    """An MLIR float literal (always with a '.', hex for inf/nan)."""
    value = float(value)
    if math.isfinite(value):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exp = text.split("e")
            text = f"{mantissa}.0e{exp}"
        elif "." not in text and "e" not in text:
            text += ".0"
        return text
    bits = {
        "f32": {"inf": 0x7F800000, "-inf": 0xFF800000, "nan": 0x7FC00000},
        "f64": {"inf": 0x7FF0000000000000, "-inf": 0xFFF0000000000000, "nan": 0x7FF8000000000000},
        "f16": {"inf": 0x7C00, "-inf": 0xFC00, "nan": 0x7E00},
        "bf16": {"inf": 0x7F80, "-inf": 0xFF80, "nan": 0x7FC0},
    }[dtype]
    key = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return hex(bits[key]).upper().replace("0X", "0x")


def _f32_attr(value: float) -> str:
    # The shortest decimal that reads back as the same f32.
    return f"{format_float(float(str(np.float32(value))))} : f32"


def _dense(value: np.ndarray, dtype: str) -> str:
    def element(v):
        if dtype == "i1":
            return "true" if bool(v) else "false"
        if dtype in INT_DTYPES:
            return str(int(v))
        return format_float(float(v), dtype)

    flat = value.reshape(-1)
    if flat.size > 0 and np.all(flat == flat[0]) and not (
            dtype in FLOAT_DTYPES and np.isnan(flat[0])):
        return f"dense<{element(flat[0])}>"
    if flat.size > 0 and dtype in FLOAT_DTYPES and np.all(np.isnan(flat)):
        return f"dense<{element(flat[0])}>"

    def nested(a):
        if a.ndim == 0:
            return element(a)
        return "[" + ", ".join(nested(x) for x in a) + "]"
    return f"dense<{nested(value)}>"


def _attr_text(spec: dict, value: Any, result: "Tensor") -> str:
    """One attribute in MLIR syntax, as the catalogue types it."""
    kind, mlir_type = spec["kind"], spec.get("type")
    if kind == "ints":
        return "array<i64" + (": " + ", ".join(str(int(v)) for v in value) if len(value) else "") + ">"
    if kind == "int":
        return f"{int(value)} : {mlir_type}"
    if kind == "float":
        if mlir_type == "f32":
            return _f32_attr(value)
        return f"{format_float(value, mlir_type)} : {mlir_type}"
    if kind == "bool":
        return "unit" if mlir_type == "unit" else ("true" if value else "false")
    if kind == "enum":
        return f"{CATALOGUE['enums'][spec['enum']].index(value)} : {mlir_type}"
    if kind == "elements":
        return f"{_dense(value, result.dtype)} : {result.type}"
    raise AssertionError(f"the frontend does not build '{kind}' attributes")


def _is_default(spec: dict, value: Any) -> bool:
    default = spec["default"]
    if value is None or (spec["optional"] and spec["kind"] == "ints" and not len(value)):
        return True
    if default is None or spec["kind"] not in ("int", "float", "bool"):
        return False
    if spec.get("type") == "f32":  # the value the op holds
        return bool(np.float32(value) == np.float32(default))
    return float(value) == default


def _format_op(op: Op, mesh_name: str, result_name: Optional[str] = None) -> str:
    """An op in MLIR's generic form, from the op catalogue generated from
    ParOps.td: no op's syntax or defaults are restated here. `result_name`
    renames a single result (a pinned value's unpinned copy)."""
    res = ("%" + result_name if result_name
           else ", ".join("%" + r.ssa for r in op.results))
    ops = ", ".join("%" + t.ssa for t in op.operands)
    if op.kind == "sharding_constraint":  # structural: not a runtime op
        return (f"{res} = par.sharding_constraint {ops} <@{mesh_name}, "
                f"{op.attrs['sharding'].body()}> : {op.results[0].type}")
    schema = CATALOGUE["ops"][op.kind]
    props = [f"{spec['name']} = {_attr_text(spec, op.attrs[spec['name']], op.results[0])}"
             if spec.get("type") != "unit" else spec["name"]
             for spec in schema["attrs"]
             if not _is_default(spec, op.attrs.get(spec["name"]))]
    props_text = f" <{{{', '.join(props)}}}>" if props else ""
    results = ", ".join(r.type for r in op.results)
    if len(op.results) > 1:
        results = f"({results})"
    operand_types = ", ".join(t.type for t in op.operands)
    return (f'{res} = "par.{op.kind}"({ops}){props_text}{_marks_text(op)} : '
            f'({operand_types}) -> {results}')


def _marks_text(op: Op) -> str:
    """The op's layer and stage marks as an attribute dictionary (with its
    leading space), or nothing."""
    marks = []
    if op.layer is not None:
        marks.append(f"par.layer = {op.layer} : i64")
    if op.stage is not None:
        marks.append(f"par.stage = {op.stage} : i64")
    return f" {{{', '.join(marks)}}}" if marks else ""


# ----------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------



def _fail(op: str, message: str):
    raise ValueError(f"{op}: {message}")


def _check_shape(op: str, shape) -> Tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        _fail(op, f"shape must be a sequence of sizes, got {shape!r}")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            _fail(op, f"shape {list(dims)} must hold non-negative integers")
    return tuple(int(d) for d in dims)


def _check_tensor(op: str, what: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        _fail(op, f"{what} must be a Tensor, got {type(value).__name__}")
    return value


def _same_graph(op: str, *tensors: Tensor) -> "Graph":
    graph = tensors[0].graph
    for t in tensors[1:]:
        if t.graph is not graph:
            _fail(op, "operands belong to different graphs")
    return graph


def _check_dtypes(op: str, what: str, t: Tensor, allowed: Sequence[str]) -> None:
    if t.dtype not in allowed:
        _fail(op, f"{what} must have element type {'/'.join(allowed)}, got {t.type}")


def _dims(op: str, what: str, dims, rank: int) -> List[int]:
    if isinstance(dims, (int, np.integer)):
        dims = [dims]
    out = []
    for d in dims:
        d = int(d)
        if d < -rank or d >= rank:
            _fail(op, f"{what} {list(dims)}: dimension {d} is outside rank {rank}")
        d = d + rank if d < 0 else d
        if d in out:
            _fail(op, f"{what} {list(dims)} lists dimension {d} twice")
        out.append(d)
    return out


def _scalar_operand(op: str, value, like: Tensor) -> Tensor:
    """A Python number as a splat constant of `like`'s type."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, np.number)):
        return constant(value, like.shape, like.dtype, graph=like.graph)
    _fail(op, f"operands must be Tensors or Python numbers, got {type(value).__name__}")


def _binary(kind: str, lhs, rhs, name=None) -> Tensor:
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        _fail(kind, "needs at least one Tensor operand")
    lhs = _scalar_operand(kind, lhs, rhs) if not isinstance(lhs, Tensor) else lhs
    rhs = _scalar_operand(kind, rhs, lhs)
    graph = _same_graph(kind, lhs, rhs)
    if lhs.shape != rhs.shape or lhs.dtype != rhs.dtype:
        _fail(kind, f"operands must have the same type, got {lhs.type} and {rhs.type}"
              + ("; broadcast() one of them first" if lhs.dtype == rhs.dtype else ""))
    _check_dtypes(kind, "operands", lhs, NUMERIC_DTYPES)
    return graph._add_op(kind, [lhs, rhs], [(lhs.shape, lhs.dtype)], {}, name).result


def _unary(kind: str, x, name=None) -> Tensor:
    x = _check_tensor(kind, "operand", x)
    allowed = NUMERIC_DTYPES if kind in ("neg", "relu") else FLOAT_DTYPES
    _check_dtypes(kind, "operand", x, allowed)
    return x.graph._add_op(kind, [x], [(x.shape, x.dtype)], {}, name).result


# ----------------------------------------------------------------------------
# Elementwise ops
# ----------------------------------------------------------------------------

def add(lhs, rhs, *, name=None) -> Tensor:
    """Elementwise lhs + rhs (same type; a Python number becomes a splat)."""
    return _binary("add", lhs, rhs, name)


def sub(lhs, rhs, *, name=None) -> Tensor:
    return _binary("sub", lhs, rhs, name)


def mul(lhs, rhs, *, name=None) -> Tensor:
    return _binary("mul", lhs, rhs, name)


def div(lhs, rhs, *, name=None) -> Tensor:
    return _binary("div", lhs, rhs, name)


def maximum(lhs, rhs, *, name=None) -> Tensor:
    """Elementwise max (par.max)."""
    return _binary("max", lhs, rhs, name)


def minimum(lhs, rhs, *, name=None) -> Tensor:
    """Elementwise min (par.min)."""
    return _binary("min", lhs, rhs, name)


# The dialect's spellings.
max = maximum  # noqa: A001
min = minimum  # noqa: A001


def neg(x, *, name=None) -> Tensor:
    return _unary("neg", x, name)


def exp(x, *, name=None) -> Tensor:
    return _unary("exp", x, name)


def log(x, *, name=None) -> Tensor:
    return _unary("log", x, name)


def tanh(x, *, name=None) -> Tensor:
    return _unary("tanh", x, name)


def sqrt(x, *, name=None) -> Tensor:
    return _unary("sqrt", x, name)


def rsqrt(x, *, name=None) -> Tensor:
    return _unary("rsqrt", x, name)


def gelu(x, *, name=None) -> Tensor:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return _unary("gelu", x, name)


def silu(x, *, name=None) -> Tensor:
    return _unary("silu", x, name)


def relu(x, *, name=None) -> Tensor:
    return _unary("relu", x, name)


def sigmoid(x, *, name=None) -> Tensor:
    return _unary("sigmoid", x, name)


def compare(direction: str, lhs, rhs, *, name=None) -> Tensor:
    """Elementwise comparison (eq ne lt le gt ge) giving an i1 mask."""
    if direction not in COMPARE_DIRECTIONS:
        _fail("compare", f"direction must be one of {', '.join(COMPARE_DIRECTIONS)}, got {direction!r}")
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        _fail("compare", "needs at least one Tensor operand")
    lhs = _scalar_operand("compare", lhs, rhs) if not isinstance(lhs, Tensor) else lhs
    rhs = _scalar_operand("compare", rhs, lhs)
    graph = _same_graph("compare", lhs, rhs)
    if lhs.shape != rhs.shape or lhs.dtype != rhs.dtype:
        _fail("compare", f"operands must have the same type, got {lhs.type} and {rhs.type}")
    _check_dtypes("compare", "operands", lhs, NUMERIC_DTYPES)
    return graph._add_op("compare", [lhs, rhs], [(lhs.shape, "i1")],
                         {"direction": direction}, name).result


def select(pred, on_true, on_false, *, name=None) -> Tensor:
    """pred ? on_true : on_false, elementwise."""
    pred = _check_tensor("select", "pred", pred)
    if pred.dtype != "i1":
        _fail("select", f"pred must be an i1 tensor, got {pred.type}")
    if not isinstance(on_true, Tensor) and not isinstance(on_false, Tensor):
        _fail("select", "on_true or on_false must be a Tensor")
    on_true = _scalar_operand("select", on_true, on_false) if not isinstance(on_true, Tensor) else on_true
    on_false = _scalar_operand("select", on_false, on_true)
    graph = _same_graph("select", pred, on_true, on_false)
    if on_true.shape != on_false.shape or on_true.dtype != on_false.dtype:
        _fail("select", f"on_true {on_true.type} and on_false {on_false.type} must have the same type")
    if pred.shape != on_true.shape:
        _fail("select", f"pred {pred.type} must have the shape of {on_true.type}")
    return graph._add_op("select", [pred, on_true, on_false],
                         [(on_true.shape, on_true.dtype)], {}, name).result


def convert(x, dtype, *, name=None) -> Tensor:
    """Element-type conversion (round to nearest even; float to int
    truncates toward zero)."""
    x = _check_tensor("convert", "operand", x)
    dtype = dtype_of(dtype)
    return x.graph._add_op("convert", [x], [(x.shape, dtype)], {}, name).result


def constant(value, shape: Optional[Sequence[int]] = None, dtype: Any = None, *,
             graph: Optional[Graph] = None, name=None) -> Tensor:
    """A tensor constant: a number (splat over `shape`) or an array."""
    graph = graph or current_graph()
    if graph is None:
        _fail("constant", "needs a graph: pass graph=... or build inside `with Graph(...):`")
    array = np.asarray(value)
    if dtype is None:
        if array.dtype == np.bool_:
            dtype = "i1"
        elif np.issubdtype(array.dtype, np.integer):
            dtype = "i32"
        elif np.issubdtype(array.dtype, np.floating):
            dtype = "f32"
        else:
            _fail("constant", f"cannot make a constant of {array.dtype}")
    dtype = dtype_of(dtype)
    if shape is None:
        shape = array.shape
    shape = _check_shape("constant", shape)
    if array.shape != shape:
        if array.ndim != 0:
            _fail("constant", f"value of shape {list(array.shape)} does not match shape {list(shape)}")
        array = np.broadcast_to(array, shape)
    if dtype in INT_DTYPES:
        info = np.iinfo(np.int32 if dtype == "i32" else np.int64)
        if array.size and (np.any(array != np.round(array)) or array.min() < info.min
                           or array.max() > info.max):
            _fail("constant", f"values do not fit {dtype}")
    store = {"i1": np.bool_, "i32": np.int32, "i64": np.int64}.get(dtype, np.float64)
    array = np.array(array, dtype=store)
    return graph._add_op("constant", [], [(shape, dtype)], {"value": array}, name).result


def full(shape, value, dtype="f32", *, graph=None, name=None) -> Tensor:
    return constant(value, shape, dtype, graph=graph, name=name)


def zeros(shape, dtype="f32", *, graph=None, name=None) -> Tensor:
    return constant(0, shape, dtype, graph=graph, name=name)


def ones(shape, dtype="f32", *, graph=None, name=None) -> Tensor:
    return constant(1, shape, dtype, graph=graph, name=name)


# ----------------------------------------------------------------------------
# Structural ops
# ----------------------------------------------------------------------------

def broadcast(x, shape: Sequence[int], dims: Optional[Sequence[int]] = None, *,
              name=None) -> Tensor:
    """broadcast_in_dim: operand dim i becomes result dim dims[i]. Without
    `dims` the operand's dims align with the result's trailing dims (numpy)."""
    x = _check_tensor("broadcast", "operand", x)
    shape = _check_shape("broadcast", shape)
    if dims is None:
        if x.rank > len(shape):
            _fail("broadcast", f"cannot broadcast {x.type} to the lower rank {list(shape)}")
        dims = list(range(len(shape) - x.rank, len(shape)))
    dims = [int(d) for d in dims]
    if len(dims) != x.rank:
        _fail("broadcast", f"dims {dims} has {len(dims)} entries but the operand {x.type} "
                           f"has rank {x.rank}")
    for i, d in enumerate(dims):
        if d < 0 or d >= len(shape):
            _fail("broadcast", f"dims {dims} maps operand dim {i} to {d}, outside the result "
                               f"rank {len(shape)}")
        if i > 0 and d <= dims[i - 1]:
            _fail("broadcast", f"dims {dims} must be strictly increasing")
        if x.shape[i] != shape[d] and x.shape[i] != 1:
            _fail("broadcast", f"operand {x.type} dim {i} of size {x.shape[i]} cannot expand to "
                               f"result dim {d} of size {shape[d]} (shape {list(shape)})")
    return x.graph._add_op("broadcast", [x], [(shape, x.dtype)], {"dims": dims}, name).result


def reduce(x, kind: str = "sum", dims: Optional[Sequence[int]] = None, *, name=None) -> Tensor:
    """Reduces (sum, max, min, mean) over `dims` (all when None)."""
    x = _check_tensor("reduce", "operand", x)
    if kind not in REDUCE_KINDS:
        _fail("reduce", f"kind must be one of {', '.join(REDUCE_KINDS)}, got {kind!r}")
    _check_dtypes("reduce", "operand", x, FLOAT_DTYPES if kind == "mean" else NUMERIC_DTYPES)
    dims = list(range(x.rank)) if dims is None else _dims("reduce", "dims", dims, x.rank)
    shape = [n for d, n in enumerate(x.shape) if d not in dims]
    return x.graph._add_op("reduce", [x], [(shape, x.dtype)],
                           {"kind": kind, "dims": dims}, name).result


def pad(x, low: Sequence[int], high: Sequence[int], interior: Optional[Sequence[int]] = None,
        fill: float = 0.0, *, name=None) -> Tensor:
    """Pads each dim with `low` elements before, `high` after and `interior`
    between neighbours, all `fill`."""
    x = _check_tensor("pad", "operand", x)
    low, high = [int(v) for v in low], [int(v) for v in high]
    inner = [0] * x.rank if interior is None else [int(v) for v in interior]
    if not (len(low) == len(high) == len(inner) == x.rank):
        _fail("pad", f"low, high and interior need one entry per dim of {x.type}")
    if any(v < 0 for v in low + high + inner):
        _fail("pad", f"padding must not be negative, got low {low}, high {high}, "
                     f"interior {inner}")
    shape = [lo + n + (n - 1 if n > 0 else 0) * i + hi
             for n, lo, hi, i in zip(x.shape, low, high, inner)]
    attrs = {"low": low, "high": high, "fill": float(fill)}
    if interior is not None:
        attrs["interior"] = inner
    return x.graph._add_op("pad", [x], [(shape, x.dtype)], attrs, name).result


def _arg_reduce(op: str, x, dim: int, dtype: str, name) -> Tensor:
    x = _check_tensor(op, "operand", x)
    _check_dtypes(op, "operand", x, NUMERIC_DTYPES)
    if x.rank == 0:
        _fail(op, f"needs rank >= 1, got {x.type}")
    if dtype not in INT_DTYPES:
        _fail(op, f"the index type must be one of {', '.join(INT_DTYPES)}, got {dtype!r}")
    dim = _dims(op, "dim", [dim], x.rank)[0]
    shape = [n for d, n in enumerate(x.shape) if d != dim]
    return x.graph._add_op(op, [x], [(shape, dtype)], {"dim": dim}, name).result


def argmax(x, dim: int = -1, dtype: str = "i32", *, name=None) -> Tensor:
    """Index of the largest element along `dim` (the smallest index on ties)."""
    return _arg_reduce("argmax", x, dim, dtype, name)


def argmin(x, dim: int = -1, dtype: str = "i32", *, name=None) -> Tensor:
    """Index of the smallest element along `dim` (the smallest index on ties)."""
    return _arg_reduce("argmin", x, dim, dtype, name)


def transpose(x, perm: Sequence[int], *, name=None) -> Tensor:
    """Result dim i is operand dim perm[i]."""
    x = _check_tensor("transpose", "operand", x)
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(x.rank)):
        _fail("transpose", f"perm {perm} is not a permutation of the {x.rank} dims of {x.type}")
    shape = [x.shape[p] for p in perm]
    return x.graph._add_op("transpose", [x], [(shape, x.dtype)], {"perm": perm}, name).result


def reshape(x, shape: Sequence[int], *, name=None) -> Tensor:
    """Row-major reshape; one entry may be -1."""
    x = _check_tensor("reshape", "operand", x)
    shape = [int(d) for d in shape]
    if shape.count(-1) > 1:
        _fail("reshape", f"shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.size % known:
            _fail("reshape", f"cannot reshape {x.type} ({x.size} elements) to {shape}")
        shape[shape.index(-1)] = x.size // known
    shape = list(_check_shape("reshape", shape))
    if math.prod(shape) != x.size:
        _fail("reshape", f"cannot reshape {x.type} ({x.size} elements) to {shape} "
                         f"({math.prod(shape)} elements)")
    return x.graph._add_op("reshape", [x], [(shape, x.dtype)], {}, name).result


def slice(x, starts: Sequence[int], limits: Sequence[int],  # noqa: A001
          strides: Optional[Sequence[int]] = None, *, name=None) -> Tensor:
    """Static strided slice: starts[d], starts[d] + strides[d], ... below limits[d]."""
    x = _check_tensor("slice", "operand", x)
    starts = [int(s) for s in starts]
    limits = [int(s) for s in limits]
    strides = [1] * x.rank if strides is None else [int(s) for s in strides]
    if not len(starts) == len(limits) == len(strides) == x.rank:
        _fail("slice", f"starts {starts}, limits {limits} and strides {strides} need one entry "
                       f"per dimension of {x.type}")
    shape = []
    for d in range(x.rank):
        if strides[d] <= 0:
            _fail("slice", f"stride of dimension {d} must be positive, got {strides[d]}")
        if starts[d] < 0 or starts[d] > limits[d] or limits[d] > x.shape[d]:
            _fail("slice", f"dimension {d} of size {x.shape[d]} ({x.type}) cannot be sliced "
                           f"from {starts[d]} to {limits[d]}")
        shape.append((limits[d] - starts[d] + strides[d] - 1) // strides[d])
    return x.graph._add_op("slice", [x], [(shape, x.dtype)],
                           {"starts": starts, "limits": limits, "strides": strides}, name).result


def concat(inputs: Sequence[Tensor], dim: int, *, name=None) -> Tensor:
    """Concatenates along `dim`."""
    inputs = list(inputs)
    if not inputs:
        _fail("concat", "needs at least one operand")
    for i, t in enumerate(inputs):
        _check_tensor("concat", f"operand #{i}", t)
    graph = _same_graph("concat", *inputs)
    first = inputs[0]
    dim = _dims("concat", "dim", [dim], first.rank)[0] if first.rank else _fail(
        "concat", f"cannot concatenate 0-d tensors ({first.type})")
    shape = list(first.shape)
    for i, t in enumerate(inputs[1:], 1):
        if t.dtype != first.dtype or t.rank != first.rank:
            _fail("concat", f"operand #{i} of type {t.type} does not match operand #0 of type {first.type}")
        for d in range(first.rank):
            if d != dim and t.shape[d] != first.shape[d]:
                _fail("concat", f"operand #{i} {t.type} has size {t.shape[d]} in dimension {d} "
                                f"but operand #0 {first.type} has {first.shape[d]}")
        shape[dim] += t.shape[dim]
    return graph._add_op("concat", inputs, [(shape, first.dtype)], {"dim": dim}, name).result


def _getitem(x: Tensor, index) -> Tensor:
    if not isinstance(index, tuple):
        index = (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        _fail("slice", "at most one ... in an index")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        fill = x.rank - (len(index) - 1)
        index = index[:at] + (_py_slice(None),) * fill + index[at + 1:]
    if len(index) > x.rank:
        _fail("slice", f"{len(index)} indices for {x.type}")
    index = index + (_py_slice(None),) * (x.rank - len(index))
    starts, limits, strides, drop = [], [], [], []
    for d, i in enumerate(index):
        n = x.shape[d]
        if isinstance(i, (int, np.integer)):
            i = int(i) + n if i < 0 else int(i)
            if not 0 <= i < n:
                _fail("slice", f"index {i} is outside dimension {d} of size {n} ({x.type})")
            starts.append(i); limits.append(i + 1); strides.append(1); drop.append(d)
        elif isinstance(i, _py_slice):
            start, stop, step = i.indices(n)
            if step <= 0:
                _fail("slice", f"steps must be positive, got {step}")
            stop = _py_max(stop, start)
            starts.append(start); limits.append(stop); strides.append(step)
        else:
            _fail("slice", f"unsupported index {i!r} (use ints and start:stop:step)")
    result = slice(x, starts, limits, strides)
    if drop:
        result = reshape(result, [n for d, n in enumerate(result.shape) if d not in drop])
    return result


# ----------------------------------------------------------------------------
# Contraction
# ----------------------------------------------------------------------------

def dot(lhs, rhs, contract: Tuple[Sequence[int], Sequence[int]] = None,
        batch: Optional[Tuple[Sequence[int], Sequence[int]]] = None, *, name=None) -> Tensor:
    """General contraction. `contract=([lhs dims], [rhs dims])`,
    `batch=([lhs dims], [rhs dims])`. Result dims: batch, lhs free, rhs free.
    Without `contract`: lhs's last dim with rhs's first."""
    lhs = _check_tensor("dot", "lhs", lhs)
    rhs = _check_tensor("dot", "rhs", rhs)
    graph = _same_graph("dot", lhs, rhs)
    if lhs.dtype != rhs.dtype:
        _fail("dot", f"operand element types differ: {lhs.type} vs {rhs.type}")
    _check_dtypes("dot", "operands", lhs, NUMERIC_DTYPES)
    if contract is None:
        if lhs.rank == 0 or rhs.rank == 0:
            _fail("dot", f"cannot contract 0-d operands ({lhs.type}, {rhs.type})")
        contract = ([lhs.rank - 1], [0])
    lb, rb = ([], []) if batch is None else (list(batch[0]), list(batch[1]))
    lc, rc = list(contract[0]), list(contract[1])
    if len(lb) != len(rb):
        _fail("dot", f"batch dims {lb} x {rb} must pair up")
    if len(lc) != len(rc):
        _fail("dot", f"contracting dims {lc} x {rc} must pair up")
    lhs_used = _dims("dot", "lhs batch+contracting dims", lb + lc, lhs.rank)
    rhs_used = _dims("dot", "rhs batch+contracting dims", rb + rc, rhs.rank)
    lb, lc = lhs_used[:len(lb)], lhs_used[len(lb):]
    rb, rc = rhs_used[:len(rb)], rhs_used[len(rb):]
    for what, ls, rs in (("batch", lb, rb), ("contracting", lc, rc)):
        for l, r in zip(ls, rs):
            if lhs.shape[l] != rhs.shape[r]:
                _fail("dot", f"{what} dim {l} of lhs {lhs.type} has size {lhs.shape[l]} but "
                             f"{what} dim {r} of rhs {rhs.type} has size {rhs.shape[r]}")
    shape = [lhs.shape[d] for d in lb]
    shape += [n for d, n in enumerate(lhs.shape) if d not in lhs_used]
    shape += [n for d, n in enumerate(rhs.shape) if d not in rhs_used]
    attrs = {"lhs_batch": lb, "rhs_batch": rb, "lhs_contract": lc, "rhs_contract": rc}
    return graph._add_op("dot", [lhs, rhs], [(shape, lhs.dtype)], attrs, name).result


def matmul(x, w, *, name=None) -> Tensor:
    """Contracts x's last dim with w's first (x @ w)."""
    return dot(x, w, name=name)


# ----------------------------------------------------------------------------
# Neural-network ops
# ----------------------------------------------------------------------------

def _along_dim(op: str, x, dim: int, name) -> Tensor:
    """A float op of the operand's type along one dim (softmax, log_softmax)."""
    x = _check_tensor(op, "operand", x)
    _check_dtypes(op, "operand", x, FLOAT_DTYPES)
    if x.rank == 0:
        _fail(op, f"needs rank >= 1, got {x.type}")
    dim = _dims(op, "dim", [dim], x.rank)[0]
    return x.graph._add_op(op, [x], [(x.shape, x.dtype)], {"dim": dim}, name).result


def softmax(x, dim: int = -1, *, name=None) -> Tensor:
    return _along_dim("softmax", x, dim, name)


def log_softmax(x, dim: int = -1, *, name=None) -> Tensor:
    """log(softmax(x)) along `dim`, computed as x - max - log(sum(exp(x - max)))."""
    return _along_dim("log_softmax", x, dim, name)


def _check_norm(op: str, x: Tensor, scales: Sequence[Tuple[str, Tensor]]) -> None:
    _check_dtypes(op, "operand", x, FLOAT_DTYPES)
    if x.rank < 1:
        _fail(op, f"normalizes the last dimension; the operand must have rank >= 1, got {x.type}")
    for what, s in scales:
        _check_tensor(op, what, s)
        _same_graph(op, x, s)
        if s.rank != 1 or s.shape[0] != x.shape[-1]:
            _fail(op, f"{what} must be 1-D of the normalized size {x.shape[-1]}, got {s.type}")
        if s.dtype != x.dtype:
            _fail(op, f"{what} element type {s.dtype} differs from the operand's {x.type}")


def layer_norm(x, gamma, beta, epsilon: float = _default("layer_norm", "epsilon"), *,
               name=None) -> Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over the last dim."""
    x = _check_tensor("layer_norm", "operand", x)
    _check_norm("layer_norm", x, [("gamma", gamma), ("beta", beta)])
    return x.graph._add_op("layer_norm", [x, gamma, beta], [(x.shape, x.dtype)],
                           {"epsilon": float(epsilon)}, name).result


def rms_norm(x, gamma, epsilon: float = _default("rms_norm", "epsilon"), *,
             name=None) -> Tensor:
    """x / sqrt(mean(x^2) + epsilon) * gamma over the last dim."""
    x = _check_tensor("rms_norm", "operand", x)
    _check_norm("rms_norm", x, [("gamma", gamma)])
    return x.graph._add_op("rms_norm", [x, gamma], [(x.shape, x.dtype)],
                           {"epsilon": float(epsilon)}, name).result


def attention(q, k, v, *, causal: bool = False, scale: Optional[float] = None,
              position_offset: int = 0, name=None) -> Tensor:
    """Scaled dot-product attention over [batch, seq, heads, head_dim];
    k/v may have fewer heads (grouped: query head h reads KV head
    h // (H / Hkv)). `scale` defaults to 1/sqrt(head_dim)."""
    q = _check_tensor("attention", "q", q)
    k = _check_tensor("attention", "k", k)
    v = _check_tensor("attention", "v", v)
    graph = _same_graph("attention", q, k, v)
    if q.rank != 4 or k.rank != 4:
        _fail("attention", f"expects [batch, seq, heads, head_dim] operands, got q {q.type} and k {k.type}")
    _check_dtypes("attention", "q", q, FLOAT_DTYPES)
    if q.dtype != k.dtype:
        _fail("attention", f"q {q.type} and k {k.type} element types differ")
    if k.shape != v.shape or k.dtype != v.dtype:
        _fail("attention", f"k {k.type} and v {v.type} must have the same type")
    if q.shape[0] != k.shape[0]:
        _fail("attention", f"q batch {q.shape[0]} differs from k/v batch {k.shape[0]} ({q.type}, {k.type})")
    if q.shape[3] != k.shape[3]:
        _fail("attention", f"q head_dim {q.shape[3]} differs from k/v head_dim {k.shape[3]} ({q.type}, {k.type})")
    if k.shape[2] <= 0 or q.shape[2] % k.shape[2]:
        _fail("attention", f"query heads ({q.shape[2]}) must be a multiple of key/value heads "
                           f"({k.shape[2]}) ({q.type}, {k.type})")
    if position_offset < 0:
        _fail("attention", f"position_offset must be non-negative, got {position_offset}")
    if causal and q.shape[1] + position_offset > k.shape[1]:
        _fail("attention", f"causal attention needs query positions (offset {position_offset} + "
                           f"{q.shape[1]}) within the key length {k.shape[1]}")
    if scale is not None and (not math.isfinite(scale) or float(np.float32(scale)) == 0.0):
        _fail("attention", f"scale must be finite and non-zero, got {scale}")
    attrs = {"causal": bool(causal), "scale": None if scale is None else float(scale),
             "position_offset": int(position_offset)}
    return graph._add_op("attention", [q, k, v], [(q.shape, q.dtype)], attrs, name).result


def _note_data(ids: Tensor, kind: str, vocab: int) -> None:
    """Infers what feeds an integer input from its use, as par-opt does:
    embedding ids are tokens (that wins), cross_entropy labels targets; the
    vocabulary is the table's rows or the logits' last dim unless given."""
    inp = ids.origin
    if inp is None or inp.role != "data":
        return
    if inp.data is None or (inp.data_inferred and inp.data != "tokens"):
        inp.data = kind
        inp.data_inferred = True
    if inp.data == kind and not inp.vocab_given:
        inp.vocab = vocab


def embedding(table, ids, *, name=None) -> Tensor:
    """table[ids[i...], :]; ids outside [0, V) give zeros."""
    table = _check_tensor("embedding", "table", table)
    ids = _check_tensor("embedding", "ids", ids)
    graph = _same_graph("embedding", table, ids)
    _check_dtypes("embedding", "table", table, FLOAT_DTYPES)
    _check_dtypes("embedding", "ids", ids, INT_DTYPES)
    if table.rank != 2:
        _fail("embedding", f"the table must be [vocab, hidden], got {table.type}")
    _note_data(ids, "tokens", table.shape[0])
    shape = list(ids.shape) + [table.shape[1]]
    return graph._add_op("embedding", [table, ids], [(shape, table.dtype)], {}, name).result


def gather(operand, indices, dims: Sequence[int], *, name=None) -> Tensor:
    """The operand's slices at integer coordinates: `indices` is [N..., k] with
    one coordinate per dim of `dims` (increasing); the result is [N..., the
    operand's other dims]; coordinates outside the operand give zeros."""
    operand = _check_tensor("gather", "operand", operand)
    indices = _check_tensor("gather", "indices", indices)
    graph = _same_graph("gather", operand, indices)
    _check_dtypes("gather", "operand", operand, NUMERIC_DTYPES)
    _check_dtypes("gather", "indices", indices, INT_DTYPES)
    dims = _dims("gather", "dims", dims, operand.rank)
    if not dims or dims != sorted(set(dims)):
        _fail("gather", f"dims {dims} must be increasing dims of {operand.type}")
    if indices.rank < 1 or indices.shape[-1] != len(dims):
        _fail("gather", f"indices {indices.type} must be [entries..., {len(dims)}]")
    shape = list(indices.shape[:-1]) + [n for d, n in enumerate(operand.shape) if d not in dims]
    return graph._add_op("gather", [operand, indices], [(shape, operand.dtype)],
                         {"dims": dims}, name).result


def cross_entropy(logits, labels, *, name=None) -> Tensor:
    """Mean over tokens of logsumexp(logits) - logits[label] (0-d)."""
    logits = _check_tensor("cross_entropy", "logits", logits)
    labels = _check_tensor("cross_entropy", "labels", labels)
    graph = _same_graph("cross_entropy", logits, labels)
    _check_dtypes("cross_entropy", "logits", logits, FLOAT_DTYPES)
    _check_dtypes("cross_entropy", "labels", labels, INT_DTYPES)
    if logits.rank < 1 or labels.shape != logits.shape[:-1]:
        _fail("cross_entropy", f"labels {labels.type} must have the shape of the logits without "
                               f"their last (vocabulary) dimension; logits are {logits.type}")
    _note_data(labels, "targets", logits.shape[-1])
    return graph._add_op("cross_entropy", [logits, labels], [((), logits.dtype)], {},
                         name).result


def rope(x, theta: float = _default("rope", "theta"), position_offset: int = 0, *,
         name=None) -> Tensor:
    """Rotary embedding on [batch, seq, heads, head_dim]: position p rotates
    the pair (x[i], x[i + D/2]) by p * theta^(-2i/D)."""
    x = _check_tensor("rope", "operand", x)
    _check_dtypes("rope", "operand", x, FLOAT_DTYPES)
    if x.rank != 4:
        _fail("rope", f"expects a [batch, seq, heads, head_dim] operand, got {x.type}")
    if x.shape[3] % 2:
        _fail("rope", f"head_dim {x.shape[3]} must be even ({x.type})")
    if not (math.isfinite(theta) and theta > 0):
        _fail("rope", f"theta must be positive and finite, got {theta}")
    if position_offset < 0:
        _fail("rope", f"position_offset must be non-negative, got {position_offset}")
    return x.graph._add_op("rope", [x], [(x.shape, x.dtype)],
                           {"theta": float(theta), "position_offset": int(position_offset)},
                           name).result


# ----------------------------------------------------------------------------
# Training ops
# ----------------------------------------------------------------------------

def _check_scalar(op: str, what: str, t: Tensor, allowed) -> None:
    _check_tensor(op, what, t)
    if t.rank != 0 or t.dtype not in allowed:
        _fail(op, f"{what} must be a 0-d tensor of {'/'.join(allowed)}, got {t.type}")


def adamw(param, grad, m, v, lr, step, *, beta1: float = _default("adamw", "beta1"),
          beta2: float = _default("adamw", "beta2"),
          epsilon: float = _default("adamw", "epsilon"),
          weight_decay: float = _default("adamw", "weight_decay"), name=None):
    """One AdamW update; returns (new_param, new_m, new_v)."""
    for what, t in (("param", param), ("grad", grad), ("m", m), ("v", v)):
        _check_tensor("adamw", what, t)
        _check_dtypes("adamw", what, t, FLOAT_DTYPES)
    _check_scalar("adamw", "lr", lr, FLOAT_DTYPES)
    _check_scalar("adamw", "step", step, NUMERIC_DTYPES)
    graph = _same_graph("adamw", param, grad, m, v, lr, step)
    if grad.shape != param.shape:
        _fail("adamw", f"grad {grad.type} must have the shape of param {param.type}")
    for what, t in (("m", m), ("v", v)):
        if t.type != param.type:
            _fail("adamw", f"{what} {t.type} must have the type of param {param.type}")
    attrs = {"beta1": float(beta1), "beta2": float(beta2), "epsilon": float(epsilon),
             "weight_decay": float(weight_decay)}
    names = [name, f"{name}.m" if name else None, f"{name}.v" if name else None]
    op = graph._add_op("adamw", [param, grad, m, v, lr, step],
                       [(param.shape, param.dtype)] * 3, attrs, names)
    return tuple(op.results)


def sgd(param, grad, momentum_buf, lr, *, momentum: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False, name=None):
    """One SGD-with-momentum update; returns (new_param, new_momentum)."""
    for what, t in (("param", param), ("grad", grad), ("momentum_buf", momentum_buf)):
        _check_tensor("sgd", what, t)
        _check_dtypes("sgd", what, t, FLOAT_DTYPES)
    _check_scalar("sgd", "lr", lr, FLOAT_DTYPES)
    graph = _same_graph("sgd", param, grad, momentum_buf, lr)
    if grad.shape != param.shape:
        _fail("sgd", f"grad {grad.type} must have the shape of param {param.type}")
    if momentum_buf.type != param.type:
        _fail("sgd", f"momentum_buf {momentum_buf.type} must have the type of param {param.type}")
    attrs = {"momentum": float(momentum), "weight_decay": float(weight_decay),
             "nesterov": bool(nesterov)}
    names = [name, f"{name}.buf" if name else None]
    op = graph._add_op("sgd", [param, grad, momentum_buf, lr],
                       [(param.shape, param.dtype)] * 2, attrs, names)
    return tuple(op.results)


# ----------------------------------------------------------------------------
# Sharding
# ----------------------------------------------------------------------------

def sharding_constraint(x, spec: SpecLike, *, name=None) -> Tensor:
    """Pins the sharding of `x` (identity on values)."""
    x = _check_tensor("sharding_constraint", "operand", x)
    resolved = to_spec(spec, x.rank, x.graph.mesh, what="sharding_constraint")
    if resolved is None:
        _fail("sharding_constraint", "needs a sharding")
    out = x.graph._add_op("sharding_constraint", [x], [(x.shape, x.dtype)],
                          {"sharding": resolved}, name).result
    out.origin = x.origin
    return out


OPS = ("add", "sub", "mul", "div", "max", "min", "neg", "exp", "log", "tanh", "sqrt", "rsqrt",
       "gelu", "silu", "relu", "sigmoid", "compare", "select", "convert", "constant",
       "broadcast", "reduce", "argmax", "argmin", "transpose", "reshape", "slice", "pad", "concat", "dot", "softmax",
       "log_softmax", "layer_norm", "rms_norm", "attention", "embedding", "gather", "cross_entropy", "rope", "adamw",
       "sgd", "sharding_constraint")
