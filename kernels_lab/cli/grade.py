"""`grade`, `grade merge`, `grade bundle`: the grader's command line. Submissions that cannot be read
are refused before reading (a FIFO would block); the exit status says whether every one was graded."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ..errors import EXIT_ENVIRONMENT, EXIT_NOT_LOADED, UsageError
from .inputs import check_in_file, not_regular
from .outputs import PROG, check_out_dir, check_out_files


# what `grade` counts as "could not be loaded": no code to run came out of the file (missing, not a
# regular file, no exercise cells), or Python refused the code (a syntax error, a failed import)
NOT_LOADED = ("unreadable", "import_error")


def _exercises(files: list[Path]) -> dict:
    from ..grading.exercises import ExerciseFileError, exercises
    for f in files:
        check_in_file(f, "--exercises", "a Python file of exercises, see README 'Write an exercise'")
        if f.suffix != ".py":
            raise UsageError(f"--exercises {f}: not a .py file; an exercises file is Python (see README, 'Write an "
                             f"exercise')")
        try:
            f.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise UsageError(f"--exercises {f}: not UTF-8 text (byte {e.start}), so not a Python file") from None
    try:
        return exercises(files)
    except ExerciseFileError as e:
        raise UsageError(str(e)) from None


def _exercise(name: str, files: list[Path]):
    known = _exercises(files)
    if name not in known:
        raise UsageError(f"unknown exercise {name!r}; exercises: {', '.join(known)} (see `kernels-lab grade --list`)")
    return known[name]


MAX_TIMEOUT_S = 24 * 3600.0   # a run's limit above a day is a typo (and past what a clock can wait for)


def _check_limits(args: argparse.Namespace) -> None:
    from ..grading.lifecycle import MIN_MEMORY_GB
    for flag, value in (("--timeout", args.timeout), ("--memory-gb", args.memory_gb)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a number of {'seconds' if flag == '--timeout' else 'GiB'} > 0, "
                             f"got {value:g}")
    if args.timeout > MAX_TIMEOUT_S:
        raise UsageError(f"--timeout {args.timeout:g}: at most {MAX_TIMEOUT_S:g} seconds (a day) per run")
    if args.memory_gb < MIN_MEMORY_GB:
        raise UsageError(f"--memory-gb {args.memory_gb:g} is less than the grader itself needs: give at least "
                         f"{MIN_MEMORY_GB:g} (the child's Python, NumPy and numba, before any line of a submission)")
    if args.memory_gb > (most := _machine_memory_gb()):
        raise UsageError(f"--memory-gb {args.memory_gb:g}: more than this machine has ({most:g} GiB)")
    if getattr(args, "workers", 1) < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")


def _machine_memory_gb() -> float:
    import os
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def _submissions(ex, args: argparse.Namespace) -> tuple[list[Path], dict[Path, str], dict[Path, str]]:
    """The submissions to grade, in order (after --pick-one and --shard), their names in the grades,
    and the ones refused before reading, with why."""
    from ..grading.batch import Found, collect, json_name, shard
    from ..grading.bundle import pick_one
    found: list[Found] = []
    for p in args.submissions:
        if args.pick_one and p.is_dir():  # a Gradescope submission folder: choose its one file
            try:
                found.append(Found(pick_one(p, ex.name, ex.entry), p.name))
            except FileNotFoundError as e:
                found.append(Found(p, p.name, str(e)))
        else:
            found += collect([p], ex.name, ex.entry)
    if not found and not args.shard:
        raise UsageError("no submissions: give .py / .ipynb files, folders holding them, or a folder of "
                         "students' folders (one each)")
    by_file: dict[str, Found] = {}
    for f in found:  # two students whose grades would share a name (and an --out file): whose is whose?
        if (twin := by_file.setdefault(json_name(f.name), f)) is not f:
            raise UsageError(f"two submissions would be graded under one name, {twin.name!r} ({twin.path}) and "
                             f"{f.name!r} ({f.path}): grade the folders apart, or rename one")
    if args.shard:
        found = shard(found, args.shard, key=lambda f: str(f.path))
    refused = {f.path: f.problem for f in found if f.problem is not None}
    for f in found:
        if f.path not in refused and (kind := not_regular(f.path)) is not None:
            refused[f.path] = f"{f.path}: {kind}, not a regular file (refused without reading it)"
    return [f.path for f in found], {f.path: f.name for f in found}, refused


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
    paths, names, refused = _submissions(ex, args)
    if args.gradescope and len(paths) != 1:
        raise UsageError(f"--gradescope writes one results.json, for one submission; these arguments give "
                         f"{len(paths)}: grade one file (or one folder with --pick-one)")
    try:
        readable = [p for p in paths if p not in refused]
        graded = iter(grade_many(ex, readable, workers=args.workers, out_dir=args.out, names=names,
                                 timeout_s=args.timeout, memory_bytes=int(args.memory_gb * 2**30)) if readable else [])
        grades = [failed_grade(ex, names[p], "unreadable", refused[p]) if p in refused else next(graded)
                  for p in paths]
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


def _part_files(parts: list[Path]) -> list[Path]:
    """The files `grade merge` reads: each file given, and the .json files anywhere in each folder given;
    each a regular file (a FIFO would block the merge forever)."""
    files: list[Path] = []
    for p in parts:
        if not p.exists():
            raise UsageError(f"merge: {p}: no such file or folder")
        if p.is_dir():
            inside = sorted(q for q in p.rglob("*.json") if not q.name.startswith("."))
            if not inside:
                raise UsageError(f"merge: {p}: a folder with no .json file in it (give the --out folder of "
                                 f"`kernels-lab grade`, or its --json files)")
            files += inside
        else:
            files.append(p)
    for f in files:
        check_in_file(f, "merge:", "give per-submission JSONs of `grade --out`, folders of them, or --json files")
    return files


def cmd_grade_merge(args: argparse.Namespace) -> int:
    from ..grading import report
    from ..grading.batch import merge, write_gradebook
    if args.csv is None and args.json is None:
        raise UsageError("grade merge writes a gradebook: give --csv FILE, --json FILE, or both")
    check_out_files(("--csv", args.csv), ("--json", args.json))
    grades = merge(_part_files(args.parts))
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
