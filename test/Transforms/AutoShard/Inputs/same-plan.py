#!/usr/bin/env python3
"""Prints whether two --auto-shard outputs of one model chose the same plan
with the same checked figures, and each record's pruned and unpruned counts.

same-plan.py A.mlir B.mlir"""
import re
import sys


def record(path):
    head = open(path).readline()
    # The chosen plan's keys follow its alternatives.
    tail = head[head.rfind("}], axes = "):]
    field = lambda name, pattern: re.search(r"\b" + name + r" = " + pattern, tail).group(1)
    return {
        "plan": field("plan", r'"([^"]*)"'),
        "seconds": field("step_seconds", r"([0-9.e+-]+)"),
        "bytes": field("memory_bytes", r"(\d+)"),
        "pruned": int(field("pruned", r"(\d+)")),
        "unpruned": int(field("unpruned", r"(\d+)")),
    }


a, b = record(sys.argv[1]), record(sys.argv[2])
same = all(a[key] == b[key] for key in ("plan", "seconds", "bytes"))
print(f"chosen: {'same' if same else 'different'} ({a['plan']}; {b['plan']})")
for name, r in (("first", a), ("second", b)):
    print(f"{name}: pruned {r['pruned']}, unpruned {r['unpruned']}")
