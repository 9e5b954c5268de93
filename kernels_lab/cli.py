"""kernels-lab: see what fusion, persistence and launch strategies do to GPU kernels.

  kernels-lab list                      every workload, its variants, patterns and launches
  kernels-lab demo elementwise          validate, measure and plot one lesson topic
  kernels-lab demo --list               the demos there are
  kernels-lab profile elementwise ...   sweep sizes, write a results JSON
  kernels-lab timeline quantize_group   a Gantt chart of every variant's launches (CUDA events)
  kernels-lab plot RESULTS.json         draw the figures of a results file
  kernels-lab grade EXERCISE FILES...   grade student submissions (kernels-lab grade --list)
  kernels-lab doctor                    what this machine can run, and what to fix

Runs on a GPU when one is visible, else on numba's CUDA simulator (small sizes, no
timings). Force either with KERNELS_LAB_BACKEND=gpu|sim.

A mistake on the command line (a bad size, an unwritable output path, a back-end that cannot
be had) is one line on stderr, `kernels-lab: error: ...`, naming the fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

OUT_DIR = Path("kernels-lab-out")
PROG = "kernels-lab"


class UsageError(ValueError):
    """A mistake on the command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line in the same form as every other error here."""

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        print(f"{PROG}: error: {where + ': ' if where else ''}{message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def positive_int(text: str) -> int:
    """--n, --reps: a whole number >= 1 (4096, 2^12 and 4Ki are accepted, as in --size)."""
    from .core import SizeError, parse_int  # core imports numpy only: cheap, and before any back-end work
    try:
        value = parse_int(text.lstrip("+")) if not text.strip().startswith("-") else None
    except SizeError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def check_output(path: Path, flag: str, folder: bool) -> None:
    """Fail before any work when `path` cannot be written: a file where a folder is needed (or the
    reverse), or a place this user cannot write. Creates nothing."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a folder")
    if not folder and path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give a file name, e.g. {path / 'results.json'}")
    parent = path if folder else path.parent
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a folder; choose another path")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write in {existing} ({e.strerror or e}); "
                         f"choose a folder you can write to") from None


# Output paths per command: (attribute, flag, is a folder). Checked before a command does any work.
OUTPUTS = {
    "demo": (("out", "--out", False), ("json", "--json", False)),
    "profile": (("json", "--json", False),),
    "timeline": (("out", "--out", True), ("json", "--json", False)),
    "plot": (("out", "--out", True),),
    "grade": (("json", "--json", False), ("csv", "--csv", False), ("gradescope", "--gradescope", False)),
}
# Commands that launch kernels: not possible on the PTX-only back-end.
LAUNCHING = ("demo", "profile", "timeline")


def check_sim_size(size) -> None:
    """On the simulator, refuse sizes that would run for many minutes, saying what to do instead."""
    from .runtime import simulator_size_problem
    if (problem := simulator_size_problem(size)) is not None:
        raise UsageError(problem)


