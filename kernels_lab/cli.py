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
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

OUT_DIR = Path("kernels-lab-out")


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
        print(f"unknown demo {args.name!r}; known demos: {', '.join(known)}", file=sys.stderr)
        return 2
    args.out = args.out or OUT_DIR / f"{args.name}.png"
    args.json = args.json or OUT_DIR / f"{args.name}.json"
    return known[args.name].run(args)


def chosen_sizes(workload, args: argparse.Namespace) -> list:
    """--sweep AXIS=LO..HI (one axis varied, the others at --size or their defaults), --sizes for a
    one-axis workload, else the default sweep of the first axis."""
    base = workload.parse_size(args.size) if args.size else None
    if args.sweep:
        return workload.parse_sweep(args.sweep, base)[1]
    if args.sizes:
        axis = workload.axes[0].name
        if len(workload.axes) != 1:
            raise ValueError(f"--sizes is for one-axis workloads; {workload.name} has axes "
                             f"{', '.join(workload.axis_names)}: use --sweep AXIS=LO..HI")
        return workload.parse_sweep(f"{axis}={args.sizes}", base)[1]
    if base is not None:
        return [base]
    return workload.sweep(workload.axes[0].name)


def cmd_profile(args: argparse.Namespace) -> int:
    from .profile.runs import SPECIAL_PROFILES, profile_workload, run_special
    from .runtime import device_facts
    print(f"backend: {device_facts().describe()}")
    if args.workload in SPECIAL_PROFILES:
        records = run_special(args.workload, args.json, args.command_line)
        print(f"{len(records)} records; wrote {args.json}")
        return 0
    from .core import get_workload
    workload = get_workload(args.workload)
    sizes = chosen_sizes(workload, args)
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
    size = workload.chosen_size(args.size, args.n)
    print(f"backend: {device_facts().describe()}")
    variants = args.variants.split(",") if args.variants else None
    records = variant_timelines(workload, size, variants)
    path = results.dump(results.make_meta(args.command_line, None), records, args.json)
    for r in records:
        gaps = [b["start_us"] - a["end_us"] for a, b in zip(r["spans"], r["spans"][1:])]
        mean_gap = f", mean gap {sum(gaps) / len(gaps):.1f} us" if gaps else ""
        print(f"  {r['variant']:<12} {len(r['spans'])} span(s), last end {r['spans'][-1]['end_us']:.1f} us{mean_gap}")
    for p in plots.render(results.load(path), args.out, path.stem):
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
    from .grading import report
    from .grading.exercises import exercises, get_exercise
    if args.list or not args.exercise:
        import textwrap
        for e in exercises(args.exercises).values():
            print(f"{e.name:<17} lesson {e.lesson}  {e.title} ({e.max_score:g} points; workload {e.workload}, "
                  f"budgets from its {e.variant!r} variant)")
            print(textwrap.indent(e.signature, " " * 18))
        return 0
    try:
        from .grading.batch import collect, grade_many, write_gradebook
        ex = get_exercise(args.exercise, args.exercises)
        paths = collect(args.submissions)
        if not paths:
            raise ValueError("no submissions given (files, or folders of .py / .ipynb)")
        grades = grade_many(ex, paths, workers=args.workers, timeout_s=args.timeout,
                            memory_bytes=int(args.memory_gb * 2**30))
    except Exception as e:  # noqa: BLE001  (results.json must exist even when the grader fails)
        if args.gradescope:
            report.write_json(args.gradescope, report.crashed_gradescope(str(e)))
        raise
    for g in grades:
        print(report.text(g))
    if args.gradescope:
        if len(grades) != 1:
            raise ValueError("--gradescope writes one results.json: give one submission")
        report.write_json(args.gradescope, report.gradescope(grades[0]))
    if args.json:
        report.write_json(args.json, {"grades": [g.to_dict() for g in grades]})
    if args.csv:
        write_gradebook(grades, args.csv)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import report
    text, problems = report()
    print(text)
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernels-lab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("list", help="workloads, variants, patterns and launches").set_defaults(func=cmd_list)

    d = sub.add_parser("demo", help="run an instructor demo (validate, measure, plot, narrate)",
                       description="Run a demo: validate every variant against the float64 reference, "
                                   "measure it, print a table and a narration, write a PNG and a JSON.")
    d.add_argument("name", nargs="?", help="which demo (see --list)")
    d.add_argument("--list", action="store_true", help="list the demos")
    d.add_argument("--n", type=int, default=None, help="problem size of a one-axis workload (default: large on a GPU, "
                                                      "small on the simulator)")
    d.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024 (see `kernels-lab list`)")
    d.add_argument("--reps", type=int, default=30, help="timed repetitions per variant (GPU only)")
    d.add_argument("--out", type=Path, default=None, help="figure path (default kernels-lab-out/NAME.png)")
    d.add_argument("--json", type=Path, default=None, help="results path (default kernels-lab-out/NAME.json)")
    d.set_defaults(func=cmd_demo)

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
    pr.add_argument("--reps", type=int, default=200,
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
    t.add_argument("--n", type=int, default=None, help="problem size of a one-axis workload (default: the "
                                                      "workload's demo size)")
    t.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024")
    t.add_argument("--variants", help="comma-separated variants (default: all)")
    t.add_argument("--json", type=Path, default=OUT_DIR / "timeline.json", help="results file to write")
    t.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the PNG")
    t.set_defaults(func=cmd_timeline)

    pl = sub.add_parser("plot", help="draw the figures of a results JSON")
    pl.add_argument("results", type=Path, help="a kernels-lab results v1 file")
    pl.add_argument("--out", type=Path, default=OUT_DIR, help="folder for the PNGs")
    pl.set_defaults(func=cmd_plot)

    g = sub.add_parser("grade", help="grade student submissions (each in a sandboxed child process)",
                       description="Grade submissions for EXERCISE: correctness on public and hidden cases at odd "
                                   "sizes and several launch configurations, race detection under perturbed "
                                   "schedules, launch and traffic budgets, an sm_90 compile gate; on a GPU also "
                                   "compute-sanitizer memcheck and racecheck, and speed against the reference "
                                   "solution (interleaved runs, classed faster / same / slower / unclear; grade "
                                   "with --workers 1 for the cleanest timings). A hang, crash or import error "
                                   "becomes a grade with an explanation.")
    g.add_argument("exercise", nargs="?", help="which exercise (see --list)")
    g.add_argument("submissions", nargs="*", type=Path, help=".py files, lesson .ipynb files, or folders of them")
    g.add_argument("--list", action="store_true", help="list the exercises")
    g.add_argument("--exercises", type=Path, action="append", default=[],
                   help="a Python file of your own exercises (views of registered workloads; see README, "
                        "'Write an exercise'); may be given more than once")
    g.add_argument("--gradescope", type=Path, help="write Gradescope results.json here (one submission)")
    g.add_argument("--json", type=Path, help="write every grade as JSON here")
    g.add_argument("--csv", type=Path, help="write a CSV gradebook here")
    g.add_argument("--workers", type=int, default=2, help="submissions graded at once")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds a submission may run")
    g.add_argument("--memory-gb", type=float, default=4.0, help="memory limit per submission")
    g.set_defaults(func=cmd_grade)

    sub.add_parser("doctor", help="back-end, versions, tools, and what to fix").set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = "kernels-lab " + " ".join(sys.argv[1:] if argv is None else argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (KeyError, ValueError, RuntimeError) as e:  # our errors name the problem: show them plainly
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"kernels-lab: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
