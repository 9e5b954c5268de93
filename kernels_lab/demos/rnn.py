"""Demo: a recurrent layer's time loop, one launch per step vs one persistent kernel for all steps.

Also the two figures of benchmarks/rnn_bench.py's results (benchmarks/rnn_plots.py draws them
from a results file; on the simulator this demo draws them from the committed H200 run):
time per step per variant and anchor at each batch and hidden size, and the bytes each variant
moves (W read every step vs once).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from ..backend import BACKEND
from ..core import Size, get_workload
from ..profile import plots, results
from ..profile.measure import measure_workload
from . import Demo
from .common import Column, chosen_size, opening, results_table, show_committed, workload_columns

COMMITTED = "rnn_h200.json"


def per_step(rec: dict[str, Any]) -> dict[str, Any]:
    """us per step and TFLOP/s of the recurrent part (2 hidden^2 batch flops per step), when timed."""
    size = rec["size"]
    if rec.get("time_ms") is None:
        return {"us_per_step": None, "tflops": None}
    seconds = rec["time_ms"] * 1e-3
    return {"us_per_step": seconds * 1e6 / size["steps"],
            "tflops": 2 * size["hidden"] ** 2 * size["batch"] * size["steps"] / seconds / 1e12}


COLUMNS = workload_columns(22, 16) + [Column("us/step", "us_per_step", 10, "{:.2f}", "n/a"),
                                      Column("TFLOP/s", "tflops", 9, "{:.2f}", "n/a")]


def narrate(records: Sequence[dict[str, Any]], size: Size, refused: dict[str, str]) -> str:
    by = {r["variant"]: r for r in records}
    lines = [f"Every step needs all of the step before, so per-step variants pay a kernel boundary per step: "
             f"unfused {by['unfused']['launches']} launches, fused {by['fused']['launches']}; and they read W "
             f"({4 * size.hidden ** 2:,} bytes) from memory at every step."]
    if "persistent" in by:
        p = by["persistent"]
        lines.append(f"persistent launches once and keeps W in registers: {p['bytes_model']:,} bytes planned against "
                     f"fused's {by['fused']['bytes_model']:,} ({by['fused']['bytes_model'] / p['bytes_model']:.1f}x "
                     f"fewer); a grid barrier replaces each boundary.")
    lines += [f"{name} does not run at {size}: {why}" for name, why in refused.items()]
    if by["fused"].get("us_per_step") is not None:
        base = by["fused"]["us_per_step"]
        lines += [f"  {r['variant']:<20} {r['us_per_step']:7.2f} us per step, {r['tflops']:5.2f} TFLOP/s "
                  f"({base / r['us_per_step']:.1f}x fused)" for r in records]
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element and match "
                     "the plan.")
    return "\n".join(lines)


def benchmark_table(doc: dict[str, Any]) -> str:
    """benchmarks/rnn_bench.py's results: us per step of every variant and anchor at each hidden size and
    batch (the medians its figure draws)."""
    recs = [r for r in doc["records"] if r.get("us_per_step") is not None and r.get("version") is None]
    configs = list(dict.fromkeys((r["size"]["hidden"], r["size"]["batch"]) for r in recs))
    steps = sorted({r["size"]["steps"] for r in recs})
    lines = [f"us per step (median; {', '.join(map(str, steps))} steps a run); columns: hidden / batch",
             f"  {'variant':<22}" + "".join(f"{f'{h} / {b}':>12}" for h, b in configs)]
    for name in dict.fromkeys(r["variant"] for r in recs):
        at = {(r["size"]["hidden"], r["size"]["batch"]): r["us_per_step"] for r in recs if r["variant"] == name}
        lines.append(f"  {name:<22}" + "".join(f"{at[c]:>12.2f}" if c in at else f"{'-':>12}" for c in configs))
    return "\n".join(lines + ["  (-: not run at that size)"])


# -- the benchmark's figures ----------------------------------------------------------------------

STYLE = {"unfused": ("#d62728", "-", "o"), "fused": ("#1f77b4", "-", "o"), "graph": ("#9467bd", "-", "o"),
         "persistent": ("#2ca02c", "-", "s"), "persistent_flag": ("#98df8a", "-", "s"),
         "persistent_gridsync": ("#98df8a", "-", "s"),
         "torch_eager": ("#7f7f7f", "--", "^"), "torch_graph": ("#000000", "--", "^"),
         "torch_cudnn": ("#ff7f0e", "--", "v")}


def step_figure(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """us per step against batch, one panel per hidden: every variant and anchor (log scale)."""
    recs = [r for r in records if r.get("us_per_step") is not None and r.get("version") is None]
    hiddens = sorted({r["size"]["hidden"] for r in recs})
    fig, axes = plots.plt.subplots(1, len(hiddens), figsize=(5.2 * len(hiddens), 4.4), squeeze=False, sharey=True)
    names = list(dict.fromkeys(r["variant"] for r in recs))
    for ax, hidden in zip(axes[0], hiddens):
        for name in names:
            pts = sorted((r["size"]["batch"], r["us_per_step"]) for r in recs
                         if r["variant"] == name and r["size"]["hidden"] == hidden)
            if pts:
                color, line, marker = STYLE.get(name, ("gray", ":", "x"))
                ax.plot(*zip(*pts), line, color=color, marker=marker, ms=5, label=name)
        batches = sorted({r["size"]["batch"] for r in recs})
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(batches, [str(b) for b in batches])
        ax.set_xlabel("batch (sequences stepped together)")
        plots._style(ax, f"hidden {hidden}: time per step (median)")
    axes[0][0].set_ylabel("us per step (log)")
    axes[0][-1].legend(fontsize=7, title="variant (solid) / anchor (dashed)", title_fontsize=7,
                       loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    plots._source_note(fig, meta)
    return plots._save(fig, path)


def bytes_figure(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Planned bytes per variant at the largest hidden, batch 4 (or the smallest batch there): W's share
    (read at every step, or once) under everything else, which is mostly h_{t-1} read by every block:
    32 KB per block and step at hidden 2048, batch 4, served by L2 (and L1), not DRAM."""
    recs = [r for r in records if r.get("bytes_model") is not None and r.get("version") is None]
    hidden = max(r["size"]["hidden"] for r in recs)
    batches = sorted({r["size"]["batch"] for r in recs if r["size"]["hidden"] == hidden})
    batch = 4 if 4 in batches else batches[0]
    recs = [r for r in recs if r["size"]["hidden"] == hidden and r["size"]["batch"] == batch]
    size = recs[0]["size"]
    fig, ax = plots.plt.subplots(figsize=(7.5, 4.2))
    for i, r in enumerate(recs):
        reads_w = 1 if r["pattern"] == "persistent" else size["steps"] - 1  # step 0 has no h_{-1} to multiply
        w = 4 * size["hidden"] ** 2 * reads_w / 2**30
        ax.bar(i, w, 0.6, color=plots.READ)
        ax.bar(i, r["bytes_model"] / 2**30 - w, 0.6, bottom=w, color=plots.WRITE)
        ax.annotate(f"W read {reads_w}x", (i, r["bytes_model"] / 2**30), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(recs)), [r["variant"] for r in recs], rotation=15)
    ax.set_ylabel("planned global memory traffic (GiB)")
    ax.legend(handles=[plots.Patch(color=plots.READ, label="W: from DRAM"),
                       plots.Patch(color=plots.WRITE, label="h_{t-1} read by every block (from L2), u, h_t, z")],
              fontsize=7, loc="upper right")
    plots._style(ax, f"bytes per run: hidden {hidden}, batch {batch}, {size['steps']} steps")
    plots._source_note(fig, meta)
    return plots._save(fig, path)


