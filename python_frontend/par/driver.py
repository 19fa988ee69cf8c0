"""Running par-opt and surfacing its diagnostics as exceptions."""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence

_DIAG = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|remark|note): (?P<msg>.*)$")


@dataclasses.dataclass
class Diagnostic:
    """One compiler message with its source location."""
    file: str
    line: int
    column: int
    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {self.message}"


class ParError(RuntimeError):
    """A par tool failed; `diagnostics` holds its located messages."""

    def __init__(self, tool: str, returncode: int, stderr: str,
                 diagnostics: List[Diagnostic]):
        self.tool = tool
        self.returncode = returncode
        self.stderr = stderr
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        if errors:
            first = str(errors[0])
        else:
            lines = stderr.strip().splitlines()
            first = lines[-1] if lines else ""
        super().__init__(f"{tool} failed (exit {returncode}): {first}")


def parse_diagnostics(text: str) -> List[Diagnostic]:
    """Extracts `file:line:col: severity: message` lines."""
    found = []
    for line in text.splitlines():
        match = _DIAG.match(line)
        if match:
            found.append(Diagnostic(match["file"], int(match["line"]), int(match["col"]),
                                    match["sev"], match["msg"]))
    return found


def find_tool(name: str) -> str:
    """Locates a par tool: $PAR_BUILD_DIR/bin, the repository's build/bin,
    then PATH."""
    candidates = []
    if os.environ.get("PAR_BUILD_DIR"):
        candidates.append(Path(os.environ["PAR_BUILD_DIR"]) / "bin" / name)
    candidates.append(Path(__file__).resolve().parents[2] / "build" / "bin" / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise FileNotFoundError(
        f"cannot find {name}: build par first (scripts/build.sh) or set PAR_BUILD_DIR")


def par_opt(mlir: str, args: Sequence[str] = (), *, source_name: str = "<python>",
            timeout: Optional[float] = 300) -> str:
    """Runs par-opt on MLIR text with `args`; returns its standard output.

    Raises ParError carrying the compiler's located diagnostics on failure.
    """
    tool = find_tool("par-opt")
    proc = subprocess.run([tool, "-", *args], input=mlir, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        stderr = proc.stderr.replace("<stdin>", source_name)
        raise ParError("par-opt", proc.returncode, stderr, parse_diagnostics(stderr))
    return proc.stdout


# par-run reports failures as one line, e.g.
#   par-run: error: rank 0, step 1, instruction 7 (cross_entropy at model.py:12:8): ...
_RUN_ERROR = re.compile(r"^par-run: error: (?P<msg>.*)$")
_RUN_LOC = re.compile(r"\((?:[\w ]+?) at (?P<file>[^():]+):(?P<line>\d+):(?P<col>\d+)\)")


def parse_run_errors(text: str) -> List[Diagnostic]:
    """Extracts par-run's `par-run: error:` lines, located at the MLIR
    location they quote when there is one."""
    found = []
    for line in text.splitlines():
        match = _RUN_ERROR.match(line.strip())
        if not match:
            continue
        message = match["msg"]
        loc = _RUN_LOC.search(message)
        if loc:
            found.append(Diagnostic(loc["file"], int(loc["line"]), int(loc["col"]), "error",
                                    message))
        else:
            found.append(Diagnostic("<par-run>", 0, 0, "error", message))
    return found


def par_run(program: str, args: Sequence[str] = (), *,
            timeout: Optional[float] = 600) -> str:
    """Runs par-run on a program file; returns its standard output.

    Raises ParError carrying the runtime's error lines (with the MLIR
    location of the failing instruction) on failure.
    """
    tool = find_tool("par-run")
    proc = subprocess.run([tool, str(program), *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        stderr = proc.stderr + ("\n" + proc.stdout if proc.stdout else "")
        raise ParError("par-run", proc.returncode, stderr, parse_run_errors(stderr))
    return proc.stdout
