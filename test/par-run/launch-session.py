#!/usr/bin/env python3
"""Checks how par-run launches its ranks through mpirun.

usage: launch-session.py PAR_RUN PROGRAM WORKDIR

- Several launches started at once, sharing one TMPDIR, all succeed: each
  keeps Open MPI's session files in a directory of its own.
- That directory is gone when par-run returns.
- A SIGTERM sent to par-run alone reaches mpirun: par-run exits non-zero,
  no rank is left running, and the directory is gone.
- A SIGINT sent to par-run's whole process group (a terminal's Ctrl-C, or
  `timeout`) reaches mpirun once: it stops the ranks without aborting
  ("abort is already in progress" is what a second copy makes it print).
Prints one "ok" line per check; exits 1 on the first that fails, after
killing whatever of the runs is left.
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


def running():
    """Pids of processes (par-run, mpirun, ranks) whose command line names
    this test's program."""
    pids = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                line = f.read().split(b"\0")
        except OSError:
            continue
        if program.encode() in line and int(path.split("/")[2]) != os.getpid():
            pids.append(int(path.split("/")[2]))
    return pids


def fail(message):
    for pid in running():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    print(f"launch-session: FAIL: {message}")
    sys.exit(1)


def nothing_left(after):
    """Fails where a session directory outlived the runs."""
    left = sorted(os.listdir(tmp))
    if left:
        fail(f"left in TMPDIR {after}: {left}")


def all_stopped():
    deadline = time.time() + 30
    while running():
        if time.time() > deadline:
            fail(f"processes of the run still alive: {running()}")
        time.sleep(0.1)


def start_long():
    return subprocess.Popen(
        [par_run, program, "-np", "2", "--steps", "1000000000", "--log-every",
         "1000000"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_session(run):
    deadline = time.time() + 120
    while not glob.glob(os.path.join(tmp, "par-run.*", "*")):
        if run.poll() is not None:
            fail(f"the long run ended early: {run.stderr.read()}")
        if time.time() > deadline:
            fail("no session files appeared under a par-run.* directory")
        time.sleep(0.1)
    time.sleep(1)


def stopped(run, how):
    try:
        _, err = run.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        fail(f"par-run did not stop within 120 s of {how}")
    if run.returncode == 0:
        fail(f"par-run exited 0 after {how}")
    all_stopped()
    return err


runs = [subprocess.Popen([par_run, program, "-np", "2", "--steps", "2"],
                         env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
        for _ in range(3)]
for run in runs:
    out, _ = run.communicate(timeout=300)
    if run.returncode != 0:
        fail(f"a launch beside others exited {run.returncode}:\n{out}")
print("ok: 3 launches at once")
nothing_left("after them")
print("ok: session directories removed")

run = start_long()
wait_for_session(run)
run.send_signal(signal.SIGTERM)
stopped(run, "SIGTERM")
print("ok: SIGTERM stops the ranks")
nothing_left("after SIGTERM")
print("ok: session directory removed after SIGTERM")

run = start_long()
wait_for_session(run)
os.killpg(run.pid, signal.SIGINT)
err = stopped(run, "SIGINT to its process group")
if "abort is already in progress" in err:
    fail(f"mpirun got the signal more than once:\n{err}")
nothing_left("after SIGINT")
print("ok: SIGINT to the group stops the ranks once")
