"""What the judges of data exercises (they live with their topics, in kernels_lab/topics) may use of the grader,
and nothing else: its PTX scanner, its compiler for probe kernels built with a student's functions (the compile
gate of a data exercise), the checks it makes of every student's function, and a grade itself. The grader's
other modules are its internals; tests/test_grading_imports.py keeps topics to this module (and core to no part
of the grader).
"""

from __future__ import annotations

from typing import Any

from .child import defined_outside_kernels_lab, entry_problem, forbidden_import
from .exercises import get_exercise
from .probe_ptx import (Probe, compile_probes, launch_failure, not_compiled, portable, rebuild, refusal, refused,
                        rejection, where_not_compiled)
from .ptx import Instr, Listing, first_load_before, listing

__all__ = ["Instr", "Listing", "Probe", "compile_probes", "defined_outside_kernels_lab", "entry_problem",
           "first_load_before", "forbidden_import", "get_exercise", "grade", "launch_failure", "listing",
           "not_compiled", "portable", "rebuild", "refusal", "refused", "rejection", "where_not_compiled"]


def grade(*args: Any, **kwargs: Any) -> Any:
    """grading.grade.grade: one submission graded in the grader's sandbox (imported when called: the grader's
    whole machinery is not a topic's import)."""
    from .grade import grade as graded
    return graded(*args, **kwargs)
