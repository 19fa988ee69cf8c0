"""Checks par-run --json's bubble event: the bubble replayed from the
measured instruction times is within `--within` of the compiler's
prediction. Prints both."""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("log")
parser.add_argument("--within", type=float, default=0.05)
args = parser.parse_args()
events = [json.loads(line) for line in open(args.log) if line.startswith("{")]
bubble = next((e["bubble"] for e in events if e.get("event") == "bubble"), None)
if bubble is None:
    sys.exit(f"{args.log}: no bubble event")
predicted, replayed = bubble["predicted"], bubble["replayed"]
ok = abs(predicted - replayed) <= args.within
print(f"{bubble['schedule']}: predicted {predicted:.3f}, replayed {replayed:.3f}, "
      f"{len(bubble['measured'])} stages measured: {'ok' if ok else 'too far apart'}")
sys.exit(0 if ok else 1)
