"""`grade`, `grade merge`, `grade bundle`: the grader's command line. Submissions that cannot be read
are refused before reading (a FIFO would block); the exit status says whether every one was graded."""

from __future__ import annotations

import argparse
import math
import stat
import sys
from pathlib import Path

from ..errors import EXIT_ENVIRONMENT, EXIT_NOT_LOADED, UsageError
from .outputs import PROG, check_out_dir, check_out_files


# what `grade` counts as "could not be loaded": no code to run came out of the file (missing, not a
# regular file, no exercise cells), or Python refused the code (a syntax error, a failed import)
NOT_LOADED = ("unreadable", "import_error")


def _exercises(files: list[Path]) -> dict:
    from ..grading.exercises import ExerciseFileError, exercises
    try:
        return exercises(files)
    except ExerciseFileError as e:
        raise UsageError(str(e)) from None


def _exercise(name: str, files: list[Path]):
    known = _exercises(files)
    if name not in known:
        raise UsageError(f"unknown exercise {name!r}; exercises: {', '.join(known)} (see `kernels-lab grade --list`)")
    return known[name]


def _check_limits(args: argparse.Namespace) -> None:
    for flag, value in (("--timeout", args.timeout), ("--memory-gb", args.memory_gb)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a number of {'seconds' if flag == '--timeout' else 'GiB'} > 0, "
                             f"got {value:g}")
    if getattr(args, "workers", 1) < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")


def _not_regular(path: Path) -> str | None:
    """What `path` is when it exists but is neither a regular file nor a folder (reading a FIFO would
    block forever), without opening it; else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing: the loader says so, as for any unreadable submission
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "not a regular file")


def _submissions(ex, args: argparse.Namespace) -> tuple[list[Path], dict[Path, str]]:
    """The submissions to grade, in order (after --pick-one and --shard), and the ones refused before
    reading, with why."""
    from ..grading.batch import collect, shard
    from ..grading.bundle import pick_one
    paths: list[Path] = []
    refused: dict[Path, str] = {}
    for p in args.submissions:
        if args.pick_one and p.is_dir():  # a Gradescope submission folder: choose its one file
            try:
                paths.append(pick_one(p, ex.name, ex.entry))
            except FileNotFoundError as e:
                paths.append(p)
                refused[p] = str(e)
        else:
            paths += collect([p])
    if not paths and not args.shard:
        raise UsageError("no submissions: give .py / .ipynb files, or folders holding them")
    if args.shard:
        paths = shard(paths, args.shard)
    for p in paths:
        if p not in refused and (kind := _not_regular(p)) is not None:
            refused[p] = f"{p}: {kind}, not a regular file (refused without reading it)"
    return paths, refused


def cmd_grade(args: argparse.Namespace) -> int:
    from ..grading import report
    from ..grading.batch import grade_many, write_gradebook
    from ..grading.grade import failed_grade
    _check_limits(args)
    if args.list or not args.exercise:
        return _list_exercises(args)
    ex = _exercise(args.exercise, args.exercises)
    check_out_files(("--json", args.json), ("--csv", args.csv), ("--gradescope", args.gradescope))
    if args.out is not None:
        check_out_dir(args.out)
    paths, refused = _submissions(ex, args)
    if args.gradescope and len(paths) != 1:
        raise UsageError(f"--gradescope writes one results.json, for one submission; these arguments give "
                         f"{len(paths)}: grade one file (or one folder with --pick-one)")
    try:
        readable = [p for p in paths if p not in refused]
        graded = iter(grade_many(ex, readable, workers=args.workers, out_dir=args.out, timeout_s=args.timeout,
                                 memory_bytes=int(args.memory_gb * 2**30)) if readable else [])
        grades = [failed_grade(ex, p.name, "unreadable", refused[p]) if p in refused else next(graded) for p in paths]
    except Exception as e:  # noqa: BLE001  (Gradescope's results.json must exist even when the grader fails)
        if args.gradescope:
            report.write_json(args.gradescope, report.crashed_gradescope(f"{type(e).__name__}: {e}"))
        raise
    for g in grades:
        print(report.text(g))
    if args.gradescope:
        report.write_json(args.gradescope, report.gradescope(grades[0]))
    if args.json:
        report.write_json(args.json, {"grades": [g.to_dict() for g in grades]})
    if args.csv:
        write_gradebook(grades, args.csv)
    not_loaded = [g for g in grades if g.outcome in NOT_LOADED]
    broken = [g for g in grades if g.outcome == "grader_error"]
    for g in not_loaded + broken:
        print(f"{PROG}: {g.submission}: {g.summary.splitlines()[0]}", file=sys.stderr)  # "OUTCOME: why"
    return EXIT_ENVIRONMENT if broken else EXIT_NOT_LOADED if not_loaded else 0


def _list_exercises(args: argparse.Namespace) -> int:
    import textwrap

    from ..grading.grade import max_score
    from ..runtime import BACKEND_NAME
    for e in _exercises(args.exercises).values():
        here = max_score(e)
        print(f"{e.name:<17} lesson {e.lesson}  {e.title} ({here:g} points here on the {BACKEND_NAME}"
              + (f", {e.max_score:g} with every check" if here != e.max_score else "")
              + f"; workload {e.workload}, budgets from its {e.variant!r} variant)")
        print(textwrap.indent(e.signature, " " * 18))
    return 0


def cmd_grade_merge(args: argparse.Namespace) -> int:
    from ..grading import report
    from ..grading.batch import merge, write_gradebook
    if args.csv is None and args.json is None:
        raise UsageError("grade merge writes a gradebook: give --csv FILE, --json FILE, or both")
    check_out_files(("--csv", args.csv), ("--json", args.json))
    grades = merge(args.parts)
    if args.csv:
        write_gradebook(grades, args.csv)
    if args.json:
        report.write_json(args.json, {"grades": [g.to_dict() for g in grades]})
    print(f"merged {len(grades)} grade(s); wrote " + " and ".join(str(p) for p in (args.csv, args.json) if p))
    return 0


def cmd_grade_bundle(args: argparse.Namespace) -> int:
    from ..grading.bundle import write_bundle
    _check_limits(args)
    _exercise(args.exercise, args.exercises)
    check_out_dir(args.out)
    out = write_bundle(args.exercise, args.out / f"{args.exercise}_autograder.zip", args.exercises,
                       timeout_s=args.timeout, memory_gb=args.memory_gb)
    print(f"wrote {out} (Gradescope: grades {args.exercise} on the simulator)")
    return 0
