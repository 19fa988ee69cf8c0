"""An independent reader of par checkpoints (docs/par-run.md), for tests.

It follows index.json (or, without one, the newest step directory holding a
manifest), checks every shard's CRC-32C and save id, and assembles each
tensor's global value with numpy, without par-run's reader.
"""
import json
import os
import re
import struct

import numpy as np

_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32,
           "i64": np.int64, "f16": np.float16, "bf16": np.uint16,
           "i1": np.uint8}

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def find_index(directory):
    top = os.path.join(directory, "index.json")
    if os.path.exists(top):
        return top
    best = None
    for name in os.listdir(directory):
        m = re.fullmatch(r"step-(\d+)-[0-9a-f]+", name)
        path = os.path.join(directory, name, "index.json")
        if m and not os.path.islink(os.path.join(directory, name)) \
                and os.path.exists(path):
            if best is None or int(m.group(1)) > best[0]:
                best = (int(m.group(1)), path)
    if best is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    return best[1]


def load(directory):
    """(step, {name: ndarray}) of the checkpoint `directory` holds."""
    index_path = find_index(directory)
    base = os.path.dirname(index_path)
    with open(index_path) as f:
        index = json.load(f)
    tensors = {}
    for name, record in index["tensors"].items():
        dtype = _DTYPES[record["dtype"]]
        value = np.zeros(record["global_shape"], dtype=dtype)
        covered = np.zeros(record["global_shape"], dtype=bool)
        for shard in record["shards"]:
            path = os.path.join(base, shard["file"])
            with open(path, "rb") as f:
                blob = f.read()
            (length,) = struct.unpack("<Q", blob[:8])
            header = json.loads(blob[8:8 + length])
            meta = header["__metadata__"]
            assert meta["save_id"] == index["save_id"], \
                f"{path}: save {meta['save_id']}, index {index['save_id']}"
            begin, end = header[shard["key"]]["data_offsets"]
            data = blob[8 + length + begin:8 + length + end]
            assert len(data) == end - begin, f"{path}: truncated"
            assert f"{crc32c(data):08x}" == shard["crc32c"], f"{path}: crc"
            part = np.frombuffer(data, dtype=dtype).reshape(shard["shape"])
            box = tuple(slice(o, o + s)
                        for o, s in zip(shard["offsets"], shard["shape"]))
            value[box] = part
            covered[box] = True
        assert covered.all(), f"{name}: not covered"
        tensors[name] = value
    return index["step"], tensors


def same(a, b):
    """Bitwise equality of two loaded checkpoints."""
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        a[1][k].tobytes() == b[1][k].tobytes() for k in a[1])
