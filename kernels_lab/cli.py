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
    from .core import workloads
    for w in workloads().values():
        n = w.sizes["simulator"]
        print(f"{w.name}: {w.about}")
        for v in w.variants.values():
            plan = v.plan(n)
            kernels = " -> ".join(k.kernel for k in plan.launches)
            per_elem = plan.bytes_total / n
            print(f"  {v.name:<13} {v.pattern:<11} {plan.n_launches} launch(es), {per_elem:g} B/element: "
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


def _parse_sizes(text: str | None) -> list[int] | None:
    if not text:
        return None
    sizes = []
    for part in text.split(","):
        part = part.strip()
        n = 2 ** int(part[2:]) if part.startswith("2^") else int(float(part))
        if n < 1:
            raise ValueError(f"--sizes: {part!r} is not a positive size")
        sizes.append(n)
    return sizes


def _ladder():
    from .profile.ladder import measure_ladder
    rungs = measure_ladder()
    for r in rungs:
        print(f"  {r['path']:<44} host {r['host_us_per_launch']:8.2f} us/launch   "
              f"device {r['device_us_per_boundary']:8.2f} us/boundary")
    return rungs


def _consumer():
    from .profile.consumer_bench import measure_consumer
    return measure_consumer()


def _pdl():
    from .profile.pdl_bench import measure_pdl
    return measure_pdl()


SPECIAL_PROFILES = {"launch": _ladder, "consumer": _consumer, "pdl": _pdl}


def cmd_profile(args: argparse.Namespace) -> int:
    from .profile import results
    from .runtime import ON_GPU, device_facts
    command = args.command_line
    print(f"backend: {device_facts().describe()}")
    if args.workload in SPECIAL_PROFILES:
        records = SPECIAL_PROFILES[args.workload]()
        path = results.dump(results.make_meta(command, None), records, args.json)
        print(f"{len(records)} records; wrote {path}")
        return 0
    from .core import get_workload
    from .profile.sweep import DEFAULT_SIZES, sweep
    workload = get_workload(args.workload)
    sizes = _parse_sizes(args.sizes) or (list(DEFAULT_SIZES) if ON_GPU else [1, 257, workload.sizes["simulator"]])
    ceiling = None
    if ON_GPU:
        from .profile.ceiling import measure_copy_ceiling
        ceiling = measure_copy_ceiling().GBs
        print(f"copy ceiling: {ceiling:.0f} GB/s")
    else:
        print("simulator: launches and traced bytes only, no timings")
    records = sweep(workload, sizes, json_path=args.json, ceiling_GBs=ceiling, reps=args.reps,
                    flush=not args.warm, command=command)
    status = 0
    if args.ncu:
        status = _attach_ncu(workload, records, args.json)
    for r in records:
        t = f"{r['time_ms']:.4f} ms" if r.get("time_ms") is not None else "no time"
        extra = f" model {r['time_ms_model']:.4f} ms ({r['model_error']:+.0%})" if "time_ms_model" in r else ""
        print(f"  {r['variant']:<12} n={r['n']:>11,} {r['launches']} launch  {r['bytes_model']:>14,} B  {t}{extra}")
    print(f"wrote {args.json}")
    return status


def _attach_ncu(workload, records, json_path) -> int:
    from .profile import ncu, results
    n = max(r["n"] for r in records)
    variants = list(dict.fromkeys(r["variant"] for r in records))
    try:
        measured = ncu.measure(workload.name, n, variants)
    except ncu.NcuError as e:
        print(f"ncu: {e}; measured DRAM bytes are left out", file=sys.stderr)
        return 3
    for r in records:
        if r["n"] == n:
            kernels = measured[r["variant"]]
            r["bytes_dram_read"] = int(sum(k.dram_read for k in kernels))
            r["bytes_dram_write"] = int(sum(k.dram_write for k in kernels))
            r["ncu_time_ms"] = sum(k.time_s for k in kernels) * 1e3
            r["ncu_vs_model"] = (r["bytes_dram_read"] + r["bytes_dram_write"]) / r["bytes_model"] - 1
            print(f"  ncu {r['variant']:<12} DRAM {r['bytes_dram_read'] + r['bytes_dram_write']:>14,} B "
                  f"({r['ncu_vs_model']:+.1%} vs model)")
    results.dump(results.load(json_path)["meta"], records, json_path)  # keep the sweep's own meta
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from .core import get_workload
    from .profile import plots, results
    from .profile.timeline import variant_timelines
    from .runtime import ON_GPU, device_facts
    workload = get_workload(args.workload)
    n = args.n or workload.sizes["gpu" if ON_GPU else "simulator"]
    print(f"backend: {device_facts().describe()}")
    variants = args.variants.split(",") if args.variants else None
    records = variant_timelines(workload, n, variants)
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
    from .grading.exercises import EXERCISES, get_exercise
    if args.list or not args.exercise:
        import textwrap
        for e in EXERCISES.values():
            print(f"{e.name:<17} lesson {e.lesson}  {e.title} ({e.max_score:g} points)")
            print(textwrap.indent(e.signature, " " * 18))
        return 0
    try:
        from .grading.batch import collect, grade_many, write_gradebook
        ex = get_exercise(args.exercise)
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
    d.add_argument("--n", type=int, default=None, help="problem size (default: large on a GPU, small on the simulator)")
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
    pr.add_argument("--sizes", help="comma-separated sizes, e.g. 4096,2^20,2^27 (default: 2^12 .. 2^27)")
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
    t.add_argument("--n", type=int, default=None, help="problem size (default: the workload's demo size)")
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
