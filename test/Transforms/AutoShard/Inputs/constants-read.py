#!/usr/bin/env python3
"""Fails when a planned module (MLIR text on stdin or in argv[1]) defines a
par.constant that nothing reads: the planner builds each constant in a
layout some reader needs, never one only its copies are read in."""
import re
import sys

text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
defined = re.findall(r"(%[\w.]+) = par\.constant", text)
if not defined:
    sys.exit("no par.constant in the input")
unread = [name for name in defined
          if not re.search(re.escape(name) + r"(?![\w.])", text.split(f"{name} = par.constant", 1)[1])]
if unread:
    sys.exit(f"{len(unread)} of {len(defined)} constants are never read: {', '.join(unread[:5])}")
print(f"all {len(defined)} constants are read")
