"""What the block chain draws and prints: STEM_time.png, us per pass of every line (ours and torch's) at each
hidden size, from the study's records (study.py: the steady clock, passes back to back); STEM_tiles.png, one
megakernel pass tile by tile from its %globaltimer stamps (stamps.py); `tables`, the same numbers as text (lesson
07 prints them), and `targets`, the issue's goals (`kernels-lab bench block_chain` prints both after its table);
benchmarks/render_figures.py finds the figures in FIGURES."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...profile.plots import plt, save, source_note, style


def _us(rec: dict[str, Any]) -> float | None:
    if rec.get("us_per_pass") is not None:
        return rec["us_per_pass"]
    ms = rec.get("time_ms_steady")
    return None if ms is None else ms * 1e3


def time_figure(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    """Bars: us per pass, one group of bars per (hidden, layers), one bar per line, in the records' order."""
    recs = [r for r in doc["records"] if _us(r) is not None]
    if not recs:
        return []
    sizes = list(dict.fromkeys((r["size"]["hidden"], r["size"]["layers"]) for r in recs))
    lines = list(dict.fromkeys(r.get("line", r["variant"]) for r in recs))
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.3 * len(lines) * len(sizes))), 4.2))
    width = 0.8 / len(lines)
    palette = plt.get_cmap("tab10" if len(lines) <= 10 else "tab20")  # past 10 lines tab10 repeats its colours
    for k, line in enumerate(lines):
        ys = [next((_us(r) for r in recs if r.get("line", r["variant"]) == line
                    and (r["size"]["hidden"], r["size"]["layers"]) == s), np.nan) for s in sizes]
        ax.bar(np.arange(len(sizes)) + (k - (len(lines) - 1) / 2) * width, ys, width, label=line,
               color=palette(k % palette.N))
    ax.set_xticks(np.arange(len(sizes)), [f"hidden {h}\n{l} layer{'s' * (l > 1)}" for h, l in sizes])
    ax.set_yscale("log")  # torch's eager path is ~25x the rest: on a linear axis the others are slivers
    ax.set_ylabel("us per pass (steady state, log)")
    ax.legend(fontsize=7, ncols=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    style(ax, "block chain: a kernel boundary per layer against a counter per tile")
    source_note(fig, doc["meta"])
    return [save(fig, Path(out) / f"{stem}_time.png")]


# legend labels: the wait phase also holds the weights' loads (layer 0 has nothing else to wait for)
PHASE_COLORS = {"weights, then wait for producers": "#bbbbbb", "work": "#1f77b4", "release": "#ff7f0e"}


def tiles_figure(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    """One panel per stamped line and size: each tile of each layer a thin bar from its start, grey while it
    waits for its producers, blue while it computes, orange while it releases; layers stacked bottom to top."""
    recs = [r for r in doc["records"] if r.get("kind") == "tile_stamps"]
    if not recs:
        return []
    cols = min(2, len(recs))
    rows = -(-len(recs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.6 * rows), squeeze=False)
    for ax, r in zip(axes.flat, recs):
        stamps = np.asarray(r["pass_us"])  # (layers, tiles, 4): started, waited, computed, released
        layers, tiles = stamps.shape[:2]
        for l in range(layers):
            y = l + 0.85 * np.arange(tiles) / tiles
            for k, (name, color) in enumerate(PHASE_COLORS.items()):
                ax.hlines(y, stamps[l, :, k], stamps[l, :, k + 1], colors=color, lw=0.9,
                          label=name if l == 0 else None)
        ax.set_yticks(np.arange(layers) + 0.42, [str(l) for l in range(layers)])
        ax.set_ylabel("layer (its tiles bottom to top)")
        ax.set_xlabel("us from the pass's first stamp")
        per = f", {r['us_per_pass']:.1f} us a pass unstamped" if r.get("us_per_pass") else ""
        style(ax, f"{r['line']}, hidden {r['size']['hidden']}\n{tiles} tiles a layer on {r['blocks']} blocks{per}")
        ax.title.set_fontsize(9)
    for ax in axes.flat[len(recs):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7, loc="lower right")
    source_note(fig, doc["meta"])
    return [save(fig, Path(out) / f"{stem}_tiles.png")]


MEGAKERNELS = ("megakernel", "megakernel_marked")


def split_grid(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the study's own records, the grid sweep's): the sweep times graph_pdl and the megakernels again, so the
    two are never looked up together."""
    return [r for r in records if r["group"] != "grid"], [r for r in records if r["group"] == "grid"]


def at(records: list[dict[str, Any]], hidden: int, layers: int, line: str) -> dict[str, Any] | None:
    """The line's checked, timed record at (hidden, layers), or None."""
    return next((r for r in records if r["line"] == line and r["size"]["hidden"] == hidden
                 and r["size"]["layers"] == layers and r.get("us_per_pass") and r["checked"] is not False), None)


def tables(records: list[dict[str, Any]]) -> str:
    """Every line's times and the per-layer slope, as text (a lesson prints this; the ratios are its columns)."""
    lines = list(dict.fromkeys(r["line"] for r in records))
    sizes = list(dict.fromkeys((r["size"]["hidden"], r["size"]["layers"]) for r in records))
    w = max((len(line) for line in lines), default=4)  # the longest line's name sets the column
    out = [f"{'hidden':>6} {'layers':>6} {'line':<{w}} {'us/pass':>8} {'us/layer':>8} {'1 pass':>8} "
           f"{'graph_pdl/':>10} {'torch_graph/':>12}"]
    for hidden, layers in sizes:
        pdl, tg = at(records, hidden, layers, "graph_pdl"), at(records, hidden, layers, "torch_graph")
        for line in lines:
            if (r := at(records, hidden, layers, line)) is None:
                continue
            ratio = (lambda ref: f"{ref['us_per_pass'] / r['us_per_pass']:.2f}x" if ref else "-")
            out.append(f"{hidden:>6} {layers:>6} {line:<{w}} {r['us_per_pass']:>8.2f} {r['us_per_layer']:>8.2f} "
                       f"{r['latency_us']:>8.1f} {ratio(pdl):>10} {ratio(tg):>12}")
    out += ["", "per layer, (t_8 - t_1) / 7, and a pass's fixed cost, t_1 - per layer (steady state, us):",
            f"{'hidden':>6} {'line':<{w}} {'per layer':>9} {'fixed':>7}"]
    for hidden in dict.fromkeys(h for h, _ in sizes):
        for line in lines:
            one, eight = at(records, hidden, 1, line), at(records, hidden, 8, line)
            if one and eight:
                slope = (eight["us_per_pass"] - one["us_per_pass"]) / 7
                out.append(f"{hidden:>6} {line:<{w}} {slope:>9.2f} {one['us_per_pass'] - slope:>7.2f}")
    return "\n".join(out)


def targets(records: list[dict[str, Any]]) -> str:
    """Issue 34 item 2's goals, met or missed: the project's business, printed by `kernels-lab bench block_chain`
    (the study's report), never by a lesson."""
    sizes = list(dict.fromkeys((r["size"]["hidden"], r["size"]["layers"]) for r in records))
    out = ["issue 34 item 2, 8 layers: a megakernel >= 1.2x graph_pdl and >= 2x torch's CUDA graph"]
    for hidden in dict.fromkeys(h for h, _ in sizes):
        for mega in MEGAKERNELS:
            if (mk := at(records, hidden, 8, mega)) is None:
                continue
            for ref, goal in (("graph_pdl", 1.2), ("torch_graph", 2.0)):
                if r := at(records, hidden, 8, ref):
                    x = r["us_per_pass"] / mk["us_per_pass"]
                    out.append(f"  hidden {hidden}: {ref} / {mega} = {x:.2f}x ({'met' if x >= goal else 'missed'})")
    return "\n".join(out)


FIGURES = {"study:block_chain": time_figure, "tile_stamps": tiles_figure}
