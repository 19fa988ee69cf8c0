#!/usr/bin/env python3
"""Compares the whole-step figures of two --auto-shard outputs of one model
(checks=short and checks=whole): every plan that the first checked on the
whole step (the chosen plan, and each checked alternative not noted as
checked on shortened copies) must have exactly the figures the second
gives it, where the second checked it too. Prints how many plans took
another plan's whole check (whole_checks_shared), how many were compared,
and each that differs.

whole-figures.py SHORT.mlir WHOLE.mlir"""
import re
import sys


def plans(path):
    """Each plan of the record: name -> (seconds, bytes, whole-checked)."""
    head = open(path).readline()
    found = {}
    for entry in re.findall(r"\{checked = [^{}]*\}", head):
        name = re.search(r'plan = "([^"]*)"', entry).group(1)
        found[name] = (float(re.search(r"step_seconds = ([0-9.e+-]+)", entry).group(1)),
                       int(re.search(r"memory_bytes = (\d+)", entry).group(1)),
                       "checked = true" in entry and "checked on" not in entry)
    tail = head[head.rfind("}]"):]
    field = lambda name, pattern: re.search(name + r" = " + pattern, tail).group(1)
    found[field("plan", r'"([^"]*)"')] = (float(field("step_seconds", r"([0-9.e+-]+)")),
                                          int(field("memory_bytes", r"(\d+)")), True)
    shared = re.search(r"whole_checks_shared = (\d+)", tail)
    return found, int(shared.group(1)) if shared else 0


short, shared = plans(sys.argv[1])
whole, _ = plans(sys.argv[2])
print(f"whole checks shared: {shared}")
compared = 0
for name, (seconds, size, checked) in sorted(short.items()):
    other = whole.get(name)
    if not checked or other is None or not other[2]:
        continue
    compared += 1
    if (seconds, size) != other[:2]:
        print(f"off: {name} {seconds} s {size} B vs {other[0]} s {other[1]} B")
print(f"compared: {compared}")
