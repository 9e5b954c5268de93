"""Reports: readable text, JSON, and Gradescope's results.json (all written atomically)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .grade import Grade


def text(g: Grade) -> str:
    lines = [f"{g.exercise} - {g.submission}: {g.score:g} / {g.max_score:g} ({g.outcome}, {g.execution_time:.1f} s)"]
    if g.outcome != "graded":  # why, once (the checks only point to it)
        said = g.summary.split("\nhints:")[0].splitlines()
        lines += [f"  {line}" for line in said if line != f"{g.score:g} / {g.max_score:g}"]
    for t in g.tests:
        mark = {"passed": "PASS", "failed": "FAIL", "skipped": "skip"}[t.status]
        lines.append(f"  [{mark}] {t.name}: {t.score:g}/{t.max_score:g}")
        if t.status != "passed" or t.output != "all runs correct":  # failures, and what a pass measured
            lines += [f"         {line}" for line in t.output.splitlines()]
    if "hints:" in g.summary:
        lines.append(g.summary[g.summary.index("hints:"):])
    return "\n".join(lines)


def gradescope(g: Grade) -> dict[str, Any]:
    """Gradescope's format: score, execution_time, output, tests[...], leaderboard."""
    return {
        "score": g.score,
        "execution_time": round(g.execution_time, 2),
        "output": g.summary,
        "tests": [{"name": t.name, "score": t.score, "max_score": t.max_score,
                   "status": "passed" if t.status in ("passed", "skipped") else "failed",
                   "output": t.output, "visibility": t.visibility} for t in g.tests],
        "leaderboard": g.leaderboard,
    }


def crashed_gradescope(message: str) -> dict[str, Any]:
    """What results.json says when the grader itself failed: still a valid file."""
    return {"score": 0.0, "execution_time": 0.0, "output": f"the grader failed: {message}",
            "tests": [], "leaderboard": []}


def write_json(path: str | Path, doc: dict[str, Any]) -> Path:
    """Atomically: a temp file in the same folder, flushed to disk, then renamed over `path`
    (a reader sees the old file or the new one, never half of one)."""
    import os
    import tempfile
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=1, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
