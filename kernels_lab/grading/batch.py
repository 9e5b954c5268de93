"""Grade many submissions: parallel confined children, shards, resumable runs, one CSV gradebook.

    collect(paths, ex)        each student's submission in the paths given (how a student is named:
                              collect's docstring)
    shard(items, "i/N")       the i-th of N interleaved slices (1-based), so N machines split a class
    grade_many(..., out_dir)  one JSON per submission in out_dir; a submission whose JSON carries
                              the same content hash (and exercise, back-end, maximum) is not re-run;
                              Ctrl-C kills every child within a second and writes nothing more
    merge(files)              per-submission JSONs or --json files -> grades; anything else refused
    write_gradebook(grades)   one row per submission; a check not counted here is an empty cell
"""

from __future__ import annotations

import csv
import json
import re
import sys
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from ..core import Exercise
from ..errors import NotJson, UsageError, read_json
from ..runtime import BACKEND_NAME
from .grade import Grade, TestResult, content_hash, failed_grade, grade, max_score
from .submission import SubmissionError, load_source


SUFFIXES = (".py", ".ipynb")
POLL_S = 0.2  # how often the waiting main thread wakes (Ctrl-C: see _result)
_NOT_SUBMITTED = ("__pycache__", "__MACOSX")  # folders a download or Python leaves beside the submissions


@dataclass(frozen=True)
class Found:
    """One student's submission: the file to grade (or, when none could be chosen, the student's
    folder, and `problem` says why) and its name in the grades and the gradebook."""

    path: Path
    name: str
    problem: str | None = None


def _hidden(p: Path) -> bool:
    return p.name.startswith(".") or p.name in _NOT_SUBMITTED


def collect(paths: list[Path], exercise: str, entry: str) -> list[Found]:
    """Each student's submission in `paths`. A file given is one submission, named by its file name. In
    a folder given, each .py / .ipynb directly inside is one student's (named by its file name), and
    each subfolder is one student's, named by the subfolder: STUDENT/FILE, FILE being the one
    submission found anywhere inside it (bundle.pick_one: the file named after the exercise, else the
    only one, else the one notebook marked for it, else the one .py defining the entry). A student's
    folder where no file, or no one file, is the submission is a Found with its problem (a graded row:
    0 points and why), never a guess. Hidden files and folders (.ipynb_checkpoints), __pycache__ and
    __MACOSX are not submissions."""
    from .bundle import pick_one
    found: list[Found] = []
    for p in paths:
        if not p.is_dir():
            found.append(Found(p, p.name))
            continue
        for q in sorted(p.iterdir()):
            if _hidden(q):
                continue
            if q.is_dir():
                try:
                    chosen = pick_one(q, exercise, entry)
                    found.append(Found(chosen, f"{q.name}/{chosen.relative_to(q).as_posix()}"))
                except (FileNotFoundError, OSError) as e:
                    found.append(Found(q, f"{q.name}/", f"{q.name}/ is a student's folder, but {_folder_problem(e, q)}"))
            elif q.suffix in SUFFIXES and q.is_file():
                found.append(Found(q, q.name))
    return found


def _folder_problem(e: OSError, folder: Path) -> str:
    """pick_one's words, less the folder it already names."""
    return str(e).removeprefix(f"{folder}: ") if isinstance(e, FileNotFoundError) else f"it cannot be read ({e})"


