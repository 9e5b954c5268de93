"""The commands that measure and draw: list, demo, profile, bench, timeline, plot, doctor. Each checks
its arguments and output paths first (a mistake is a UsageError before any work), then works."""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_ENVIRONMENT, UsageError
from .inputs import check_in_file
from .outputs import PROG, check_out_dir, check_out_file, given


def _workload(name: str):
    """A workload from `kernels-lab list`; a fixed measurement's name points to `bench`."""
    from ..core import get_workload
    from ..profile.runs import benches
    try:
        return get_workload(name)
    except KeyError as e:
        if name in benches():  # asked only for a name that is no workload: finding the benches imports them all
            raise UsageError(f"{name!r} is not a workload but a fixed GPU measurement: run `kernels-lab bench "
                             f"{name}` (workloads: `kernels-lab list`)") from None
        raise UsageError(e.args[0]) from None


def _variant(workload, name: str):
    try:
        return workload.variant(name)
    except KeyError as e:
        raise UsageError(e.args[0]) from None


def check_n_or_size(args: argparse.Namespace) -> None:
    """--n (a one-axis workload's size) and --size (by axis) say the same thing: one of them, not empty."""
    if given(args.size, "--size") and args.n is not None:
        raise UsageError("give --n or --size, not both")


MAX_ELEMENTS = 2**36  # 256 GiB of float32 in one array: more than any GPU holds, on any back-end


def check_sim_size(size) -> None:
    """Refuse sizes no GPU can hold and, on the simulator, sizes that would run for many minutes, saying
    what to do instead."""
    from ..backend import BACKEND
    if size.elements > MAX_ELEMENTS:
        raise UsageError(f"size {size} is {size.elements:,} elements: more than any GPU's memory holds (at most "
                         f"{MAX_ELEMENTS:,} = 2^36 here)")
    if (problem := BACKEND.size_problem(size.elements, size)) is not None:
        raise UsageError(problem)


# -- list, demo -------------------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    from ..core import all_workloads
    for w in all_workloads().values():
        size = w.default_size(False)
        print(f"{w.name}: {w.about}")
        print("  axes: " + "; ".join(f"{a.name} ({a.about or a.unit}) default {a.gpu:,} on a GPU, {a.sim:,} on the "
                                      f"simulator" for a in w.axes) + f"   [here: {w.describe_axes()}]")
        for v in w.variants.values():
            plan = v.plan(size)
            kernels = " -> ".join(k.kernel for k in plan.launches)
            per_elem = plan.bytes_total / size.elements
            print(f"  {v.name:<13} {v.pattern:<11} {plan.n_launches} launch(es), {per_elem:.3g} B/element at {size}: "
                  f"{kernels}")
            print(f"  {'':<13} {'':<11} {v.about}")
    return 0


DEMO_REPS = 30


def cmd_demo(args: argparse.Namespace) -> int:
    from ..backend import BACKEND
    from ..demos import DemoRequest, demos
    known = demos()
    if args.list or not args.name:
        for d in known.values():
            print(f"{d.name:<13} {d.about}")
        return 0
    if args.name not in known:
        raise UsageError(f"unknown demo {args.name!r}; known demos: {', '.join(known)} (see `kernels-lab demo --list`)")
    demo = known[args.name]
    check_n_or_size(args)
    if not demo.takes_size:
        flags = [f for f, v in (("--n", args.n), ("--size", args.size), ("--reps", args.reps)) if v is not None]
        if flags:
            raise UsageError(f"demo {args.name} measures fixed configurations: {', '.join(flags)} "
                             f"{'does' if len(flags) == 1 else 'do'} not apply to it")
    if args.json is not None and not BACKEND.can_time and not demo.writes_results_here:
        raise UsageError(f"demo {args.name} measures nothing on the simulator (it draws the committed GPU results "
                         f"into --out): --json does not apply here")
    json = args.json or args.out / f"{args.name}.json"
    check_out_dir(args.out)
    check_out_file(json, "--json", args.out)
    return demo.run(DemoRequest(size=args.size, n=args.n, reps=args.reps or DEMO_REPS, out=args.out, json=json,
                                figure=args.out / f"{args.name}.png", command_line=args.command_line))


# -- profile, bench, timeline, plot -----------------------------------------------------------------

