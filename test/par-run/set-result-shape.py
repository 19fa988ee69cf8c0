#!/usr/bin/env python3
"""Gives the result of the first OP instruction of PROGRAM the shape SHAPE
(comma-separated sizes; its buffer's bytes follow) and writes OUT: a
program the loader accepts whose OP no longer makes what its attributes say.

  set-result-shape.py PROGRAM OUT OP SHAPE
"""
import json
import math
import sys

program, out, op, shape = sys.argv[1:5]
with open(program) as f:
    doc = json.load(f)
rc = doc["rank_classes"][0]
inst = next(i for i in rc["instructions"] if i["op"] == op)
buffer = rc["buffers"][inst["results"][0]]
sizes = [int(n) for n in shape.split(",")]
buffer["bytes"] = buffer["bytes"] // math.prod(buffer["shape"]) * math.prod(sizes)
buffer["shape"] = sizes
with open(out, "w") as f:
    json.dump(doc, f)
