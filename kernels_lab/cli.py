"""kernels-lab: see what fusion, persistence and launch strategies do to GPU kernels.

  kernels-lab list                      every workload, its variants, patterns and launches
  kernels-lab demo elementwise          validate, measure and plot one lesson topic
  kernels-lab demo --list               the demos there are
  kernels-lab profile elementwise ...   sweep sizes, write a results JSON
  kernels-lab plot RESULTS.json         draw the figures of a results file
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

    sub.add_parser("doctor", help="back-end, versions, tools, and what to fix").set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