def chosen_sizes(workload, args: argparse.Namespace) -> list:
    """--sweep AXIS=LO..HI (one axis varied, the others at --size or their defaults), --sizes for a
    one-axis workload, else the default sweep of the first axis."""
    swept, listed = given(args.sweep, "--sweep"), given(args.sizes, "--sizes")
    if swept and listed:
        raise UsageError("give --sizes or --sweep, not both (--sizes is --sweep for a one-axis workload)")
    base = workload.parse_size(args.size) if given(args.size, "--size") else None
    if swept:
        axis, eq, values = args.sweep.partition("=")
        if eq and not values.strip():
            raise UsageError(f"--sweep {args.sweep}: no values after '='; write {axis.strip()}=2^10..2^15, "
                             f"{axis.strip()}=1000,4096, or {axis.strip()} alone for its default range")
        sizes = workload.parse_sweep(args.sweep, base)[1]
    elif listed:
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
    from ..profile.runs import ncu_missing, profile_workload
    from ..backend import BACKEND
    from ..runtime import device_facts
    workload = _workload(args.workload)
    sizes = chosen_sizes(workload, args)
    if args.ncu and not BACKEND.can_time:
        raise UsageError("--ncu measures DRAM bytes on a GPU with Nsight Compute; this back-end cannot: drop --ncu")
    args.json = args.json or args.out / f"{workload.name}_profile.json"
    check_out_dir(args.out)
    check_out_file(args.json, "--json", args.out)
    if args.ncu and (missing := ncu_missing()):
        print(f"{PROG}: error: {missing}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    print(f"backend: {device_facts().describe()}")
    records, ncu_problem = profile_workload(workload, sizes, json_path=args.json, reps=args.reps, warm=args.warm,
                                            with_ncu=args.ncu, command=args.command_line)
    for r in records:
        t = f"{r['time_ms']:.4f} ms" if r.get("time_ms") is not None else "no time"
        extra = f" model {r['time_ms_model']:.4f} ms ({r['model_error']:+.0%})" if "time_ms_model" in r else ""
        size = ",".join(f"{k}={v:,}" for k, v in r["size"].items())
        print(f"  {r['variant']:<12} {size:>24} {r['launches']} launch  {r['bytes_model']:>14,} B  {t}{extra}")
    print(f"wrote {args.json}")
    if ncu_problem:
        print(f"{PROG}: {ncu_problem}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    return 0


def _chosen_groups(study, wanted: str | None):
    """The study, cut to the groups --group names (comma-separated); all of them when not given."""
    import dataclasses
    if wanted is None:
        return study
    names = [g.strip() for g in wanted.split(",") if g.strip()]
    known = [g.name for g in study.groups]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"--group {wanted!r}: study {study.name} has the groups {', '.join(known)}")
    return dataclasses.replace(study, groups=tuple(g for g in study.groups if g.name in names))


def _no_bench(name: str, studied: dict, known: dict) -> UsageError:
    """Why `bench NAME` cannot run NAME: a topic without numbers of its own, or no such name."""
    import pkgutil

    from .. import topics
    choices = f"studies: {', '.join(studied)}; fixed measurements: {', '.join(known)}"
    if name in {m.name for m in pkgutil.iter_modules(topics.__path__) if m.ispkg}:
        return UsageError(f"topic {name} publishes no numbers: it has no study (topics/{name}/study.py, README 'Add "
                          f"a topic'); `kernels-lab profile {name}` sweeps its variants ({choices})")
    return UsageError(f"unknown bench {name!r}; {choices}")


def cmd_bench(args: argparse.Namespace) -> int:
    """A topic's study (profile/study.py) or a fixed GPU measurement (launch, consumer, pdl): one results file,
    and the figures it supports in --out."""
    from ..backend import BACKEND
    from ..profile import plots, results
    from ..profile.runs import benches, run_bench
    from ..profile.study import run_study, studies, table
    from ..runtime import device_facts
    known, studied = benches(), studies()
    if args.list or not args.name:
        w = max(len(name) for name in (*studied, *known))
        for name, s in studied.items():
            groups = ", ".join(g.name for g in s.groups)
            print(f"{name:<{w}}  study ({groups}): every line checked, then timed against its anchors; {s.about}")
        for name, b in known.items():
            print(f"{name:<{w}}  fixed measurement (GPU only): {b.about}")
        return 0
    if args.name not in known and args.name not in studied:
        raise _no_bench(args.name, studied, known)
    fixed = args.name not in studied
    if fixed and not BACKEND.can_time:
        raise UsageError(f"bench {args.name} measures microseconds and needs a GPU; on the simulator, "
                         f"`kernels-lab demo {args.name}` shows the committed GPU results")
    if fixed and (args.ncu or args.check or args.reps is not None or args.group is not None):
        raise UsageError(f"bench {args.name} is a fixed measurement: --ncu, --check, --reps and --group are for "
                         f"studies")
    study = None if fixed else _chosen_groups(studied[args.name], args.group)
    if args.ncu and not BACKEND.can_time:
        raise UsageError("--ncu measures DRAM bytes on a GPU with Nsight Compute; this back-end cannot: drop --ncu")
    args.json = args.json or args.out / f"{args.name}_bench.json"
    check_out_dir(args.out)
    check_out_file(args.json, "--json", args.out)
    if args.ncu:
        from ..profile.runs import ncu_missing
        if missing := ncu_missing():
            print(f"{PROG}: error: {missing}", file=sys.stderr)
            return EXIT_ENVIRONMENT
    print(f"backend: {device_facts().describe()}")
    if fixed:
        records = run_bench(args.name, args.json, args.command_line)
        print(f"{len(records)} records; wrote {args.json}")
        wrong = 0
    else:
        run = run_study(study, args.json, command=args.command_line, reps=args.reps, ncu=args.ncu,
                        check_only=args.check)
        wrong = len(run.wrong)
    doc = results.load(args.json)
    timed = fixed or any(r.get("time_ms") is not None for r in doc["records"])  # a study's check sizes: not timed
    if not fixed:
        print(table(run.records))
        if study.report is not None and timed:
            print(study.report(doc))
        for what, why in run.skipped.items():
            print(f"skipped {what}: {why}")
        for p in run.problems:
            print(f"PROBLEM: {p}")
        print(f"{len(run.records)} records; wrote {run.path}")
    if timed:  # nothing to draw from check sizes alone
        for made in plots.render(doc, args.out, args.json.stem):
            print(f"wrote {made}")
    return 1 if wrong else 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from ..profile import plots, results
    from ..profile.timeline import variant_timelines
    from ..runtime import device_facts
    workload = _workload(args.workload)
    check_n_or_size(args)
    size = workload.chosen_size(args.size, args.n)
    check_sim_size(size)
    named = given(args.variants, "--variants")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] if named else list(workload.variants)
    if named and not variants:
        raise UsageError(f"--variants {args.variants!r} names no variant; give names separated by commas "
                         f"({', '.join(workload.variants)}), or leave --variants out for all")
    refused = {v: why for v in variants if (why := _variant(workload, v).why_not(size)) is not None}
    if named and refused:  # an unknown or refused name is an error now, not after the others ran
        raise UsageError("; ".join(refused.values()))
    variants = [v for v in variants if v not in refused]
    if not variants:
        raise UsageError(f"no variant of {workload.name} runs size {size}: " + "; ".join(refused.values()))
    # files named after the workload, inside --out: OUT/NAME_timeline.json and OUT/NAME_timeline.png
    stem = workload.name if args.json is None else args.json.stem
    args.json = args.json or args.out / f"{workload.name}_timeline.json"
    check_out_dir(args.out)
    check_out_file(args.json, "--json", args.out)
    print(f"backend: {device_facts().describe()}")
    for v, why in refused.items():
        print(f"  {v:<12} left out: {why}")
    records = variant_timelines(workload, size, variants)
    path = results.dump(results.make_meta(args.command_line, None), records, args.json)
    for r in records:
        gaps = [b["start_us"] - a["end_us"] for a, b in zip(r["spans"], r["spans"][1:])]
        mean_gap = f", mean gap {sum(gaps) / len(gaps):.1f} us" if gaps else ""
        print(f"  {r['variant']:<12} {len(r['spans'])} span(s), last end {r['spans'][-1]['end_us']:.1f} us{mean_gap}")
    for p in plots.render(results.load(path), args.out, stem):
        print(f"wrote {p}")
    print(f"wrote {path}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from ..profile import plots, results
    check_in_file(args.results, "plot:", "give a results file, e.g. kernels-lab-out/elementwise_profile.json")
    check_out_dir(args.out)
    try:
        doc = results.load(args.results)
    except results.ResultsError as e:  # the user's file, not ours: say what is wrong with it
        raise UsageError(str(e)) from None
    if not doc["records"]:
        raise UsageError(f"{args.results}: no records, so nothing to draw")
    made = plots.render(doc, args.out, args.results.stem)
    if not made:
        kinds = sorted({str(r.get("kind")) for r in doc["records"]})
        raise UsageError(f"{args.results}: nothing to draw: `plot` has no figure for records of kind "
                         f"{', '.join(kinds)} (the demo that measured them may draw them: `kernels-lab demo --list`)")
    for p in made:
        print(f"wrote {p}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..doctor import report
    text, problems = report()
    print(text)
    return 1 if problems else 0
