"""A submission is a .py file, or a lesson notebook whose student cells carry the lessons' marker.

In the lessons, every cell the student fills in starts with the line
    # EXERCISE: <exercise name>
and the grader takes exactly those cells (in order), nothing else from the notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

MARKER = "# EXERCISE:"


class SubmissionError(ValueError):
    """The submission file cannot be read as code for this exercise."""


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
            nb = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise SubmissionError(f"{path}: not a valid notebook ({e})") from None
        cells = []
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            text = "".join(cell.get("source", []))
            first = text.lstrip().splitlines()[0] if text.strip() else ""
            if first.startswith(MARKER) and first[len(MARKER):].strip() == exercise:
                cells.append(text)
        if not cells:
            raise SubmissionError(f"{path}: no code cell starts with '{MARKER} {exercise}'")
        return "\n\n".join(cells)
    raise SubmissionError(f"{path}: expected a .py file or a lesson .ipynb")
