"""Grade many submissions: parallel confined children, shards, resumable runs, one CSV gradebook.

    collect(paths)            .py / .ipynb files, and the ones directly inside folders (sorted)
    shard(paths, "i/N")       the i-th of N interleaved slices (1-based), so N machines split a class
    grade_many(..., out_dir)  one JSON per submission in out_dir; a submission whose JSON carries
                              the same content hash (and exercise, back-end, maximum) is not re-run
    merge(parts)              per-submission JSONs, folders of them, or --json files -> grades
    write_gradebook(grades)   one row per submission
"""

from __future__ import annotations

import csv
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from ..core import Exercise
from ..errors import UsageError
from ..runtime import BACKEND_NAME
from .grade import Grade, TestResult, content_hash, failed_grade, grade, max_score
from .submission import SubmissionError, load_source


def collect(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(q for q in p.iterdir() if q.suffix in (".py", ".ipynb") and q.is_file())
        else:
            found.append(p)
    return found


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageError(f"--shard {text!r}: expected i/N with 1 <= i <= N (e.g. 2/8)")
    return int(m.group(1)), int(m.group(2))


def shard(paths: list[Path], spec: str) -> list[Path]:
    """The i-th of N interleaved slices of the sorted paths: every path in exactly one shard."""
    i, n = parse_shard(spec)
    ordered = sorted(paths, key=lambda p: str(p))
    return [p for k, p in enumerate(ordered) if k % n == i - 1]


def grade_one(ex: Exercise, path: Path, **kw) -> Grade:
    try:
        source = load_source(path, ex.name)
    except (SubmissionError, OSError) as e:
        return failed_grade(ex, path.name, "unreadable", str(e), compile_gate=kw.get("compile_gate", True),
                            sanitizers=kw.get("sanitizers", True))
    return grade(ex, source, path.name, **kw)


def _json_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", path.name) + ".json"


def grade_from_dict(d: dict[str, Any]) -> Grade:
    tests = [TestResult(**t) for t in d.get("tests", [])]
    fields = {k: v for k, v in d.items() if k in Grade.__dataclass_fields__ and k != "tests"}
    fields["protections"] = [tuple(p) for p in fields.get("protections", [])]
    return Grade(tests=tests, **fields)


def _previous(ex: Exercise, path: Path, out_dir: Path | None, **kw) -> Grade | None:
    """The grade from an earlier run, if the submission has not changed since."""
    if out_dir is None:
        return None
    saved = out_dir / _json_name(path)
    try:
        d = json.loads(saved.read_text())
        source = load_source(path, ex.name)
    except (OSError, ValueError, SubmissionError):
        return None
    if d.get("content_hash") != content_hash(source) or d.get("exercise") != ex.name \
            or d.get("backend") != BACKEND_NAME or d.get("max_score") != max_score(ex, kw.get("compile_gate", True),
                                                                             kw.get("sanitizers", True)):
        return None
    try:
        return grade_from_dict(d)
    except TypeError:
        return None


def grade_many(ex: Exercise, paths: list[Path], workers: int = 2, out_dir: Path | None = None,
               **kw) -> list[Grade]:
    """Grade each path (workers at once); with out_dir, write one JSON per submission there and skip
    the submissions whose saved grade carries the same content hash."""
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    done: list[Grade] = []
    skipped = 0

    def one(path: Path) -> Grade:
        nonlocal skipped
        prev = _previous(ex, path, out_dir, **kw)
        if prev is not None:
            skipped += 1
            return prev
        g = grade_one(ex, path, **kw)
        if out_dir is not None:
            from .report import write_json
            write_json(out_dir / _json_name(path), g.to_dict())
        return g

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, p) for p in paths]
        for k, f in enumerate(futures):
            done.append(f.result())
            sys.stderr.write(f"\rgrading {ex.name}: {k + 1}/{len(paths)}")
            sys.stderr.flush()
    sys.stderr.write(f"\n{skipped} unchanged submission(s) not re-graded\n" if skipped else "\n")
    return done


def merge(parts: Iterable[Path]) -> list[Grade]:
    """Grades from per-submission JSON files, folders of them, or `--json` files ({"grades": [...]});
    one per (exercise, submission), the last one read winning."""
    found: dict[tuple[str, str], Grade] = {}
    files: list[Path] = []
    for p in parts:
        if p.is_dir():
            files += sorted(q for q in p.rglob("*.json"))
        elif p.exists():
            files.append(p)
        else:
            raise UsageError(f"merge: {p}: no such file or folder")
    for f in files:
        try:
            doc = json.loads(f.read_text())
        except ValueError as e:
            raise UsageError(f"merge: {f}: not JSON ({e})") from None
        rows = doc.get("grades", [doc]) if isinstance(doc, dict) else []
        for d in rows:
            if isinstance(d, dict) and "exercise" in d and "submission" in d:
                g = grade_from_dict(d)
                found[(g.exercise, g.submission)] = g
    return sorted(found.values(), key=lambda g: (g.exercise, g.submission))


def write_gradebook(grades: list[Grade], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(t.name for g in grades for t in g.tests))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "exercise", "score", "max_score", "outcome", "content_hash", *names])
        for g in grades:
            by = {t.name: t.score for t in g.tests}
            w.writerow([g.submission, g.exercise, g.score, g.max_score, g.outcome, g.content_hash[:16],
                        *[by.get(n, "") for n in names]])
    return path
