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
    """Grade `entry` (the student's kernel or function) on the exercise's cases, in this process."""
    from .grading.child import run_case
    from .grading.exercises import get_exercise
    from .grading.grade import _case_verdict, _hint_text
    ex = get_exercise(exercise)
    if entry is None:
        raise AssertionError(f"define {ex.entry} first")
    from .grading.sandbox import build_cases
    problems, hints = [], []
    cases = [c for c in build_cases(ex) if not c["case"].hidden]
    for c in cases:
        got = run_case(entry, ex.kind, ex.argument_order, c)
        v = _case_verdict(ex, c, got)
        if not v["ok"]:
            problems.append(v["why"] + (f" (schedule seed {c['perturb_seed']})" if c["perturb_seed"] else ""))
            if (h := _hint_text(v.get("hint"))) and h not in hints:
                hints.append(h)
        elif ex.max_launches is not None and len(got["launches"]) > ex.max_launches:
            problems.append(f"{len(got['launches'])} launches; the exercise allows {ex.max_launches}")
        elif ex.max_bytes is not None and got["bytes"] is not None and got["bytes"] > ex.max_bytes(c["case"].n):
            problems.append(f"{got['bytes']:,} bytes of global traffic; the plan needs {ex.max_bytes(c['case'].n):,}")
    if any(c["perturb_seed"] for c in cases) and any("schedule seed" in p for p in problems):
        hints.append(_hint_text("barrier"))
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
