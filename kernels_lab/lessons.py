"""Helpers the Jupyter lessons call: set-up, the student's own checks, committed GPU results;
and the lessons' sources, read for the notebook builder and for the tests.

A student's check runs the same cases and verdicts as the grader (kernels_lab.grading), in
the notebook's own process (it is the student's own code), and raises AssertionError with
the feedback when something is wrong, so an unfilled exercise fails its check.

Each lesson is one Jupytext percent script, notebooks/lessons/NN_topic.py (the convention is
in notebooks/README.md); `read_lesson` parses one, `solution_source(exercise)` returns the
solution cell of an exercise exactly as the solution notebook holds it (what the grader takes
from a submitted notebook), so tests grade the lessons' own solutions.
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backend import BACKEND
from .runtime import device_facts

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "figures" / "data"
SOURCES = ROOT / "notebooks" / "lessons"
MARKER = "# EXERCISE:"  # the grader's marker (grading/submission.py): the cell it takes from a notebook

# numba warns when a grid has fewer blocks than the GPU has SMs; the lessons launch small grids
# on purpose (one block per tensor, a check's 2 x 64 threads): noise in a lesson's output.
_LOW_OCCUPANCY = r".*Grid size \d+ will likely result in GPU under-utilization"


def setup() -> str:
    """Say where the lesson runs; make the simulator's barriers faster; silence numba's
    low-occupancy warning (and only that one)."""
    warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
    if BACKEND.python_threads:
        sys.setswitchinterval(5e-5)
        return ("Running on numba's CUDA simulator: small sizes, launches and bytes are real, "
                "timings come from the committed H200 results in figures/data/.")
    return f"Running on {device_facts().describe()}: sizes are large and timings are measured live."


@dataclass(frozen=True)
class Judged:
    """What lessons.check found: the checks made in the notebook (grading.records.TestResult, the
    grader's own), the hints, and how many runs were made (perturbed schedules included)."""

    exercise: str
    tests: list[Any]
    hints: list[str]
    runs: int
    public_runs: int
    data: bool = False              # a data exercise: the judge's own probes, named checks rather than runs
    not_made: tuple[str, ...] = ()  # data exercises: the checks this machine cannot make, with why (the grader's)

    @property
    def passed(self) -> bool:
        return all(t.status == "passed" for t in self.tests)

    def explain(self) -> str:
        if self.passed and self.data:
            made = f"{self.exercise}: every check made here passed ({', '.join(t.name for t in self.tests)})"
            return made + "".join(f"\n  not checked here: {why}" for why in self.not_made)
        if self.passed:
            return f"{self.exercise}: all {self.runs} runs correct"
        from .grading.judge import CHECKS
        got, most = sum(t.score for t in self.tests), sum(t.max_score for t in self.tests)
        lines = [f"{t.name}: {t.score:g}/{t.max_score:g}" + (f" ({CHECKS[t.name].says})" if t.name in CHECKS else "")
                 + ":\n    " + t.output.replace("\n", "\n    ") for t in self.tests if t.status != "passed"]
        return (f"{self.exercise}: {got:g} of {most:g} points on the {self.public_runs} public runs\n  "
                + "\n  ".join(lines) + ("\nhints:\n  " + "\n  ".join(self.hints) if self.hints else ""))


def judged(exercise: str, entry: Any) -> Judged:
    """The grader's checks of `exercise` (kernels_lab.grading.judge) on `entry`, run in this process on
    the public cases: the same verdicts, budgets, allowed imports and words as `kernels-lab grade`.
    Checks that need the grader (the hidden cases, the compile gate, speed; racecheck on a GPU) are
    left to it."""
    from .grading import judge as J
    from .grading.child import forbidden_import, run_case, run_data_case
    from .grading.exercises import get_exercise
    from .grading.grade import machine
    from .grading.records import Run
    from .grading.cases import build_cases, load_judge
    from .grading.verdict import case_verdict
    ex = get_exercise(exercise)
    if entry is None:
        raise AssertionError(f"define {ex.entry} first")
    if (refused := forbidden_import(entry)) is not None:
        raise AssertionError(f"{exercise}: {refused}")
    here = machine(sanitizers=False, notebook=True)
    cases = build_cases(ex, public_only=True)
    if ex.kind == "data":  # the judge's own runs, here in the notebook's process
        runs = {c["id"]: Run.from_report(run_data_case(entry, load_judge(ex), c, ex.entry)) for c in cases}
        why_not = {name: J.not_counted(ex, name, here) for name in ex.points}
        skipped = {name: why is not None for name, why in why_not.items()}
        tests = [t for t in J.judge_data(ex, cases, runs, skipped, here) if t.status != "skipped"]
        return Judged(exercise, tests, [], len(cases), len(cases), True,
                      tuple(f"{name}: {why}" for name, why in why_not.items() if why is not None))
    runs = {c["id"]: Run.from_report(run_case(entry, ex.kind, ex.arguments(c["case"].size), c)) for c in cases}
    ev = J.Evidence(ex, here, cases, runs, {c["id"]: case_verdict(ex, c, runs[c["id"]]) for c in cases})
    tests = [t for t in J.judge(ev) if t.status != "skipped"]
    return Judged(exercise, tests, ev.hints.texts(), len(cases), len(ev.plain))


def _graded_cell(exercise: str) -> str | None:
    """In a notebook (IPython): what the grader will take for `exercise`, the last cell run here that is
    marked for it ("" when none is); None outside IPython (a script: the grader takes the whole file)."""
    from .grading.submission import marked_exercise
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is None:
        return None
    return next((c for c in reversed(shell.history_manager.input_hist_raw) if marked_exercise(c) == exercise), "")


def grader_sees(exercise: str) -> None:
    """AssertionError unless the grader will see what this notebook runs: a cell marked for `exercise`,
    using no name that only an earlier cell defines (the grader runs the marked cells alone)."""
    from .grading.submission import free_names
    cell = _graded_cell(exercise)
    if cell is None:
        return
    if not cell:
        raise AssertionError(f"{exercise}: no cell run here is marked '{MARKER} {exercise}': the grader takes only "
                             f"that cell, so it would find nothing to grade; put the line back at the top of your "
                             f"exercise cell")
    shell = sys.modules["IPython"].get_ipython()
    borrowed = [n for n in free_names(cell) if n in shell.user_ns]
    if borrowed:
        names = ", ".join(borrowed)
        raise AssertionError(f"{exercise}: the grader runs the '{MARKER} {exercise}' cell alone, and it uses {names}, "
                             f"defined in an earlier cell: there {names} would be undefined (0 points); define or "
                             f"import {names} inside the exercise cell")


def check(exercise: str, entry: Any) -> str:
    """The student's check in a lesson (see judged): raises AssertionError with the feedback unless
    every check made here passes, so an unfilled exercise fails its check. In a notebook it first
    checks that the grader will see the same code (grader_sees)."""
    grader_sees(exercise)
    result = judged(exercise, entry)
    if not result.passed:
        raise AssertionError(result.explain())
    return result.explain()


def expect(name: str, got: Any, want: Any, rel: float = 0.02) -> str:
    """A numeric answer check for the lessons' 'predict' exercises."""
    if got is None or isinstance(got, type(Ellipsis)):
        raise AssertionError(f"{name}: fill in your answer")
    if abs(float(got) - float(want)) > rel * abs(float(want)):
        raise AssertionError(f"{name}: {got} is not it (within {rel:.0%}); look again at the plan or the data")
    return f"{name}: right ({got})"


def committed(name: str) -> dict[str, Any]:
    """A results file from figures/data/ (a real GPU run)."""
    from .profile import results
    return results.load(DATA / name)


def committed_ncu(name: str) -> dict[str, dict[str, float | str]]:
    """A committed Nsight Compute CSV from figures/data/ (its first lines: the command and the device), as
    {kernel: {metric: value}} (instrument.ncu.section_metrics)."""
    from .instrument.ncu import section_metrics
    return section_metrics((DATA / name).read_text())


def live() -> bool:
    return BACKEND.on_device


# -- the lessons' sources -------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """One cell of a lesson. kind: "markdown", "code" or "exercise" (then `source` is the
    solution cell, marker line included, and `stub` the exercise notebook's cell)."""

    kind: str
    source: str
    exercise: str | None = None
    stub: str | None = None


class LessonSourceError(ValueError):
    """A lesson source that breaks the convention (notebooks/README.md): says where and how."""


_SOURCE_NAME = re.compile(r"^\d\d_\w+\.py$")
_EXERCISE_NAME = re.compile(r"^[A-Za-z_]\w*$")


def lesson_sources(directory: Path | None = None) -> dict[str, Path]:
    """{"01_fusion": path of notebooks/lessons/01_fusion.py, ...}, in lesson order."""
    directory = SOURCES if directory is None else Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no lesson sources here (they live in a source checkout, "
                                f"under notebooks/lessons/)")
    return {p.stem: p for p in sorted(directory.glob("*.py")) if _SOURCE_NAME.match(p.name)}


def read_lesson(path: Path | str) -> list[Cell]:
    """Parse one lesson source (a Jupytext percent script) into cells, stubs paired with their
    exercise cells."""
    import jupytext  # the [test] and [lessons] extras
    path = Path(path)
    nb = jupytext.read(path, fmt="py:percent")
    cells: list[Cell] = []
    stub: str | None = None
    for i, c in enumerate(nb.cells):
        tags = set(c.metadata.get("tags", []))
        where = f"{path.name}, cell {i + 1}"
        if c.cell_type == "markdown":
            if stub is not None:
                raise LessonSourceError(f"{where}: a stub cell must be followed by its exercise cell, not markdown")
            cells.append(Cell("markdown", c.source))
        elif c.cell_type != "code":
            raise LessonSourceError(f"{where}: a {c.cell_type} cell; lessons hold markdown and code cells only")
        elif "stub" in tags:
            if stub is not None:
                raise LessonSourceError(f"{where}: two stub cells in a row; each stub precedes its exercise cell")
            stub = c.source
        elif "exercise" in tags:
            first, _, body = c.source.partition("\n")
            name = first[len(MARKER):].strip() if first.startswith(MARKER) else ""
            if not _EXERCISE_NAME.match(name):
                raise LessonSourceError(f"{where}: an exercise cell starts with '{MARKER} <name>', not {first!r}")
            if stub is None:
                raise LessonSourceError(f"{where}: exercise {name!r} has no stub cell before it "
                                        f"(a code cell tagged stub: what the exercise notebook shows)")
            cells.append(Cell("exercise", c.source, name, f"{MARKER} {name}\n{stub}"))
            stub = None
        else:
            if stub is not None:
                raise LessonSourceError(f"{where}: a stub cell must be followed by its exercise cell")
            if c.source.lstrip().startswith(MARKER):
                raise LessonSourceError(f"{where}: a cell starting with '{MARKER}' must be tagged exercise")
            cells.append(Cell("code", c.source))
    if stub is not None:
        raise LessonSourceError(f"{path.name}: the last cell is a stub without its exercise cell")
    return cells


def solution_source(exercise: str, directory: Path | None = None) -> str:
    """The solution of a lessons' exercise, as its solution notebook's `# EXERCISE: <name>` cell
    holds it (what `kernels-lab grade` takes from a submitted notebook); written once, in
    notebooks/lessons/."""
    found = {}
    for lesson, path in lesson_sources(directory).items():
        for c in read_lesson(path):
            if c.kind == "exercise":
                found.setdefault(c.exercise, []).append((lesson, c.source))
    if exercise not in found:
        raise KeyError(f"no lesson has exercise {exercise!r}; the lessons' exercises: {', '.join(sorted(found))}")
    if len(found[exercise]) > 1:
        raise LessonSourceError(f"exercise {exercise!r} is in several lessons: "
                                f"{', '.join(lesson for lesson, _ in found[exercise])}")
    return found[exercise][0][1]
