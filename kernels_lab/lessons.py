"""Helpers the Jupyter lessons call: set-up, the student's own checks, committed GPU results.

A student's check runs the same cases and verdicts as the grader (kernels_lab.grading), in
the notebook's own process (it is the student's own code), and raises AssertionError with
the feedback when something is wrong, so an unfilled exercise fails its check.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .runtime import ON_GPU, ON_SIMULATOR, device_facts

DATA = Path(__file__).resolve().parents[1] / "figures" / "data"


def setup() -> str:
    """Say where the lesson runs; make the simulator's barriers faster."""
    if ON_SIMULATOR:
        sys.setswitchinterval(5e-5)
        return ("Running on numba's CUDA simulator: small sizes, launches and bytes are real, "
                "timings come from the committed H200 results in figures/data/.")
    return f"Running on {device_facts().describe()}: sizes are large and timings are measured live."


def check(exercise: str, entry: Any) -> str:
    """Grade `entry` (the student's kernel or function) on the exercise's public cases, in this
    process, with the grader's own verdicts and budgets (kernels_lab.grading.verdict)."""
    from .grading.child import run_case
    from .grading.exercises import get_exercise
    from .grading.sandbox import build_cases
    from .grading.verdict import case_verdict, hint_text, launch_problem, traffic_problem
    ex = get_exercise(exercise)
    if entry is None:
        raise AssertionError(f"define {ex.entry} first")
    problems, hints = [], []
    cases = build_cases(ex, public_only=True)
    for c in cases:
        got = run_case(entry, ex.kind, ex.arguments(c["case"].size), c)
        v = case_verdict(ex, c, got)
        size = c["case"].size
        if not v["ok"]:
            problems.append(v["why"] + (f" (schedule seed {c['perturb_seed']})" if c["perturb_seed"] else ""))
            if (h := hint_text(v.get("hint"))) and h not in hints:
                hints.append(h)
        elif (why := launch_problem(ex, size, len(got["launches"]))) is not None:
            problems.append(why)
        elif got["bytes"] is not None and (why := traffic_problem(ex, size, got["bytes"])) is not None:
            problems.append(why)
    if any(c["perturb_seed"] for c in cases) and any("schedule seed" in p for p in problems):
        hints.append(hint_text("barrier"))
    if problems:
        raise AssertionError(f"{exercise}: {len(problems)} of {len(cases)} runs wrong\n  " + "\n  ".join(problems[:4])
                             + ("\nhints:\n  " + "\n  ".join(hints) if hints else ""))
    return f"{exercise}: all {len(cases)} runs correct"


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


def live() -> bool:
    return ON_GPU
