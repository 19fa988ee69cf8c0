#!/usr/bin/env python3
"""Where a step's time goes, from a `par-run --trace` file: time per op
and the slowest instructions (op and source location), over the steps
after the first (which warms up). On the CUDA backend the trace times each
instruction to the end of its work, so the table is the GPU's time.
"""
import argparse
import collections
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--rank", type=int, default=0,
                        help="the rank whose instructions are summed (default 0)")
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    spans = [e for e in events if e.get("ph") == "X" and e.get("tid") is not None
             and e.get("pid", 0) == args.rank]
    steps = sorted({e.get("args", {}).get("step", 0) for e in spans})
    timed = [e for e in spans if len(steps) < 2 or e["args"].get("step") != steps[0]]
    # Instructions only: step spans and a pipeline's schedule slots
    # enclose them.
    timed = [e for e in timed if e.get("tid") in (0, 1)]  # Compute, Communication
    counted = max(1, len({e["args"].get("step") for e in timed}))
    per_op = collections.defaultdict(lambda: [0, 0.0])
    per_inst = collections.defaultdict(lambda: [0, 0.0])
    for e in timed:
        per_op[e["name"]][0] += 1
        per_op[e["name"]][1] += e["dur"]
        key = (e["name"], e["args"].get("loc", "?"))
        per_inst[key][0] += 1
        per_inst[key][1] += e["dur"]
    total = sum(v[1] for v in per_op.values()) or 1.0
    print(f"# {args.trace}, rank {args.rank}: {counted} step(s) timed, "
          f"{total / counted / 1e3:.2f} ms per step")
    print("| op | calls/step | ms/step | share |")
    print("|---|--:|--:|--:|")
    for name, (calls, us) in sorted(per_op.items(), key=lambda kv: -kv[1][1]):
        print(f"| {name} | {calls // counted} | {us / counted / 1e3:.2f} | {us / total:.1%} |")
    print(f"\n| slowest instructions (op at source) | calls/step | ms/step |")
    print("|---|--:|--:|")
    for (name, loc), (calls, us) in sorted(per_inst.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {name} at {loc} | {calls // counted} | {us / counted / 1e3:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
