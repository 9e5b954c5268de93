"""A submission is a .py file, or a lesson notebook whose student cells carry the lessons' marker.

In the lessons, every cell the student fills in starts with the line
    # EXERCISE: <exercise name>
(comment lines and blank lines may stand above it), and the grader takes exactly those cells (in
order), nothing else from the notebook: a name a cell takes from an earlier cell of the notebook is
not defined when the grader runs it (lessons.check says so in the notebook).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import NotJson, read_json

MARKER = "# EXERCISE:"


class SubmissionError(ValueError):
    """The submission file cannot be read as code for this exercise."""


def marked_exercise(cell: str) -> str | None:
    """The exercise a code cell is marked for: its first line that is neither blank nor a comment is
    not looked at; the marker must come before it, after blank lines and comments only. None: no marker."""
    for line in cell.splitlines():
        text = line.strip()
        if text.startswith(MARKER):
            return text[len(MARKER):].strip()
        if text and not text.startswith("#"):
            return None
    return None


def exercise_cells(cells: list[str], exercise: str) -> str | None:
    """What the grader takes from a notebook's code cells: the cells marked for `exercise`, joined in
    order (None: no cell is)."""
    taken = [text for text in cells if marked_exercise(text) == exercise]
    return "\n\n".join(taken) if taken else None


def _code_cells(nb: Any, path: Path) -> list[str]:
    """The code cells' sources of a parsed notebook; SubmissionError naming what is wrong with its form."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SubmissionError(f"{path}: JSON, but not a notebook (a notebook is an object with a list of 'cells')")
    sources = []
    for k, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise SubmissionError(f"{path}: cell {k + 1} is not a notebook cell (not a JSON object)")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", [])
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SubmissionError(f"{path}: code cell {k + 1}'s source is neither text nor a list of lines")
        sources.append(source)
    return sources


def load_source(path: str | Path, exercise: str) -> str:
    """The code of `exercise` in the submission at `path`. Refuses, before reading a byte, a path that
    is not a regular file (a FIFO named x.py would block the grader forever; a device never ends)."""
    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"{path}: no such file")
    if not path.is_file():
        kind = "a folder" if path.is_dir() else "a FIFO" if path.is_fifo() else "not a regular file"
        raise SubmissionError(f"{path}: {kind}, not a regular file (refused without reading it)")
    if path.suffix == ".py":
        return path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        try:
            nb = read_json(path)
        except NotJson as e:
            raise SubmissionError(f"{path}: not a notebook: {e}") from None
        source = exercise_cells(_code_cells(nb, path), exercise)
        if source is None:
            raise SubmissionError(f"{path}: no code cell starts with '{MARKER} {exercise}'")
        return source
    raise SubmissionError(f"{path}: expected a .py file or a lesson .ipynb")


PREDEFINED = frozenset({"cuda", "np", "numpy", "math"})  # what the grader's child defines before a submission runs


def free_names(source: str) -> list[str]:
    """The global names `source` uses but never binds (nor are builtins or PREDEFINED), in order of first
    use: run alone, as the grader runs a notebook's exercise cells, each is a NameError. [] when the
    source does not parse (the grader says so itself)."""
    import builtins
    import symtable
    try:
        top = symtable.symtable(source, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return []
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used: list[str] = []
    todo = [top]
    while todo:
        table = todo.pop(0)
        todo += table.get_children()
        for s in table.get_symbols():
            if s.is_referenced() and (table is top or s.is_global()) and s.get_name() not in used:
                used.append(s.get_name())
    return [n for n in used if n not in bound and n not in PREDEFINED and not hasattr(builtins, n)]
