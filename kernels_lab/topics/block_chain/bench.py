"""The block chain's GPU run (issue 34 item 2): its study, then the tables that answer the issue.

    PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 -m kernels_lab.topics.block_chain.bench OUT_DIR [--no-compile]

About a minute on an H200, most of it compiling (numba's kernels for two widths, torch.compile's once: leave it
out with --no-compile).
run_study (profile/study.py) does the work: the copy ceiling; then per size every line (our five variants,
torch eager, torch's CUDA graph, torch.compile) checked against float64 into poisoned outputs, timed
interleaved on CUDA events (one pass with a cold L2, median of 30; the steady state, passes back to back,
median of 10), checked again; OUT_DIR/block_chain_study.json (results v1, meta: command, device, date,
versions). Printed last: us per pass and per layer of every line, the per-layer cost (t_8 - t_1) / 7 against
a pass's fixed cost, and the issue's two ratios at 8 layers (megakernel against graph_pdl and torch's graph).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernels_lab.profile.study import Study, run_study
from kernels_lab.topics.block_chain.figures import time_figure
from kernels_lab.topics.block_chain.study import STUDY

MEGAKERNELS = ("megakernel", "megakernel_marked")


def _at(records: list[dict[str, Any]], hidden: int, layers: int, line: str) -> dict[str, Any] | None:
    return next((r for r in records if r["line"] == line and r["size"]["hidden"] == hidden
                 and r["size"]["layers"] == layers and r.get("us_per_pass") and r["checked"] is not False), None)


def tables(records: list[dict[str, Any]]) -> str:
    """Every line's times and the per-layer slope, as text (a lesson prints this; the ratios are its columns)."""
    lines = list(dict.fromkeys(r["line"] for r in records))
    sizes = list(dict.fromkeys((r["size"]["hidden"], r["size"]["layers"]) for r in records))
    out = [f"{'hidden':>6} {'layers':>6} {'line':<17} {'us/pass':>8} {'us/layer':>8} {'1 pass':>8} "
           f"{'graph_pdl/':>10} {'torch_graph/':>12}"]
    for hidden, layers in sizes:
        pdl, tg = _at(records, hidden, layers, "graph_pdl"), _at(records, hidden, layers, "torch_graph")
        for line in lines:
            if (r := _at(records, hidden, layers, line)) is None:
                continue
            ratio = (lambda ref: f"{ref['us_per_pass'] / r['us_per_pass']:.2f}x" if ref else "-")
            out.append(f"{hidden:>6} {layers:>6} {line:<17} {r['us_per_pass']:>8.2f} {r['us_per_layer']:>8.2f} "
                       f"{r['latency_us']:>8.1f} {ratio(pdl):>10} {ratio(tg):>12}")
    out += ["", "per layer, (t_8 - t_1) / 7, and a pass's fixed cost, t_1 - per layer (steady state, us):",
            f"{'hidden':>6} {'line':<17} {'per layer':>9} {'fixed':>7}"]
    for hidden in dict.fromkeys(h for h, _ in sizes):
        for line in lines:
            one, eight = _at(records, hidden, 1, line), _at(records, hidden, 8, line)
            if one and eight:
                slope = (eight["us_per_pass"] - one["us_per_pass"]) / 7
                out.append(f"{hidden:>6} {line:<17} {slope:>9.2f} {one['us_per_pass'] - slope:>7.2f}")
    return "\n".join(out)


def verdicts(records: list[dict[str, Any]]) -> str:
    """Issue 34 item 2's goals, met or missed: the project's business, printed by the bench, never by a lesson."""
    sizes = list(dict.fromkeys((r["size"]["hidden"], r["size"]["layers"]) for r in records))
    out = ["issue 34 item 2, 8 layers: a megakernel >= 1.2x graph_pdl and >= 2x torch's CUDA graph"]
    for hidden in dict.fromkeys(h for h, _ in sizes):
        for mega in MEGAKERNELS:
            if (mk := _at(records, hidden, 8, mega)) is None:
                continue
            for ref, goal in (("graph_pdl", 1.2), ("torch_graph", 2.0)):
                if r := _at(records, hidden, 8, ref):
                    x = r["us_per_pass"] / mk["us_per_pass"]
                    out.append(f"  hidden {hidden}: {ref} / {mega} = {x:.2f}x ({'met' if x >= goal else 'missed'})")
    return "\n".join(out)


def without_compile(study: Study) -> Study:
    """The study without its torch.compile anchor (tens of seconds of compiling)."""
    keep = tuple(a for a in study.anchors if a.name != "torch_compile")
    groups = tuple(replace(g, lines=tuple(n for n in g.lines if n != "torch_compile") if g.lines else None)
                   for g in study.groups)
    return replace(study, anchors=keep, groups=groups)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for block_chain_study.json and block_chain_time.png")
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile anchor")
    args = ap.parse_args(argv)
    study = without_compile(STUDY) if args.no_compile else STUDY
    run = run_study(study, args.out / "block_chain_study.json", command=" ".join(sys.argv))
    doc = json.loads(run.path.read_text())
    made = time_figure(doc, args.out, "block_chain")
    print("\n".join(["", f"wrote {run.path}", *[f"wrote {m}" for m in made],
                     *[f"PROBLEM: {p}" for p in run.problems], "", tables(run.records), "", verdicts(run.records)]))
    return 1 if run.wrong else 0


if __name__ == "__main__":
    sys.exit(main())
