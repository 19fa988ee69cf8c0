"""Text pictures of how a tensor is split over a mesh.

    >>> print(visualize_sharding([8, 16], P("dp", "tp"), Mesh({"dp": 2, "tp": 2})))
    8x16 f32 sharded [{"dp"}, {"tp"}] over mesh dp=2 x tp=2
    ┌───────────────┬───────────────┐
    │     dev 0     │     dev 1     │
    │   [0:4, 0:8]  │  [0:4, 8:16]  │
    ├───────────────┼───────────────┤
    │     dev 2     │     dev 3     │
    │   [4:8, 0:8]  │  [4:8, 8:16]  │
    └───────────────┴───────────────┘
    per device: 4x8 (32 of 128 elements)

Rows are the blocks of every dimension but the last (row-major), columns the
blocks of the last; each cell lists the devices holding the block (replicas
share a cell) and the block's index range. A dimension split unevenly gets
ceil(n / shards)-sized blocks, the last one shorter, as the partitioner pads.
"""
from __future__ import annotations

import itertools
import math
from typing import Dict, List, Optional, Sequence, Tuple

from .sharding import Mesh, ShardingSpec, SpecLike, to_spec


def _blocks(n: int, shards: int) -> List[Tuple[int, int]]:
    size = -(-n // shards) if shards else n
    return [(min(i * size, n), min((i + 1) * size, n)) for i in range(shards)]


def block_of(device: int, spec: ShardingSpec, mesh: Mesh) -> Tuple[int, ...]:
    """The block index of every dimension that `device` holds."""
    coords = mesh.coords(device)
    index = []
    for axes in spec.dims:
        i = 0
        for axis in axes:
            i = i * mesh.axis_size(axis) + coords[axis]
        index.append(i)
    return tuple(index)


def device_slices(shape: Sequence[int], spec: SpecLike, mesh: Mesh
                  ) -> Dict[int, Tuple[Tuple[int, int], ...]]:
    """device -> the (start, stop) range it holds in every dimension."""
    resolved = to_spec(spec, len(shape), mesh) or ShardingSpec(((),) * len(shape))
    _check_axes(resolved, mesh)
    ranges = [_blocks(n, resolved.shards(d, mesh)) for d, n in enumerate(shape)]
    return {dev: tuple(ranges[d][b] for d, b in enumerate(block_of(dev, resolved, mesh)))
            for dev in range(mesh.size)}


def _check_axes(spec: ShardingSpec, mesh: Mesh) -> None:
    for axis in spec.axes() + spec.partial:
        if axis not in mesh.axis_names:
            raise ValueError(f"visualize_sharding: unknown axis {axis!r} in mesh {mesh.describe()}")


def _range_text(ranges: Sequence[Tuple[int, int]], shape: Sequence[int]) -> str:
    parts = [":" if (a, b) == (0, n) else f"{a}:{b}" for (a, b), n in zip(ranges, shape)]
    return "[" + ", ".join(parts) + "]"


def _devices_text(devices: Sequence[int]) -> str:
    if len(devices) > 1 and list(devices) == list(range(devices[0], devices[-1] + 1)) \
            and len(devices) > 3:
        return f"dev {devices[0]}-{devices[-1]}"
    return "dev " + ",".join(str(d) for d in devices)


def visualize_sharding(shape: Sequence[int], spec: SpecLike, mesh: Mesh, *,
                       dtype: str = "f32", name: Optional[str] = None) -> str:
    """A grid of the tensor's blocks and the devices holding each."""
    shape = tuple(int(d) for d in shape)
    resolved = to_spec(spec, len(shape), mesh) or ShardingSpec(((),) * len(shape))
    _check_axes(resolved, mesh)
    shards = [resolved.shards(d, mesh) for d in range(len(shape))]
    ranges = [_blocks(n, s) for n, s in zip(shape, shards)]
    holders: Dict[Tuple[int, ...], List[int]] = {}
    for dev in range(mesh.size):
        holders.setdefault(block_of(dev, resolved, mesh), []).append(dev)

    title = f"{'x'.join(map(str, shape)) or 'scalar'} {dtype}"
    if name:
        title = f"{name}: {title}"
    title += f" sharded {resolved.body()} over mesh {mesh.describe()}"
    lines = [title]

    if not shape:
        row_keys: List[Tuple[int, ...]] = [()]
        col_count = 1
    else:
        row_keys = list(itertools.product(*[range(s) for s in shards[:-1]]))
        col_count = shards[-1]

    cells: List[List[Tuple[str, str]]] = []
    for rk in row_keys:
        row = []
        for c in range(col_count):
            key = rk + ((c,) if shape else ())
            devs = holders.get(key, [])
            rng = tuple(ranges[d][b] for d, b in enumerate(key))
            row.append((_devices_text(devs), _range_text(rng, shape) if shape else "[]"))
        cells.append(row)
    width = max(max(len(a), len(b)) for row in cells for a, b in row) + 4

    def border(left, mid, right):
        return left + mid.join("─" * width for _ in range(col_count)) + right

    lines.append(border("┌", "┬", "┐"))
    for i, row in enumerate(cells):
        lines.append("│" + "│".join(a.center(width) for a, _ in row) + "│")
        lines.append("│" + "│".join(b.center(width) for _, b in row) + "│")
        lines.append(border("├", "┼", "┤") if i + 1 < len(cells) else border("└", "┴", "┘"))
    if resolved.partial:
        lines.append(f"partial over {', '.join(resolved.partial)}: devices of one block hold "
                     "addends of its value")
    local = resolved.local_shape(shape, mesh)
    per_device = math.prod(local) if shape else 1
    lines.append(f"per device: {'x'.join(map(str, local)) or 'scalar'} "
                 f"({per_device} of {math.prod(shape) if shape else 1} elements)")
    return "\n".join(lines)


def show_sharding(shape: Sequence[int], spec: SpecLike, mesh: Mesh, **kwargs) -> None:
    """Prints visualize_sharding(...)."""
    print(visualize_sharding(shape, spec, mesh, **kwargs))


__all__ = ["visualize_sharding", "show_sharding", "device_slices", "block_of"]
