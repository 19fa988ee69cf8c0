"""The par.auto_shard record of an --auto-shard output, for the scripts
that compare two outputs (shortened-agree.py, whole-figures.py)."""
import re


def record(path):
    """The chosen plan and its figures, the record's counts, and each
    alternative (plan, checked, seconds, bytes, reason)."""
    head = open(path).readline()
    found = re.search(r"par\.auto_shard = (\{.*\})\}? \{$", head.strip())
    text = found.group(1) if found else head
    alternatives = []
    for entry in re.findall(r"\{checked = [^{}]*\}", text):
        alternatives.append({
            "plan": re.search(r'plan = "([^"]*)"', entry).group(1),
            "checked": "checked = true" in entry,
            "seconds": float(re.search(r"step_seconds = ([0-9.e+-]+)", entry).group(1)),
            "bytes": int(re.search(r"memory_bytes = (\d+)", entry).group(1)),
            "reason": re.search(r'reason = "([^"]*)"', entry).group(1),
        })
    tail = text[text.rfind("}]"):]
    field = lambda name, pattern: re.search(name + r" = " + pattern, tail).group(1)
    shared = re.search(r"whole_checks_shared = (\d+)", tail)
    return {
        "plan": field("plan", r'"([^"]*)"'),
        "seconds": float(field("step_seconds", r"([0-9.e+-]+)")),
        "bytes": int(field("memory_bytes", r"(\d+)")),
        "shortened": int(field("shortened_checks", r"(\d+)")),
        "whole shared": int(shared.group(1)) if shared else 0,
        "alternatives": alternatives,
    }
