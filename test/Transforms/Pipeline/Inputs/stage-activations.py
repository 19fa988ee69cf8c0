"""Prints, for each --report given, the most activation bytes live at once
on the first stage, over the first report's (one micro-batch's worth)."""
import re
import sys


def first_stage_activations(path):
    text = open(path).read()
    stage0 = text.split("== report of @gpt.stage1")[0]
    match = re.search(r"^  activations\s+\d+\s+\d+\s+(\d+)", stage0, re.M)
    if not match:
        sys.exit(f"{path}: no activations row in the first stage's report")
    return int(match.group(1))


unit = first_stage_activations(sys.argv[1])
for path in sys.argv[2:]:
    print(f"{first_stage_activations(path) / unit:.1f}")
