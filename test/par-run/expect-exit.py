#!/usr/bin/env python3
"""Runs a command and checks its exit code.

usage: expect-exit.py CODE OUTPUT COMMAND...
Writes the command's stdout and stderr together to OUTPUT and exits 1 when
the command's exit code is not CODE.
"""
import subprocess
import sys

code, output, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
with open(output, "w") as out:
    p = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                       timeout=600)
if p.returncode != code:
    sys.stdout.write(open(output).read())
    print(f"expect-exit: exit code {p.returncode}, expected {code}")
    sys.exit(1)
