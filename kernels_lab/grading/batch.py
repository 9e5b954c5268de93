"""Grade many submissions: parallel child processes, a progress line, a CSV gradebook."""

from __future__ import annotations

import csv
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core import Exercise
from .grade import Grade, grade
from .submission import SubmissionError, load_source


def collect(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(q for q in p.iterdir() if q.suffix in (".py", ".ipynb"))
        else:
            found.append(p)
    return found


def grade_one(ex: Exercise, path: Path, **kw) -> Grade:
    from .grade import TestResult
    try:
        source = load_source(path, ex.name)
    except SubmissionError as e:
        tests = [TestResult(name, 0, pts, "failed", str(e)) for name, pts in ex.points.items()]
        return Grade(ex.name, path.name, 0.0, sum(t.max_score for t in tests), "unreadable", str(e), tests)
    return grade(ex, source, path.name, **kw)


def grade_many(ex: Exercise, paths: list[Path], workers: int = 2, **kw) -> list[Grade]:
    done: list[Grade] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(grade_one, ex, p, **kw) for p in paths]
        for k, f in enumerate(futures):
            done.append(f.result())
            sys.stderr.write(f"\rgrading {ex.name}: {k + 1}/{len(paths)}")
            sys.stderr.flush()
    sys.stderr.write("\n")
    return done


def write_gradebook(grades: list[Grade], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(t.name for g in grades for t in g.tests))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "exercise", "score", "max_score", "outcome", *names])
        for g in grades:
            by = {t.name: t.score for t in g.tests}
            w.writerow([g.submission, g.exercise, g.score, g.max_score, g.outcome, *[by.get(n, "") for n in names]])
    return path
