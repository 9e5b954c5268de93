"""compute-sanitizer on a GPU: memcheck (bad global accesses) and racecheck (shared-memory hazards).

The submission runs its public cases in a child process under the sanitizer (sandbox.run_child
with a command prefix), with the same limits as any child. On the simulator the same bugs are
caught otherwise: an out-of-bounds index raises IndexError, and races show under perturbed
thread schedules. Nothing here runs there.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..runtime import ON_GPU
from ..core import Exercise
from .sandbox import run_child

_CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer",)
_MANGLED = re.compile(r"\[abi:[^\]]*\]")  # numba's ABI tag: a long hash, no help to a student
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:errors?|hazards?)")


@dataclass(frozen=True)
class SanitizerResult:
    status: str   # "clean", "errors", "skipped" (no GPU or no sanitizer), "failed" (it could not run)
    errors: int
    report: str   # the first lines of what it found, or why it did not run


def find_sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next((p for p in _CANDIDATES if Path(p).exists()), None)


def sanitize(ex: Exercise, source: str, tool: str, timeout_s: float = 300, memory_bytes: int = 8 << 30) -> SanitizerResult:
    """Run the public cases under `compute-sanitizer --tool TOOL`."""
    if not ON_GPU:
        return SanitizerResult("skipped", 0, "compute-sanitizer needs a GPU")
    exe = find_sanitizer()
    if exe is None:
        return SanitizerResult("skipped", 0, "compute-sanitizer is not installed here")
    with tempfile.TemporaryDirectory(prefix="kl-sanitizer-") as tmp:
        log = Path(tmp) / f"{tool}.txt"
        run = run_child(ex, source, timeout_s, memory_bytes, public_only=True,
                        prefix=(exe, "--tool", tool, "--print-limit", "20", "--log-file", str(log),
                                # the CUDA bindings probe driver entry points that may not exist:
                                # API errors are not the student's; kernels' memory errors are
                                "--report-api-errors", "no"))
        text = log.read_text(errors="replace") if log.exists() else ""
    found = [int(m) for m in _SUMMARY.findall(text)]
    if not found:
        why = run.detail or "no summary in its log"
        return SanitizerResult("failed", 0, f"{tool} did not finish ({run.outcome}: {why})")
    errors = sum(found)
    lines = [_MANGLED.sub("", ln.removeprefix("========= ")).rstrip() for ln in text.splitlines()
             if ln.strip("= \n") and "SUMMARY" not in ln and "COMPUTE-SANITIZER" not in ln and "Host Frame" not in ln]
    return SanitizerResult("errors" if errors else "clean", errors, "\n".join(lines[:8]))
