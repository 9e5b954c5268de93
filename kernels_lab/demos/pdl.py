"""Demo: PDL, graphs and a grouped kernel for a group of small kernels between unknown work."""

from __future__ import annotations

import argparse

from ..workloads import quantize_group as pdl
from ..profile import plots, results
from ..runtime import ON_GPU, device_facts
from . import Demo, committed_results, show_committed


def narrate(records: list[dict]) -> str:
    lines = []
    for g in sorted({r["G"] for r in records}):
        for cls in ("tiny", "large"):
            by = {r["variant"]: r for r in records if r["G"] == g and r["size_class"] == cls}
            if not by:
                continue
            plain = by["plain"]["e2e_us"]
            parts = ", ".join(f"{v} {by[v]['e2e_us']:.0f} us ({plain / by[v]['e2e_us']:.2f}x)"
                              for v in pdl.VARIANTS if v in by)
            lines.append(f"G={g} {cls}: {parts}")
            if "wrong_trigger" in by:
                lines.append(f"   wrong_trigger: consumer started {by['wrong_trigger']['consumer_start_minus_group_end_us']:+.1f} us "
                             f"after the group's last kernel ended (negative = too early)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    print(f"backend: {device_facts().describe()}")
    if not ON_GPU:
        print("On the simulator there is no PDL (the pdl variants fall back to plain launches, with a warning) "
              "and no timing; here are the rules and a correctness run.")
        for g in (1, 2, 5):
            print(f"  G={g}: (wait, trigger) per group kernel = {pdl.pdl_switches(g)}")
        import warnings
        group = pdl.Group([7, 300, 45])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bad = {v: pdl.check(group, pdl.run_once(group, v)) for v in pdl.VARIANTS}
        print("  correct variants: " + ", ".join(f"{v}: {'ok' if p is None else p}" for v, p in bad.items()))
        made = show_committed("pdl_h200.json", args.out.parent, "pdl")
        if (path := committed_results("pdl_h200.json")) is not None:
            print(narrate(results.load(path)["records"]))
        print("\n".join(f"wrote {m}" for m in made))
        return 0 if all(p is None for p in bad.values()) else 1
    from ..profile.pdl_bench import measure_pdl
    records = measure_pdl(groups=(8, 32), classes=("tiny", "large"), reps=20)
    print(narrate(records))
    meta = results.make_meta(args.command_line, None)
    results.dump(meta, records, args.json)
    made = [plots.pdl_timeline(records, meta, args.out), plots.pdl_summary(records, meta, args.out.with_name(args.out.stem + "_e2e.png"))]
    print(f"wrote {args.json}, " + ", ".join(map(str, made)))
    return 0


DEMO = Demo("pdl", "a group of small kernels: plain, PDL, graph, graph+PDL, grouped; with a timeline", run, order=6)
