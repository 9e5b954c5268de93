"""Typed records of a child and its runs: what one child did (ChildRun), what it reported of each run
(Run), what the parent decided about it (Verdict), a check's result (TestResult); and the report's wire form.

The child writes plain JSON (grading/child.py, through encode; never pickled back) and the parent reads
it with the strict decode; then it turns each entry of the report into a Run with Run.from_report,
which takes only the fields it knows and gives every missing one its empty value, so a field the
child did not send reads as "not seen", never as a KeyError. lessons.check turns the in-process
run_case result into a Run the same way: the grader and the notebook judge the same record.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np


@dataclass
class ChildRun:
    """One confined child, as the parent saw it end: its outcome, its report and what it was sent."""

    outcome: str  # "ok", "timeout", "crash", "memory", "import_error", "exited", "flooding", "forged", "grader_error"
    detail: str = ""
    report: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)   # what was sent (with inputs)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    speed_job: dict[str, Any] | None = None  # what the speed run was given (the parent checks its output)
    imported: bool = False       # the submission loaded: the runs it finished can be graded
    files: dict[str, str] = field(default_factory=dict)   # files collected from the scratch folder
    status: dict[str, Any] = field(default_factory=dict)  # the warden's own observation
    stopped: str = ""            # what the child was doing when it was stopped (timeouts, crashes)


@dataclass(frozen=True)
class RunError:
    """An exception the run raised (type, the submission's line, message), or what stands for a run
    that never finished (type Timeout, Crash, MemoryLimit, OutputFlooding, NotRun)."""

    type: str
    message: str = ""
    where: str = ""

    @classmethod
    def from_report(cls, e: Any) -> RunError | None:
        if not isinstance(e, dict):
            return None
        return cls(str(e.get("type") or "Error"), str(e.get("message") or ""), str(e.get("where") or ""))

    def describe(self) -> str:
        return " ".join(filter(None, (self.type, self.where)))


@dataclass(frozen=True)
class Run:
    """One run of the submission on one case (a case, a launch configuration, a schedule).

    outputs: the output arrays as the run left them (None: it did not finish); launches: (kernel,
    grid, block) of every launch it made; bytes: global traffic traced on the simulator (None on a
    GPU); last_writer: ((array, flat index), (block, thread)) pairs; own_launches / entry_launches:
    launches of the submission's own kernels / of the entry itself; foreign: kernels it launched but
    did not write; arrays: per launch, the names of the arrays it read and wrote ("temporary 1" for one
    the submission allocated; simulator only); provenance: per output, elements last changed by the host or a foreign kernel;
    entry_problem: why the entry cannot be graded at all. A "data" exercise's run has value (what
    the entry returned), ran (what the judge ran with it) and run_error instead."""

    id: int
    outputs: dict[str, np.ndarray] | None = None
    error: RunError | None = None
    launches: list[tuple[Any, ...]] | None = None
    bytes: int | None = None
    last_writer: list[tuple[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]] = field(default_factory=list)
    own_launches: int | None = None     # None: a report from before provenance was recorded
    entry_launches: int = 0
    foreign: list[str] = field(default_factory=list)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    allocations: list[tuple[int, int]] | None = None
    arrays: list[dict[str, list[str]]] | None = None   # per launch, the arrays it read and wrote (simulator)
    entry_problem: str | None = None
    value: Any = None
    ran: Any = None
    run_error: RunError | None = None

    @classmethod
    def from_report(cls, d: dict[str, Any]) -> Run:
        """A Run from one entry of the child's report (or run_case's dict); unknown keys are ignored."""
        lw = d.get("last_writer") or []
        rows = lw.items() if isinstance(lw, dict) else (((r[0], r[1]), (r[2], r[3])) for r in lw)
        problem = d.get("entry_problem")
        if isinstance(problem, dict):  # a data run names its problem as an error record
            problem = problem.get("message")
        known = {f.name for f in fields(cls)}
        plain = {k: v for k, v in d.items() if k in known and k not in
                 ("error", "run_error", "last_writer", "entry_problem", "id", "provenance", "foreign")}
        return cls(id=int(d.get("id", -1)), error=RunError.from_report(d.get("error")),
                   run_error=RunError.from_report(d.get("run_error")), entry_problem=problem,
                   last_writer=[((str(lab), int(flat)), (tuple(blk), tuple(thr))) for (lab, flat), (blk, thr) in rows],
                   provenance=d.get("provenance") or {}, foreign=list(d.get("foreign") or []), **plain)

    @classmethod
    def missing(cls, id: int, type: str, message: str) -> Run:
        """What stands for a run that never finished (a timeout, a crash, or one never started)."""
        return cls(id=id, error=RunError(type, message))

    @property
    def finished(self) -> bool:
        """Did the run itself finish (an exception of the submission's own counts; a hang does not)?"""
        return self.error is None or self.error.type not in ("NotRun", "Timeout")

    def data_failure(self, about: str) -> str | None:
        """A data exercise's run that cannot be scored, named (`about`: the case): the error it raised, or that
        it returned nothing; None when it returned what its judge ran (a dict)."""
        if self.run_error is not None:
            return f"{about}: {self.run_error.type}: {self.run_error.message[:400]}"
        return None if isinstance(self.ran, dict) else f"{about}: the run returned nothing"


@dataclass(frozen=True)
class Verdict:
    """The decision on one run: ok; kind "ok", "error" (it raised, or a bad access was found),
    "work" (the output is not the student's kernel's), "wrong" (values); why (the feedback line,
    naming the run); hint: (key of verdict.HINTS, its arguments) or None."""

    ok: bool
    kind: str
    why: str = ""
    hint: tuple[str, dict[str, Any]] | None = None


@dataclass
class TestResult:
    """One check's result, as Gradescope's results.json holds it."""

    name: str
    score: float
    max_score: float
    status: str              # "passed", "failed", "skipped"
    output: str
    visibility: str = "visible"


# -- the child's report: strict JSON, never pickle -----------------------------------------------

_DTYPES = {"<f4", "<f8", "<i4", "<i8", "<u4", "<u8", "|u1", "|i1", "|b1", "<f2", "<i2", "<u2"}


class ReportError(ValueError):
    """The child's report is not what the grader's child writes."""


def encode(obj: Any) -> Any:
    """JSON-ready: arrays as {"__nd__": [dtype, shape, base64]}, tuples as lists."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"__nd__": [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]}
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def decode(obj: Any, depth: int = 0) -> Any:
    """encode's inverse, refusing what the child's encode never writes (other dtypes, deep nesting)."""
    if depth > 32:
        raise ReportError("nested too deeply")
    if isinstance(obj, dict):
        if set(obj) == {"__nd__"}:
            try:
                dtype, shape, data = obj["__nd__"]
                if dtype not in _DTYPES or not all(isinstance(s, int) and s >= 0 for s in shape):
                    raise ReportError(f"array of dtype {dtype!r}")
                return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()
            except (TypeError, ValueError) as e:
                raise ReportError(f"bad array: {e}") from None
        return {k: decode(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v, depth + 1) for v in obj]
    return obj
