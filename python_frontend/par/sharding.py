"""Device meshes and the two ways of writing how a tensor is split over one.

Two conventions are accepted and both become one `ShardingSpec`, which is
what the emitted IR (`#par.sharding<@mesh, [...]>`) is made from:

* JAX style, one entry per tensor dimension naming the mesh axes that split
  it::

      P("dp", None)            # dim 0 split over dp, dim 1 replicated
      P(("dp", "tp"), None)    # dim 0 split over dp then tp (dp major)

* DTensor style, one placement per mesh axis saying what that axis does::

      [Shard(0), Replicate()]  # on Mesh({"dp": 2, "tp": 2}): same as P("dp", None)
      [Shard(0), Shard(0)]     # same as P(("dp", "tp"), None)
      [Replicate(), Partial()] # an unreduced partial sum over tp

`constraint(x, spec)` pins the sharding of an intermediate value
(`par.sharding_constraint`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union


class Mesh:
    """A logical device mesh with named axes, devices numbered row-major
    (last axis fastest), as `par.mesh @name <["dp"=2, "tp"=2]>`."""

    def __init__(self, axes: Union[Mapping[str, int], Sequence[Tuple[str, int]], None] = None,
                 name: str = "mesh"):
        items = list(axes.items()) if isinstance(axes, Mapping) else list(axes or [])
        names: List[str] = []
        sizes: List[int] = []
        for axis, size in items:
            if not isinstance(axis, str) or not axis:
                raise ValueError(f"Mesh: axis names must be non-empty strings, got {axis!r}")
            if axis in names:
                raise ValueError(f"Mesh: axis {axis!r} is declared twice")
            if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                raise ValueError(f"Mesh: axis {axis!r} needs a positive integer size, got {size!r}")
            names.append(axis)
            sizes.append(size)
        if not name or not name.replace("_", "a").isalnum():
            raise ValueError(f"Mesh: the symbol name must be alphanumeric, got {name!r}")
        self.name = name
        self.axis_names: Tuple[str, ...] = tuple(names)
        self.axis_sizes: Tuple[int, ...] = tuple(sizes)

    @classmethod
    def parse(cls, text: str, name: str = "mesh") -> "Mesh":
        """`"dp=2,tp=4"` (as par-opt's --mesh) or `"4x2"` (axes x, y, ...)."""
        text = text.strip()
        if not text:
            return cls({}, name)
        if "=" in text:
            axes = []
            for part in text.split(","):
                axis, _, size = part.partition("=")
                if not size.strip().isdigit():
                    raise ValueError(f"Mesh.parse: bad axis {part!r} in {text!r}")
                axes.append((axis.strip(), int(size)))
            return cls(axes, name)
        sizes = text.split("x")
        if not all(s.isdigit() for s in sizes):
            raise ValueError(f"Mesh.parse: expected sizes like 4x2 or axes like dp=2,tp=4, got {text!r}")
        letters = ["x", "y", "z", "w"] if len(sizes) <= 4 else [f"a{i}" for i in range(len(sizes))]
        return cls(list(zip(letters, map(int, sizes))), name)

    @property
    def shape(self) -> Dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def ndim(self) -> int:
        return len(self.axis_names)

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    def axis_size(self, axis: str) -> int:
        return self.shape[axis]

    def coords(self, device: int) -> Dict[str, int]:
        """Coordinates of `device` (row-major, last axis fastest)."""
        if not 0 <= device < self.size:
            raise ValueError(f"Mesh: device {device} is outside 0..{self.size - 1}")
        coords = {}
        for axis, size in reversed(list(zip(self.axis_names, self.axis_sizes))):
            coords[axis] = device % size
            device //= size
        return {axis: coords[axis] for axis in self.axis_names}

    def device(self, coords: Mapping[str, int]) -> int:
        index = 0
        for axis, size in zip(self.axis_names, self.axis_sizes):
            index = index * size + coords.get(axis, 0)
        return index

    def to_mlir(self) -> str:
        axes = ", ".join(f'"{a}"={s}' for a, s in zip(self.axis_names, self.axis_sizes))
        return f"par.mesh @{self.name} <[{axes}]>"

    def cli(self) -> str:
        """The --mesh spelling, e.g. `dp=2,tp=4`."""
        return ",".join(f"{a}={s}" for a, s in zip(self.axis_names, self.axis_sizes))

    def describe(self) -> str:
        if not self.axis_names:
            return "single device"
        return " x ".join(f"{a}={s}" for a, s in zip(self.axis_names, self.axis_sizes))

    def __eq__(self, other) -> bool:
        return (isinstance(other, Mesh) and self.name == other.name
                and self.axis_names == other.axis_names and self.axis_sizes == other.axis_sizes)

    def __hash__(self) -> int:
        return hash((self.name, self.axis_names, self.axis_sizes))

    def __repr__(self) -> str:
        inner = ", ".join(f"{a!r}: {s}" for a, s in zip(self.axis_names, self.axis_sizes))
        suffix = "" if self.name == "mesh" else f", name={self.name!r}"
        return f"Mesh({{{inner}}}{suffix})"


@dataclasses.dataclass(frozen=True)
class ShardingSpec:
    """The internal form of a sharding: for every dimension the mesh axes
    splitting it (major first) and whether propagation may add more (open),
    plus axes the value is a partial sum over and axes kept replicated."""
    dims: Tuple[Tuple[str, ...], ...]
    open: Tuple[bool, ...] = ()
    partial: Tuple[str, ...] = ()
    replicated: Tuple[str, ...] = ()

    def __post_init__(self):
        dims = tuple(tuple(d) for d in self.dims)
        object.__setattr__(self, "dims", dims)
        opened = tuple(self.open) if self.open else (False,) * len(dims)
        if len(opened) != len(dims):
            raise ValueError("ShardingSpec: `open` needs one flag per dimension")
        object.__setattr__(self, "open", opened)
        object.__setattr__(self, "partial", tuple(self.partial))
        object.__setattr__(self, "replicated", tuple(self.replicated))
        seen = set()
        for axis in [a for d in dims for a in d] + list(self.partial) + list(self.replicated):
            if not isinstance(axis, str) or not axis:
                raise ValueError(f"ShardingSpec: mesh axes are non-empty strings, got {axis!r}")
            if axis in seen:
                raise ValueError(f"ShardingSpec: axis {axis!r} appears more than once in {self}")
            seen.add(axis)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def axes(self) -> Tuple[str, ...]:
        """Axes splitting some dimension, in dimension order."""
        return tuple(a for d in self.dims for a in d)

    def is_replicated(self) -> bool:
        return not self.axes() and not self.partial

    def shards(self, dim: int, mesh: Mesh) -> int:
        return math.prod(mesh.axis_size(a) for a in self.dims[dim])

    def local_shape(self, shape: Sequence[int], mesh: Mesh) -> Tuple[int, ...]:
        """Per-device shape (ceil division, as padded uneven splits)."""
        return tuple(-(-n // self.shards(d, mesh)) for d, n in enumerate(shape))

    def body(self) -> str:
        """`[{"dp"}, {}], partial={"tp"}` (the part inside `<@mesh, ...>`)."""
        parts = []
        for axes, is_open in zip(self.dims, self.open):
            names = [f'"{a}"' for a in axes] + (["?"] if is_open else [])
            parts.append("{" + ", ".join(names) + "}")
        text = "[" + ", ".join(parts) + "]"
        if self.replicated:
            text += ", replicated={" + ", ".join(f'"{a}"' for a in self.replicated) + "}"
        if self.partial:
            text += ", partial={" + ", ".join(f'"{a}"' for a in self.partial) + "}"
        return text

    def attr(self, mesh_name: str = "mesh") -> str:
        return f"#par.sharding<@{mesh_name}, {self.body()}>"

    def __str__(self) -> str:
        return self.body()


class _Unconstrained:
    def __repr__(self) -> str:
        return "P.UNCONSTRAINED"


class P:
    """A JAX-style partition spec: one entry per tensor dimension, each None
    (replicated), an axis name, or a tuple of axis names (major first).
    Missing trailing entries are None. `P.UNCONSTRAINED` leaves a dimension
    open for propagation to split."""
    UNCONSTRAINED = _Unconstrained()

    def __init__(self, *entries):
        for entry in entries:
            if entry is None or entry is P.UNCONSTRAINED or isinstance(entry, str):
                continue
            if isinstance(entry, tuple) and all(isinstance(a, str) for a in entry):
                continue
            raise ValueError(f"P: each entry is None, an axis name or a tuple of axis "
                             f"names, got {entry!r}")
        self.entries = tuple(entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def __eq__(self, other) -> bool:
        return isinstance(other, P) and self.entries == other.entries

    def __hash__(self) -> int:
        return hash(self.entries)

    def __repr__(self) -> str:
        return "P(" + ", ".join(repr(e) for e in self.entries) + ")"

    def to_spec(self, rank: int) -> ShardingSpec:
        if len(self.entries) > rank:
            raise ValueError(f"{self!r} has {len(self.entries)} entries but the tensor has rank {rank}")
        dims, opened = [], []
        for entry in list(self.entries) + [None] * (rank - len(self.entries)):
            if entry is P.UNCONSTRAINED:
                dims.append(())
                opened.append(True)
            else:
                dims.append(() if entry is None else (entry,) if isinstance(entry, str) else entry)
                opened.append(False)
        return ShardingSpec(tuple(dims), tuple(opened))


PartitionSpec = P


class Placement:
    """What one mesh axis does to a tensor (DTensor convention)."""


@dataclasses.dataclass(frozen=True)
class Shard(Placement):
    """The mesh axis splits tensor dimension `dim`."""
    dim: int


@dataclasses.dataclass(frozen=True)
class Replicate(Placement):
    """Every device along the mesh axis holds the same value."""


@dataclasses.dataclass(frozen=True)
class Partial(Placement):
    """Devices along the mesh axis hold partial sums of the value."""
    reduce_op: str = "sum"

    def __post_init__(self):
        if self.reduce_op != "sum":
            raise ValueError(f"Partial: only 'sum' partials exist in par, got {self.reduce_op!r}")


SpecLike = Union[ShardingSpec, P, Sequence[Placement], None]


def is_placements(spec) -> bool:
    return (isinstance(spec, (list, tuple)) and not isinstance(spec, P) and len(spec) > 0
            and all(isinstance(p, Placement) for p in spec))


def placements_to_spec(placements: Sequence[Placement], rank: int, mesh: Mesh) -> ShardingSpec:
    """DTensor placements (one per mesh axis) as a ShardingSpec. Several mesh
    axes sharding one dimension split it in mesh order (first axis major)."""
    if len(placements) != mesh.ndim:
        raise ValueError(f"placements {list(placements)} need one entry per mesh axis of "
                         f"{mesh!r} ({mesh.ndim})")
    dims: List[List[str]] = [[] for _ in range(rank)]
    partial: List[str] = []
    for axis, placement in zip(mesh.axis_names, placements):
        if isinstance(placement, Shard):
            dim = placement.dim + rank if placement.dim < 0 else placement.dim
            if not 0 <= dim < rank:
                raise ValueError(f"{placement} on mesh axis {axis!r}: dimension {placement.dim} "
                                 f"is outside the tensor's rank {rank}")
            dims[dim].append(axis)
        elif isinstance(placement, Partial):
            partial.append(axis)
        elif not isinstance(placement, Replicate):
            raise ValueError(f"unknown placement {placement!r}")
    return ShardingSpec(tuple(tuple(d) for d in dims), partial=tuple(partial))


def to_spec(spec: SpecLike, rank: int, mesh: Optional[Mesh] = None,
            what: str = "sharding") -> Optional[ShardingSpec]:
    """Normalizes any accepted sharding notation to a ShardingSpec (None
    stays None: no annotation). DTensor placements need `mesh`."""
    if spec is None:
        return None
    if isinstance(spec, ShardingSpec):
        if spec.rank != rank:
            raise ValueError(f"{what}: {spec} has {spec.rank} entries but the tensor has rank {rank}")
        return spec
    if isinstance(spec, P):
        try:
            return spec.to_spec(rank)
        except ValueError as err:
            raise ValueError(f"{what}: {err}") from None
    if is_placements(spec):
        if mesh is None:
            raise ValueError(f"{what}: DTensor placements {list(spec)} need a mesh "
                             "(Graph(mesh=...) or compile(mesh=...))")
        return placements_to_spec(spec, rank, mesh)
    if isinstance(spec, (list, tuple)) and len(spec) == 0 and rank == 0:
        return ShardingSpec(())
    raise ValueError(f"{what}: expected P(...), a list of Shard/Replicate/Partial or a "
                     f"ShardingSpec, got {spec!r}")


def spec_from_program(sharding: Mapping) -> ShardingSpec:
    """The `sharding` object of a par-run program input or output."""
    return ShardingSpec(tuple(tuple(d) for d in sharding.get("dims", [])),
                        partial=tuple(sharding.get("partial", [])))


def constraint(x, spec: SpecLike, name: Optional[str] = None):
    """Pins the sharding of `x` (`par.sharding_constraint`); returns the
    constrained value."""
    from . import graph as _graph
    return _graph.sharding_constraint(x, spec, name=name)


__all__ = ["Mesh", "ShardingSpec", "P", "PartitionSpec", "Placement", "Shard", "Replicate",
           "Partial", "to_spec", "constraint", "placements_to_spec", "spec_from_program"]