def cmd_list(args: argparse.Namespace) -> int:
    from .core import all_workloads
    from .runtime import ON_GPU
    for w in all_workloads().values():
        size = w.default_size(False)
        print(f"{w.name}: {w.about}")
        print("  axes: " + "; ".join(f"{a.name} ({a.about or a.unit}) default {a.gpu:,} on a GPU, {a.sim:,} on the "
                                      f"simulator" for a in w.axes) + f"   [here: {w.describe_axes(ON_GPU)}]")
        for v in w.variants.values():
            plan = v.plan(size)
            kernels = " -> ".join(k.kernel for k in plan.launches)
            per_elem = plan.bytes_total / size.elements
            print(f"  {v.name:<13} {v.pattern:<11} {plan.n_launches} launch(es), {per_elem:.3g} B/element at {size}: "
                  f"{kernels}")
            print(f"  {'':<13} {'':<11} {v.about}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demos import demos
    known = demos()
    if args.list or not args.name:
        for d in known.values():
            print(f"{d.name:<13} {d.about}")
        return 0
    if args.name not in known:
        raise UsageError(f"unknown demo {args.name!r}; known demos: {', '.join(known)} (see `kernels-lab demo --list`)")
    if args.n is not None and args.size:
        raise UsageError("give --n or --size, not both")
    demo = known[args.name]
    takes_size = getattr(sys.modules.get(demo.run.__module__), "TAKES_SIZE", True)
    if not takes_size and (args.n is not None or args.size):
        raise UsageError(f"demo {args.name} measures fixed configurations: --n and --size do not apply to it")
    return demo.run(args)


def chosen_sizes(workload, args: argparse.Namespace) -> list:
    """--sweep AXIS=LO..HI (one axis varied, the others at --size or their defaults), --sizes for a
    one-axis workload, else the default sweep of the first axis."""
    if args.sweep and args.sizes:
        raise UsageError("give --sizes or --sweep, not both (--sizes is --sweep for a one-axis workload)")
    base = workload.parse_size(args.size) if args.size else None
    if args.sweep:
        sizes = workload.parse_sweep(args.sweep, base)[1]
    elif args.sizes:
        axis = workload.axes[0].name
        if len(workload.axes) != 1:
            raise UsageError(f"--sizes is for one-axis workloads; {workload.name} has axes "
                             f"{', '.join(workload.axis_names)}: use --sweep AXIS=LO..HI")
        sizes = workload.parse_sweep(f"{axis}={args.sizes}", base)[1]
    elif base is not None:
        sizes = [base]
    else:
        sizes = workload.sweep(workload.axes[0].name)
    if not sizes:
        raise UsageError("no sizes to measure: --sizes / --sweep named none")
    for size in sizes:
        check_sim_size(size)
    return sizes


def cmd_profile(args: argparse.Namespace) -> int:
    from .profile.runs import SPECIAL_PROFILES, profile_workload, run_special
    from .runtime import device_facts
    if args.workload in SPECIAL_PROFILES:
        if args.sizes or args.size or args.sweep:
            raise UsageError(f"profile {args.workload} measures fixed configurations: --sizes, --size and --sweep "
                             f"do not apply to it")
        print(f"backend: {device_facts().describe()}")
        records = run_special(args.workload, args.json, args.command_line)
        print(f"{len(records)} records; wrote {args.json}")
        return 0
    from .core import get_workload
    workload = get_workload(args.workload)
    sizes = chosen_sizes(workload, args)
    print(f"backend: {device_facts().describe()}")
    records, ncu_problem = profile_workload(workload, sizes, json_path=args.json, reps=args.reps, warm=args.warm,
                                            with_ncu=args.ncu, command=args.command_line)
    if ncu_problem:
        print(ncu_problem, file=sys.stderr)
    for r in records:
        t = f"{r['time_ms']:.4f} ms" if r.get("time_ms") is not None else "no time"
        extra = f" model {r['time_ms_model']:.4f} ms ({r['model_error']:+.0%})" if "time_ms_model" in r else ""
        size = ",".join(f"{k}={v:,}" for k, v in r["size"].items())
        print(f"  {r['variant']:<12} {size:>24} {r['launches']} launch  {r['bytes_model']:>14,} B  {t}{extra}")
    print(f"wrote {args.json}")
    return 3 if ncu_problem else 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from .core import get_workload
    from .profile import plots, results
    from .profile.timeline import variant_timelines
    from .runtime import device_facts
    workload = get_workload(args.workload)
    if args.n is not None and args.size:
        raise UsageError("give --n or --size, not both")
    size = workload.chosen_size(args.size, args.n)
    check_sim_size(size)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants else None
    for v in variants or ():
        workload.variant(v)  # an unknown name is an error now, not after the others ran
    # files named after the workload, inside --out: OUT/NAME_timeline.json and OUT/NAME_timeline.png
    json_path = args.json or args.out / f"{workload.name}_timeline.json"
    stem = workload.name if args.json is None else json_path.stem
    print(f"backend: {device_facts().describe()}")
    records = variant_timelines(workload, size, variants)
    path = results.dump(results.make_meta(args.command_line, None), records, json_path)
    for r in records:
        gaps = [b["start_us"] - a["end_us"] for a, b in zip(r["spans"], r["spans"][1:])]
        mean_gap = f", mean gap {sum(gaps) / len(gaps):.1f} us" if gaps else ""
        print(f"  {r['variant']:<12} {len(r['spans'])} span(s), last end {r['spans'][-1]['end_us']:.1f} us{mean_gap}")
    for p in plots.render(results.load(path), args.out, stem):
        print(f"wrote {p}")
    print(f"wrote {path}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .profile import plots, results
    doc = results.load(args.results)
    made = plots.render(doc, args.out, args.results.stem)
    for p in made:
        print(f"wrote {p}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    """grade EXERCISE FILES... | grade --list | grade bundle EXERCISE --out ZIP | grade merge PARTS... --csv CSV.
    Exit status: 0 graded, 1 when a submission could not be read (its zero grade is still written)
    or the grader's sandbox failed, 2 for a bad command line."""
    import math

    from .grading import report
    from .grading.exercises import exercises, get_exercise
    for flag, value, least in (("--timeout", args.timeout, 0), ("--memory-gb", args.memory_gb, 0)):
        if not (math.isfinite(value) and value > least):
            raise ValueError(f"{flag} must be a number of {'seconds' if flag == '--timeout' else 'GiB'} > 0, "
                             f"got {value:g}")
    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.exercise == "merge":
        from .grading.batch import merge, write_gradebook
        if not args.submissions:
            raise ValueError("grade merge PARTS... --csv BOOK.csv: give per-submission JSON files or folders")
        grades = merge(args.submissions)
        if args.csv:
            write_gradebook(grades, args.csv)
        if args.json:
            report.write_json(args.json, {"grades": [g.to_dict() for g in grades]})
        print(f"merged {len(grades)} grade(s)" + (f"; wrote {args.csv}" if args.csv else ""))
        return 0
    if args.exercise == "bundle":
        from .grading.bundle import write_bundle
        if len(args.submissions) != 1:
            raise ValueError("grade bundle EXERCISE --out autograder.zip: name one exercise")
        out = write_bundle(str(args.submissions[0]), args.out or Path("autograder.zip"), args.exercises,
                           timeout_s=args.timeout, memory_gb=args.memory_gb)
        print(f"wrote {out} (Gradescope: grades {args.submissions[0]} on the simulator)")
        return 0
    if args.list or not args.exercise:
        import textwrap

        from .grading.grade import max_score
        from .runtime import BACKEND
        for e in exercises(args.exercises).values():
            here = max_score(e)
            print(f"{e.name:<17} lesson {e.lesson}  {e.title} ({here:g} points here on the {BACKEND}"
                  + (f", {e.max_score:g} with every check" if here != e.max_score else "")
                  + f"; workload {e.workload}, budgets from its {e.variant!r} variant)")
            print(textwrap.indent(e.signature, " " * 18))
        return 0
    try:
        from .grading.batch import collect, grade_many, shard, write_gradebook
        from .grading.grade import failed_grade
        ex = get_exercise(args.exercise, args.exercises)
        kw = {"timeout_s": args.timeout, "memory_bytes": int(args.memory_gb * 2**30)}
        picked = []
        if args.pick_one:  # a Gradescope submission folder: choose its one file
            from .grading.bundle import pick_one
            for folder in args.submissions:
                try:
                    picked.append(pick_one(folder, ex.name, ex.entry) if folder.is_dir() else folder)
                except FileNotFoundError as e:
                    picked.append(failed_grade(ex, folder.name, "unreadable", str(e)))
            paths = [p for p in picked if isinstance(p, Path)]
        else:
            paths = collect(args.submissions)
        if args.shard:
            paths = shard(paths, args.shard)
        if not paths and not picked and not args.shard:
            raise ValueError("no submissions given (files, or folders of .py / .ipynb)")
        grades = [g for g in picked if not isinstance(g, Path)]
        grades += grade_many(ex, paths, workers=args.workers, out_dir=args.out_dir, **kw) if paths else []
    except Exception as e:  # noqa: BLE001  (results.json must exist even when the grader fails)
        if args.gradescope:
            report.write_json(args.gradescope, report.crashed_gradescope(str(e)))
        raise
    for g in grades:
        print(report.text(g))
    if args.gradescope:
        if len(grades) != 1:
            report.write_json(args.gradescope, report.crashed_gradescope(f"{len(grades)} submissions for one "
                                                                         f"results.json"))
            raise ValueError("--gradescope writes one results.json: give one submission")
        report.write_json(args.gradescope, report.gradescope(grades[0]))
    if args.json:
        report.write_json(args.json, {"grades": [g.to_dict() for g in grades]})
    if args.csv:
        write_gradebook(grades, args.csv)
    bad = [g for g in grades if g.outcome in ("unreadable", "grader_error")]
    for g in bad:
        print(f"kernels-lab: {g.submission}: {g.outcome}: {g.summary.splitlines()[0]}", file=sys.stderr)
    return 1 if bad else 0

def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import report
    text, problems = report()
    print(text)
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("list", help="workloads, variants, patterns and launches").set_defaults(func=cmd_list)

    d = sub.add_parser("demo", help="run an instructor demo (validate, measure, plot, narrate)",
                       description="Run a demo: validate every variant against the float64 reference, "
                                   "measure it, print a table and a narration, write a PNG and a JSON.")
    d.add_argument("name", nargs="?", help="which demo (see --list)")
    d.add_argument("--list", action="store_true", help="list the demos")
    d.add_argument("--n", type=positive_int, default=None,
                   help="problem size of a one-axis workload, >= 1 (default: as large as the GPU holds, up to "
                        "2^28; small on the simulator)")
    d.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024 (see `kernels-lab list`)")
    d.add_argument("--reps", type=positive_int, default=30, help="timed repetitions per variant (GPU only)")
    d.add_argument("--out", type=Path, default=None, help="figure path (default kernels-lab-out/NAME.png)")
    d.add_argument("--json", type=Path, default=None, help="results path (default kernels-lab-out/NAME.json)")
    d.set_defaults(func=cmd_demo, outputs_default=_demo_outputs)

    pr = sub.add_parser("profile", help="sweep sizes for every variant of a workload (or launch / consumer / pdl)",
                        description="Measure every variant of WORKLOAD at each size: launches, planned and traced "
                                    "bytes, and on a GPU the median time, GB/s and the model. On a GPU, 'launch' "
                                    "measures the launch-overhead ladder, 'consumer' the persistent consumer's "
                                    "latency and throughput, 'pdl' the PDL / graph / grouped variants over G.")
    pr.add_argument("workload", help="a workload from `kernels-lab list`, or launch, consumer, pdl")
    pr.add_argument("--sizes", help="a one-axis workload's sizes, e.g. 4096,2^20,2^27 or 2^12..2^27 "
                                    "(default: the workload's sweep)")
    pr.add_argument("--size", help="the size by axis, e.g. rows=4096,cols=1024: measured alone, or the fixed axes "
                                   "of --sweep (axes left out take their defaults)")
    pr.add_argument("--sweep", help="one axis varied, e.g. cols=2^10..2^15 (powers of two between) or cols=1000,4096")
    pr.add_argument("--ncu", action="store_true", help="also measure DRAM bytes per kernel with Nsight Compute")
    pr.add_argument("--reps", type=positive_int, default=200,
                    help="timed repetitions per variant and size (many: the launch-bound sizes carry the host's "
                         "dispatch jitter, and their median needs many samples to settle)")
    pr.add_argument("--warm", action="store_true",
                    help="warm-cache figures: no L2 flush; inputs rotated among copies when they fit in L2")
    pr.add_argument("--json", type=Path, default=OUT_DIR / "profile.json", help="results file to write")
    pr.set_defaults(func=cmd_profile)

    t = sub.add_parser("timeline", help="a kernel timeline (Gantt chart) of every variant of a workload",
                       description="Run each variant of WORKLOAD once (after a warm-up run) and record, through "
                                   "the launch hook, a CUDA event before and after every launch in its own stream: "
                                   "one span per launch, launch gaps visible, no Nsight Systems needed. Events sit "
                                   "between kernels, so they hide PDL overlap: the PDL lesson's kernels stamp "
                                   "themselves instead (`kernels-lab profile pdl`). On the simulator the host "
                                   "clock stands in.")
    t.add_argument("workload", help="a workload from `kernels-lab list`")
    t.add_argument("--n", type=positive_int, default=None, help="problem size of a one-axis workload, >= 1 "
                                                               "(default: the workload's default size)")
    t.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024")
    t.add_argument("--variants", help="comma-separated variants (default: all)")
    t.add_argument("--json", type=Path, default=None,
                   help="results file to write (default: OUT/WORKLOAD_timeline.json, beside the PNG)")
    t.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the PNG (OUT/WORKLOAD_timeline.png) and, "
                                                             "by default, the JSON")
    t.set_defaults(func=cmd_timeline)

    pl = sub.add_parser("plot", help="draw the figures of a results JSON")
    pl.add_argument("results", type=Path, help="a kernels-lab results v1 file")
    pl.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the PNGs")
    pl.set_defaults(func=cmd_plot)

    g = sub.add_parser("grade", help="grade student submissions (each in a sandboxed child process)",
                       description="Grade submissions for EXERCISE: correctness on public and hidden cases at odd "
                                   "sizes and several launch configurations (credited only when the student's own "
                                   "kernel produced the output), races as results that differ between thread "
                                   "schedules, launch and traffic budgets (on right outputs only), a compile "
                                   "gate for the course's architecture (KERNELS_LAB_COURSE_ARCH, default sm_75); "
                                   "on a GPU also compute-sanitizer memcheck (every case) and racecheck, and "
                                   "speed against the reference solution (interleaved runs, classed faster / same / "
                                   "slower / unclear; grade with --workers 1 for the cleanest timings). Each "
                                   "submission runs confined (see `kernels-lab doctor`: sandbox). A hang, crash or "
                                   "import error becomes a grade with an explanation. Also: `grade bundle EXERCISE "
                                   "--out autograder.zip` (a Gradescope autograder, simulator) and `grade merge "
                                   "PARTS... --csv book.csv` (one gradebook from sharded runs).")
    g.add_argument("exercise", nargs="?", help="which exercise (see --list), or bundle / merge")
    g.add_argument("submissions", nargs="*", type=Path,
                   help=".py files, lesson .ipynb files, or folders of them (bundle: the exercise; merge: JSON files "
                        "or folders)")
    g.add_argument("--list", action="store_true", help="list the exercises and their points on this back-end")
    g.add_argument("--exercises", type=Path, action="append", default=[],
                   help="a Python file of your own exercises (views of registered workloads; see README, "
                        "'Write an exercise'); may be given more than once")
    g.add_argument("--gradescope", type=Path, help="write Gradescope results.json here (one submission)")
    g.add_argument("--json", type=Path, help="write every grade as JSON here")
    g.add_argument("--csv", type=Path, help="write a CSV gradebook here")
    g.add_argument("--out-dir", type=Path, help="one JSON per submission here; a re-run skips the submissions "
                                                "whose saved grade has the same content hash")
    g.add_argument("--shard", help="grade only the i-th of N interleaved slices of the sorted submissions (i/N, "
                                   "1-based), so a scheduler can split a class; combine with `grade merge`")
    g.add_argument("--pick-one", action="store_true", help="each folder given is one submission: grade its one "
                                                           ".py / .ipynb (Gradescope's /autograder/submission)")
    g.add_argument("--out", type=Path, help="bundle: the autograder zip to write (default autograder.zip)")
    g.add_argument("--workers", type=int, default=2, help="submissions graded at once")
    g.add_argument("--timeout", type=float, default=20.0,
                   help="seconds each run may take (one case in one launch configuration and schedule; loading the "
                        "submission gets as long), so a hang costs seconds (default 20)")
    g.add_argument("--memory-gb", type=float, default=4.0, help="memory limit per submission (GiB, > 0)")
    g.set_defaults(func=cmd_grade)

    sub.add_parser("doctor", help="back-end, versions, tools, and what to fix").set_defaults(func=cmd_doctor)
    return p


def _demo_outputs(args: argparse.Namespace) -> None:
    if args.name and not args.list:
        args.out = args.out or OUT_DIR / f"{args.name}.png"
        args.json = args.json or OUT_DIR / f"{args.name}.json"


def _preflight(args: argparse.Namespace) -> None:
    """What can be known wrong before any work: the back-end request, the output paths."""
    from . import runtime
    if runtime.BACKEND_ERROR and args.command != "doctor":
        raise UsageError(runtime.BACKEND_ERROR)
    if runtime.BACKEND == "ptx" and args.command in LAUNCHING:
        raise UsageError(f"{runtime.BACKEND_ENV}=ptx compiles kernels but cannot launch them; "
                         f"`{args.command}` needs {runtime.BACKEND_ENV}=gpu or sim (or unset it)")
    if default := getattr(args, "outputs_default", None):
        default(args)
    for attr, flag, folder in OUTPUTS.get(args.command, ()):
        if getattr(args, attr, None) is not None:
            check_output(getattr(args, attr), flag, folder)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = "kernels-lab " + " ".join(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        _preflight(args)
        return args.func(args)
    except (KeyError, ValueError, RuntimeError) as e:  # our errors name the problem: show them plainly
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:  # a file that cannot be read or written: name it, no traceback
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"{PROG}: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