def figures(doc: dict[str, Any], out_dir: str | Path, stem: str = "rnn") -> list[Path]:
    """The figures a results file supports (no time per step without timings)."""
    out_dir, records, meta = Path(out_dir), doc["records"], doc["meta"]
    made = [bytes_figure(records, meta, out_dir / f"{stem}_bytes.png")]
    if any(r.get("us_per_step") is not None for r in records):
        made.insert(0, step_figure(records, meta, out_dir / f"{stem}_us_per_step.png"))
    return made


# -- the demo ---------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    workload = get_workload("rnn")
    size = chosen_size(workload, args)
    opening(size)
    refused = {v.name: why for v in workload.variants.values() if (why := v.why_not(size)) is not None}
    records = [{**r, **per_step(r)} for r in measure_workload(workload, size, reps=args.reps)]
    print(results_table(records, COLUMNS))
    print()
    print(narrate(records, size, refused))
    meta = results.make_meta(args.command_line, None)
    json_path = results.dump(meta, records, args.json)
    print(f"\nwrote {json_path} and {plots.variant_bars(records, meta, args.figure)}")
    if not BACKEND.can_time:
        show_committed(COMMITTED, benchmark_table)
    return 0


DEMO = Demo("rnn", "a recurrent layer: per-step launches (unfused, fused, graph) vs one persistent kernel with W "
                   "in registers", run, order=5)
