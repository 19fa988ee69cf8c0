#!/usr/bin/env python3
"""Prints whether two --auto-shard outputs of one model chose the same plan
with the same checked figures after checking the same plans (the number
checked, and each checked alternative's figures), and each record's pruned
and unpruned counts. With --chosen, only the chosen plan and its checked
figures are compared (where the integer programs may return another of
several optima, and with it other alternatives).

same-plan.py [--chosen] A.mlir B.mlir"""
import re
import sys


def record(path):
    head = open(path).readline()
    start = head.find("par.auto_shard = {alternatives = [")
    if start < 0:
        sys.exit(f"{path}: no par.auto_shard record")
    text = head[start:]
    # The chosen plan's keys follow its alternatives' list; its own
    # step_seconds is the last (its schedule trials' come before it).
    split = text.find("], axes = ")
    alternatives, tail = text[:split], text[split:]
    field = lambda name, pattern: re.findall(r"\b" + name + r" = " + pattern, tail)[-1]
    checked = set()
    for entry in re.findall(r"\{checked = true[^{}]*\}", alternatives):
        checked.add((re.search(r'plan = "([^"]*)"', entry).group(1),
                     re.search(r"step_seconds = ([0-9.e+-]+)", entry).group(1),
                     re.search(r"memory_bytes = (\d+)", entry).group(1)))
    return {
        "plan": field("plan", r'"([^"]*)"'),
        "seconds": field("step_seconds", r"([0-9.e+-]+)"),
        "bytes": field("memory_bytes", r"(\d+)"),
        "checks": field("checked", r"(\d+)"),
        "checked alternatives": checked,
        "pruned": int(field("pruned", r"(\d+)")),
        "unpruned": int(field("unpruned", r"(\d+)")),
    }


args = sys.argv[1:]
chosen_only = "--chosen" in args
args = [arg for arg in args if arg != "--chosen"]
a, b = record(args[0]), record(args[1])
keys = ("plan", "seconds", "bytes") if chosen_only else \
    ("plan", "seconds", "bytes", "checks", "checked alternatives")
differ = [key for key in keys if a[key] != b[key]]
print(f"chosen: {'same' if not differ else 'different: ' + ', '.join(differ)} "
      f"({a['plan']}; {b['plan']})")
for name, r in (("first", a), ("second", b)):
    print(f"{name}: pruned {r['pruned']}, unpruned {r['unpruned']}")
