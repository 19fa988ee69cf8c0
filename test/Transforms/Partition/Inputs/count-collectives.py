#!/usr/bin/env python3
"""Counts the collectives of a --par-comm-report by kind, source line (file
name and line) and elements: one line per group, `KIND FILE:LINE ELEMENTS x
COUNT`, sorted; collectives of the loss and embedding (models.py, nn.py:97
and 102) are left out, so what remains is the layers'."""
import collections
import re
import sys

counts = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"\s+\d+\s+(\w+)(?: \w+)?\s+\[\S+\]\s+\d+\s+(\d+)\s+.*?\s(\S+\.py):(\d+)", line)
    if not m:
        continue
    kind, elements, path, lineno = m.groups()
    if path.endswith("models.py") or (path.endswith("nn.py") and lineno in ("97", "102")):
        continue
    if kind == "all_reduce":  # the layer norms' weight gradients
        continue
    counts[(kind, f"{path.split('/')[-1]}:{lineno}", int(elements))] += 1
for (kind, where, elements), n in sorted(counts.items()):
    print(f"{kind} {where} {elements} x {n}")
