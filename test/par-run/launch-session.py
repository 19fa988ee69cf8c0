#!/usr/bin/env python3
"""Checks how par-run launches its ranks through mpirun.

usage: launch-session.py PAR_RUN PROGRAM WORKDIR

- Several launches started at once, sharing one TMPDIR, all succeed: each
  keeps Open MPI's session files in a directory of its own.
- That directory is gone when par-run returns.
- A SIGTERM sent to par-run alone reaches mpirun: the ranks stop, par-run
  exits non-zero, and the directory is gone.
Prints one "ok" line per check; exits 1 on the first that fails.
"""
import glob
import os
import signal
import subprocess
import sys
import time

par_run, program, work = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = os.path.join(work, "tmp")
os.makedirs(tmp, exist_ok=True)
env = dict(os.environ, TMPDIR=tmp)


def fail(message):
    print(f"launch-session: FAIL: {message}")
    sys.exit(1)


def left_over():
    return sorted(os.listdir(tmp))


runs = [subprocess.Popen([par_run, program, "-np", "2", "--steps", "2"],
                         env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for _ in range(3)]
for run in runs:
    out, _ = run.communicate(timeout=300)
    if run.returncode != 0:
        fail(f"a launch beside others exited {run.returncode}:\n{out}")
print("ok: 3 launches at once")
if left_over():
    fail(f"left in TMPDIR: {left_over()}")
print("ok: session directories removed")

long_run = subprocess.Popen(
    [par_run, program, "-np", "2", "--steps", "1000000000", "--log-every",
     "1000000"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    text=True)
deadline = time.time() + 120
while not glob.glob(os.path.join(tmp, "par-run.*", "*")):
    if long_run.poll() is not None:
        fail(f"the long run ended early: {long_run.stderr.read()}")
    if time.time() > deadline:
        long_run.kill()
        fail("no session files appeared under a par-run.* directory")
    time.sleep(0.1)
time.sleep(1)
long_run.send_signal(signal.SIGTERM)
try:
    long_run.wait(timeout=120)
except subprocess.TimeoutExpired:
    long_run.kill()
    fail("par-run did not stop within 120 s of SIGTERM")
if long_run.returncode == 0:
    fail("par-run exited 0 after SIGTERM")
print("ok: SIGTERM stops the ranks")
if left_over():
    fail(f"left in TMPDIR after SIGTERM: {left_over()}")
print("ok: session directory removed after SIGTERM")
