"""Exercises: views of registered workloads, found through the registry.

Each workload module declares its own exercises (core.Exercise: which variant's plan sets
the budgets, what the student writes, the cases, the points); this module collects them,
and loads an instructor's own exercises from a Python file outside the package
(`kernels-lab grade --exercises my_exercises.py`). Such a file builds Exercise objects for
registered workloads and leaves them at its top level (or in a list called EXERCISES):

    from kernels_lab import Case, Exercise, get_workload, grid_for
    w = get_workload("elementwise")
    gelu_only = Exercise(name="gelu_only", workload="elementwise", variant="fused", lesson="01",
                         title="...", kind="kernel", entry="fused_chain", signature="...",
                         cases=(Case(w.size(1000), 1), Case(w.size(257), 2, hidden=True)),
                         configs=(grid_for(256),), points={"correct (public)": 5, "correct (hidden)": 5})
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterable

from ..core import Exercise, all_workloads, get_workload


FROM_FILES: dict[str, Path] = {}  # exercise name -> the instructor's file that added it (this process)


class ExerciseFileError(ValueError):
    """An instructor's exercise file that cannot be loaded, or that defines a bad exercise."""


def load_exercise_file(path: str | Path) -> list[Exercise]:
    """Run an instructor's exercise file and register the Exercise objects it defines."""
    path = Path(path)
    if not path.is_file():
        raise ExerciseFileError(f"--exercises {path}: no such file")
    spec = importlib.util.spec_from_file_location(f"kernels_lab_exercises_{abs(hash(str(path.resolve())))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  (an instructor's file: say which and why)
        raise ExerciseFileError(f"--exercises {path}: {type(e).__name__}: {e}") from None
    found = list(getattr(module, "EXERCISES", [])) or [v for v in vars(module).values() if isinstance(v, Exercise)]
    if not found:
        raise ExerciseFileError(f"--exercises {path}: defines no Exercise")
    for ex in found:
        try:
            get_workload(ex.workload).add_exercise(ex)
            FROM_FILES[ex.name] = path
        except (KeyError, ValueError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise ExerciseFileError(f"--exercises {path}: exercise {ex.name!r}: {msg}") from None
    return found


def exercises(files: Iterable[str | Path] = ()) -> dict[str, Exercise]:
    """Every exercise of every registered workload (after loading the instructor's files)."""
    for f in files:
        load_exercise_file(f)
    found: dict[str, Exercise] = {}
    for w in all_workloads().values():
        for ex in w.exercises.values():
            if ex.name in found and found[ex.name] is not ex:
                raise ExerciseFileError(f"exercise {ex.name!r} is defined twice ({found[ex.name].workload}, "
                                        f"{ex.workload})")
            found[ex.name] = ex
    return found


def get_exercise(name: str, files: Iterable[str | Path] = ()) -> Exercise:
    known = exercises(files)
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"unknown exercise {name!r}; exercises: {', '.join(known)}") from None
