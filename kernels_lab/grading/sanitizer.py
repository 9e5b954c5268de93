"""compute-sanitizer on a GPU: memcheck (bad global accesses) and racecheck (shared-memory hazards).

The submission runs in a confined child under the sanitizer (lifecycle.run_child with a command
prefix; its log goes to the child's scratch folder). memcheck runs every graded case, public and
hidden, in every launch configuration, and each error is tied to the run it happened in: the
child reports the device address and size of every array of every run (all kept alive until the
end, so no address is reused), and an error "N bytes after the nearest allocation at ADDR" names
ADDR. An error that names no allocation of ours is charged to every run (it happened, and the
grader cannot say where). racecheck runs the public cases. On the simulator the same bugs are
caught otherwise: an out-of-bounds index raises IndexError, and races show as results that differ
between perturbed thread schedules. Nothing here runs there.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from ..backend import BACKEND
from ..core import Exercise
from .cases import build_cases, run_key
from .lifecycle import run_child

_CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer",)
_MANGLED = re.compile(r"\[abi:[^\]]*\]")  # numba's ABI tag: a long hash, no help to a student
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (\d+) (?:errors?|hazards?)")
_RECORD = re.compile(r"^=+\s+(Invalid |Race reported|Program hit|Error|Out-of-range|Misaligned|Warning)", re.I)
_NEAREST = re.compile(r"nearest allocation at (0x[0-9a-fA-F]+) of size (\d+)")
_ADDRESS = re.compile(r"(?:Address|Access at) (0x[0-9a-fA-F]+)")
SLOWDOWN = 5.0   # a run under a sanitizer takes this many times its usual limit
# error records the log keeps: every run's must be there to be charged to it (with 100, the H200 run
# printed only the first public run's, and the hidden runs' bad accesses cost nothing)
PRINT_LIMIT = 10_000


@dataclass(frozen=True)
class SanitizerResult:
    status: str   # "clean", "errors", "skipped" (no GPU or no sanitizer), "failed" (it could not run)
    errors: int
    report: str   # the first lines of what it found, or why it did not run
    by_case: dict[tuple[int, int], int] = field(default_factory=dict)  # cases.run_key -> errors in that run
    unattributed: int = 0                                              # errors tied to no run of ours
    first: dict[tuple[int, int], str] = field(default_factory=dict)    # cases.run_key -> its first error


def find_sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next((p for p in _CANDIDATES if Path(p).exists()), None)


def _records(text: str) -> list[list[str]]:
    """The log split into error records (each starts with a line like '========= Invalid __global__ read')."""
    records: list[list[str]] = []
    for line in text.splitlines():
        if _RECORD.match(line) and "SUMMARY" not in line:
            records.append([line])
        elif records and line.startswith("=") and "SUMMARY" not in line:
            records[-1].append(line)
    return records


def _clean(line: str) -> str:
    return _MANGLED.sub("", re.sub(r"^=+\s*", "", line)).rstrip()


def attribute(text: str, allocations: dict[int, list[tuple[int, int]]]) -> tuple[dict[int, int], int, dict[int, str]]:
    """Tie each error record of a memcheck log to the run whose array it touched (see the module doc)."""
    owner: dict[int, int] = {}
    spans: list[tuple[int, int, int]] = []
    for run_id, allocs in allocations.items():
        for ptr, nbytes in allocs:
            owner[ptr] = run_id
            spans.append((ptr, ptr + max(nbytes, 1), run_id))
    by_case: dict[int, int] = {}
    first: dict[int, str] = {}
    unattributed = 0
    for rec in _records(text):
        body = "\n".join(rec)
        run_id = None
        if m := _NEAREST.search(body):
            run_id = owner.get(int(m.group(1), 16))
        if run_id is None and (m := _ADDRESS.search(body)):
            addr = int(m.group(1), 16)
            run_id = next((r for lo, hi, r in spans if lo <= addr < hi), None)
        if run_id is None:
            unattributed += 1
            continue
        by_case[run_id] = by_case.get(run_id, 0) + 1
        first.setdefault(run_id, "; ".join(_clean(ln) for ln in rec[:3]))
    return by_case, unattributed, first


def sanitize(ex: Exercise, source: str, tool: str, timeout_s: float = 20.0, memory_bytes: int = 8 << 30,
             public_only: bool | None = None, hung: frozenset[tuple[int, int]] = frozenset(),
             hidden: int | None = None, run_limit_s: float | None = None) -> SanitizerResult:
    """Run the exercise's graded cases under `compute-sanitizer --tool TOOL` (memcheck: all of them;
    racecheck: the public ones). hung: run keys that already timed out in the graded child; they are
    left out (they have no credit to lose, and a spin under the sanitizer would cost SLOWDOWN times the
    run's time limit); hidden: the grade's hidden seed (the same hidden inputs as its graded child);
    run_limit_s: seconds each run may take under the sanitizer (default timeout_s x SLOWDOWN; the grader
    gives less once a run has hung)."""
    if not BACKEND.on_device:
        return SanitizerResult("skipped", 0, "compute-sanitizer needs a GPU")
    exe = find_sanitizer()
    if exe is None:
        return SanitizerResult("skipped", 0, "compute-sanitizer is not installed here")
    public = (tool != "memcheck") if public_only is None else public_only
    cases = build_cases(ex, public_only=public, perturbed=False, probes=False, leave_out=hung, hidden=hidden)
    if not cases:
        return SanitizerResult("skipped", 0, "every run it would check already timed out")
    log = f"{tool}.txt"
    if run_limit_s is not None:
        timeout_s = min(timeout_s, run_limit_s / SLOWDOWN)
    run = run_child(ex, source, timeout_s, memory_bytes, cases=cases, collect=(log,), slowdown=SLOWDOWN,
                    prefix=(exe, "--tool", tool, "--print-limit", str(PRINT_LIMIT), "--show-backtrace", "no",
                            "--log-file", "{scratch}/" + log,
                            # the CUDA bindings probe driver entry points that may not exist:
                            # API errors are not the student's; kernels' memory errors are
                            "--report-api-errors", "no"))
    text = run.files.get(log, "")
    found = [int(m) for m in _SUMMARY.findall(text)]
    if not found:
        why = run.detail or "no summary in its log"
        return SanitizerResult("failed", 0, f"{tool} did not finish ({run.outcome}: {why})")
    errors = sum(found)
    lines = [_clean(ln) for ln in text.splitlines()
             if ln.strip("= \n") and "SUMMARY" not in ln and "COMPUTE-SANITIZER" not in ln and "Host Frame" not in ln]
    allocations: dict[int, list[tuple[int, int]]] = {}
    for c in (run.report or {}).get("cases", []):
        if isinstance(c, dict) and isinstance(c.get("allocations"), list):
            allocations[c.get("id")] = [(int(p), int(n)) for p, n in c["allocations"]]
    by_case, unattributed, first = attribute(text, allocations) if errors else ({}, 0, {})
    # errors the log does not tie to a run (it could not be split into records, or it stopped at the
    # print limit) happened somewhere: charge every run with them
    unattributed = max(unattributed, errors - sum(by_case.values()))
    key = {c["id"]: run_key(ex, c) for c in cases}  # this child's run ids -> ids the grade's run shares
    return SanitizerResult("errors" if errors else "clean", errors, "\n".join(lines[:8]),
                           {key[i]: n for i, n in by_case.items()}, unattributed,
                           {key[i]: line for i, line in first.items()})

