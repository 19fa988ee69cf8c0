"""Prints each rank's schedule slots (the trace's "slot" events) in one
step, in time order."""
import json
import sys

trace = json.load(open(sys.argv[1]))
step = int(sys.argv[2])
slots = {}
for event in trace["traceEvents"]:
    if event.get("cat") == "slot" and event["args"]["step"] == step:
        slots.setdefault(event["pid"], []).append((event["ts"], event["name"]))
for rank in sorted(slots):
    print(f"rank {rank}: " + " ".join(name for _, name in sorted(slots[rank])))
