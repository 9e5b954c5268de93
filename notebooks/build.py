"""Build the lesson notebooks from their sources: one Jupytext percent script per lesson.

    notebooks/lessons/NN_topic.py       the source: edit this one
    notebooks/NN_topic.ipynb            the exercise notebook: stubs, no outputs
    notebooks/NN_topic_solution.ipynb   the solution notebook: solutions; a cell's outputs are kept
                                        while its source is unchanged (it is executed
                                        on a GPU: benchmarks/h200.sh notebooks)

The source convention (Jupytext's percent format; notebooks/README.md has an example):

    # %% [markdown]           a markdown cell, every line a comment (both notebooks)
    # %%                      a code cell (both notebooks)
    # %% tags=["stub"]        the exercise notebook's version of the exercise cell that follows
    # %% tags=["exercise"]    an exercise cell: its first line is `# EXERCISE: <name>` (the grader's
                              marker), the rest is the solution

The exercise notebook gets `# EXERCISE: <name>` + the stub, the solution notebook the exercise
cell as written. A stub sits BEFORE its solution, so the source also runs top to bottom as a
script (or as a notebook in Jupyter with Jupytext): the stub is defined, then replaced. The
solution is written once: `kernels_lab.lessons.solution_source(name)` returns it to the tests.

    python notebooks/build.py           write the notebooks of every lesson source
    python notebooks/build.py --check   write nothing; exit 1 naming the stale notebooks
    python notebooks/build.py --force   also rewrite unchanged solution notebooks (drops outputs)

tests/test_notebooks.py checks that the committed notebooks are what this file builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _lessons():
    from kernels_lab import lessons  # the parser lives in the package: the tests use it too
    return lessons


def sources() -> dict[str, Path]:
    """{lesson name: its source}, in lesson order."""
    return _lessons().lesson_sources(HERE / "lessons")


def paths(lesson: str) -> tuple[Path, Path]:
    """The exercise and the solution notebook of a lesson."""
    return HERE / f"{lesson}.ipynb", HERE / f"{lesson}_solution.ipynb"


def _cell(kind: str, text: str, index: int, tags: list[str] | None = None) -> dict[str, Any]:
    cell = {"cell_type": kind, "id": f"cell-{index:02d}", "metadata": {"tags": tags} if tags else {},
            "source": text.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def build(lesson: str, solution: bool) -> dict[str, Any]:
    """The exercise (solution=False) or solution notebook of a lesson, as nbformat 4 JSON."""
    out = []
    for k, c in enumerate(_lessons().read_lesson(sources()[lesson])):
        if c.kind == "exercise":
            out.append(_cell("code", c.source if solution else c.stub, k, ["exercise"]))
        else:
            out.append(_cell(c.kind, c.source, k))
    return {"cells": out, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": KERNELSPEC, "language_info": {"name": "python"},
                         "kernels_lab": {"lesson": lesson, "kind": "solution" if solution else "exercise",
                                         "source": f"lessons/{lesson}.py"}}}


def cells_of(nb: dict[str, Any]) -> list[tuple[str, str]]:
    """What must match between a committed notebook and the built one: each cell's type and source."""
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def keep_outputs(built: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """`built` with the outputs (and execution records) of `old`'s cells that have the same type and
    source, matched in order: editing one cell does not throw away the GPU outputs of the others."""
    by_source: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in old["cells"]:
        by_source.setdefault((c["cell_type"], "".join(c["source"])), []).append(c)
    cells = []
    for c in built["cells"]:
        same = by_source.get((c["cell_type"], "".join(c["source"])))
        if same and c["cell_type"] == "code":
            prior = same.pop(0)
            c = {**c, **{k: prior[k] for k in ("outputs", "execution_count", "metadata")}}
        cells.append(c)
    return json.loads(json.dumps({**built, "cells": cells}, sort_keys=True))  # key order as an executed one has


def _dump(nb: dict[str, Any]) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def stale(lesson: str) -> list[Path]:
    """The lesson's committed notebooks that differ from what its source builds."""
    out = []
    for path, solution in zip(paths(lesson), (False, True)):
        built = build(lesson, solution)
        if not path.exists():
            out.append(path)
        elif solution:
            if cells_of(json.loads(path.read_text())) != cells_of(built):
                out.append(path)
        elif path.read_text() != _dump(built):
            out.append(path)
    return out


def main(argv: list[str]) -> int:
    force, check = "--force" in argv, "--check" in argv
    outdated = []
    for lesson in sources():
        ex, sol = paths(lesson)
        todo = stale(lesson)
        if check:
            outdated += todo
            continue
        ex.write_text(_dump(build(lesson, False)))
        if sol in todo or force:  # an executed solution keeps the outputs of the cells whose sources are unchanged
            sol.write_text(_dump(build(lesson, True) if force or not sol.exists() else
                                 keep_outputs(build(lesson, True), json.loads(sol.read_text()))))
        for path in todo:
            print(f"wrote {path.relative_to(HERE.parent)}")
    if check and outdated:
        print("stale (run python notebooks/build.py): " + ", ".join(p.name for p in outdated))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