def json_name(name: str) -> str:
    """The file a submission's grade is saved in, in `grade --out DIR`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".json"


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise UsageError(f"--shard {text!r}: expected i/N with 1 <= i <= N (e.g. 2/8)")
    return int(m.group(1)), int(m.group(2))


T = TypeVar("T")


def shard(items: list[T], spec: str, key: Callable[[T], str] = str) -> list[T]:
    """The i-th of N interleaved slices of the items sorted by key: every item in exactly one shard."""
    i, n = parse_shard(spec)
    ordered = sorted(items, key=key)
    return [p for k, p in enumerate(ordered) if k % n == i - 1]


def grade_one(ex: Exercise, path: Path, name: str | None = None, **kw) -> Grade:
    name = name or path.name
    try:
        source = load_source(path, ex.name)
    except (SubmissionError, OSError) as e:
        return failed_grade(ex, name, "unreadable", str(e), compile_gate=kw.get("compile_gate", True),
                            sanitizers=kw.get("sanitizers", True))
    return grade(ex, source, name, **kw)


def grade_from_dict(d: dict[str, Any]) -> Grade:
    tests = [TestResult(**t) for t in d.get("tests", [])]
    fields = {k: v for k, v in d.items() if k in Grade.__dataclass_fields__ and k != "tests"}
    fields["protections"] = [tuple(p) for p in fields.get("protections", [])]
    return Grade(tests=tests, **fields)


def _previous(ex: Exercise, path: Path, name: str, out_dir: Path | None, **kw) -> Grade | None:
    """The grade from an earlier run, if the submission has not changed since."""
    if out_dir is None:
        return None
    saved = out_dir / json_name(name)
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


def _result(future: Future) -> Grade:
    """future.result(), woken every POLL_S: the kernel may hand Ctrl-C to a worker thread (blocked in its
    child's select), and a main thread blocked in an untimed wait would run Python's handler only when this
    grade ends (up to its time limit); woken, it raises KeyboardInterrupt within POLL_S."""
    while True:
        try:
            return future.result(timeout=POLL_S)
        except FutureTimeout:
            continue


def grade_many(ex: Exercise, paths: list[Path], workers: int = 2, out_dir: Path | None = None,
               names: dict[Path, str] | None = None, **kw) -> list[Grade]:
    """Grade each path (workers at once), named names[path] (default its file name); with out_dir,
    write one JSON per submission there and skip the submissions whose saved grade carries the same
    content hash. A failure of the grader on one submission is that submission's grade (grader_error),
    never the class's. Ctrl-C (KeyboardInterrupt) stops every child within a second and is raised
    again: the grades already written to out_dir are whole ones, the rest are not written."""
    from .lifecycle import allow_children, stop_all
    names = names or {}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    done: list[Grade] = []
    skipped = 0

    def one(path: Path) -> Grade:
        nonlocal skipped
        name = names.get(path, path.name)
        prev = _previous(ex, path, name, out_dir, **kw)
        if prev is not None:
            skipped += 1
            return prev
        try:
            g = grade_one(ex, path, name, **kw)
        except Exception as e:  # noqa: BLE001  (ours to fix, but one submission's: the class still grades)
            g = failed_grade(ex, name, "grader_error", f"the grader failed on this submission ({type(e).__name__}: "
                             f"{e}); a bug in kernels-lab, not the student's doing: report it with this grade's "
                             f"notes", compile_gate=kw.get("compile_gate", True),
                             sanitizers=kw.get("sanitizers", True))
            g.notes.append(traceback.format_exc())
        if out_dir is not None:
            from .report import write_json
            write_json(out_dir / json_name(name), g.to_dict())
        return g

    allow_children()
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(one, p) for p in paths]
        for k, f in enumerate(futures):
            done.append(_result(f))
            sys.stderr.write(f"\rgrading {ex.name}: {k + 1}/{len(paths)}")
            sys.stderr.flush()
    except BaseException:  # Ctrl-C: no child may outlive it, nor a half-graded submission be written
        stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        sys.stderr.write("\n")
        raise
    pool.shutdown()
    sys.stderr.write(f"\n{skipped} unchanged submission(s) not re-graded\n" if skipped else "\n")
    return done


PART = "a grade part: a per-submission JSON of `grade --out DIR`, or a `grade --json FILE`"


def _part_grades(f: Path) -> list[Grade]:
    """The grades in one part file; UsageError naming the file when it is no part."""
    try:
        doc = read_json(f)
    except NotJson as e:
        raise UsageError(f"merge: {f}: {e}, so not {PART}") from None
    rows = doc.get("grades", [doc]) if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"merge: {f}: not {PART}" + (" (its grades list is empty)" if rows == [] else ""))
    grades = []
    for k, d in enumerate(rows):
        try:
            if not (isinstance(d, dict) and isinstance(d.get("exercise"), str) and isinstance(d.get("submission"), str)
                    and isinstance(d.get("score"), (int, float)) and isinstance(d.get("max_score"), (int, float))):
                raise TypeError("no exercise, submission, score and max_score")
            grades.append(grade_from_dict(d))
        except (TypeError, ValueError) as e:
            where = f"grade {k + 1}" if "grades" in doc else "it"
            raise UsageError(f"merge: {f}: {where} is not a grade ({e}), so not {PART}") from None
    return grades


def merge(files: Iterable[Path]) -> list[Grade]:
    """Grades from part files (per-submission JSONs, or `--json` files {"grades": [...]}); one per
    (exercise, submission), the last one read winning. A file that is no part is refused (UsageError),
    never skipped: a gradebook missing students looks complete."""
    found: dict[tuple[str, str], Grade] = {}
    for f in files:
        for g in _part_grades(f):
            found[(g.exercise, g.submission)] = g
    return sorted(found.values(), key=lambda g: (g.exercise, g.submission))


def write_gradebook(grades: list[Grade], path: Path) -> Path:
    """One row per submission, one column per check: its score, or an empty cell where the check was not
    counted (skipped here: no GPU, no sanitizer), so a skipped check never reads as a failed 0; the last
    column, not_counted, names those checks and why."""
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(t.name for g in grades for t in g.tests))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "exercise", "score", "max_score", "outcome", "content_hash", *names, "not_counted"])
        for g in grades:
            by = {t.name: "" if t.status == "skipped" else t.score for t in g.tests}
            skipped = "; ".join(f"{t.name}: {t.output}" for t in g.tests if t.status == "skipped")
            w.writerow([g.submission, g.exercise, g.score, g.max_score, g.outcome, g.content_hash[:16],
                        *[by.get(n, "") for n in names], skipped])
    return path
