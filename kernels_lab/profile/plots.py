"""Plots, one look everywhere; headless (Agg) so demos and CI can draw without a screen.

Rules every figure here keeps: a legend for every colour and hatch; a title that says what the
bars drawn are (one run, or a median of many); measured beside modelled wherever both exist;
the copy ceiling wherever a bandwidth is shown; values too small to draw are written, not drawn
as stubs; the x-axis names the swept axis and its unit; wrong variants are marked as wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PATTERN_COLORS = {"unfused": "#d62728", "fused": "#1f77b4", "persistent": "#2ca02c",
                  "graph": "#9467bd", "pdl": "#ff7f0e"}
READ, WRITE = "#4c72b0", "#dd8452"
WRONG = "#b2182b"
NEIGHBOUR = "#7f7f7f"  # the producer and consumer around the PDL group
MODEL_DASHES = ("-", (0, (5, 3)), (0, (1, 2)), (0, (6, 2, 1, 2)))  # a model line per variant, told apart


def style(ax, title: str) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def save(fig, path: str | Path, layout: bool = True) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def source_note(fig, meta: dict[str, Any]) -> None:
    fig.text(0.01, 0.005, f"{meta.get('device', '?')} · {meta.get('date', '')[:10]}", fontsize=7, color="gray")


def _num(v: int) -> str:
    """4096 -> '2^12', 1000 -> '1,000'."""
    v = int(v)
    return f"2^{v.bit_length() - 1}" if v > 1 and v & (v - 1) == 0 else f"{v:,}"


def size_label(rec: dict[str, Any]) -> str:
    """'n = 2^28' or 'rows = 2^14, cols = 4,096' (records before named axes carry only n)."""
    size = rec.get("size") or {"n": rec["n"]}
    return ", ".join(f"{k} = {_num(v)}" for k, v in size.items())


# -- one size, every variant -------------------------------------------------------------------

_MEASURED = (("Nsight Compute DRAM (measured)", "bytes_dram_read", "bytes_dram_write"),
             ("traced on the simulator", "bytes_traced_read", "bytes_traced_write"))


def variant_bars(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Bytes per variant, planned (hatched) beside measured or traced (solid), read and write stacked;
    time per variant with GB/s and the time the planned bytes would take at the copy ceiling."""
    recs = [r for r in records if r.get("kind") is None]
    names = [r["variant"] for r in recs]
    measured = next((m for m in _MEASURED if any(r.get(m[1]) is not None for r in recs)), None)
    sources = [("plan (model)", "bytes_model_read", "bytes_model_write")] + ([measured] if measured else [])
    fig, (ax_b, ax_t) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    width = 0.8 / len(sources)
    biggest = max((r.get("bytes_model") or 0) for r in recs) if recs else 0
    scale, unit = next((s, u) for s, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
                       if biggest >= 2 * s or s == 1)
    for k, (label, rd, wr) in enumerate(sources):
        planned = k == 0 and measured is not None
        xs = [i + (k - (len(sources) - 1) / 2) * width for i in range(len(recs))]
        reads = [(r.get(rd) or 0) / scale for r in recs]
        writes = [(r.get(wr) or 0) / scale for r in recs]
        look = {"hatch": "///", "alpha": 0.45} if planned else {}
        ax_b.bar(xs, reads, width, color=READ, edgecolor="white", **look)
        ax_b.bar(xs, writes, width, bottom=reads, color=WRITE, edgecolor="white", **look)
        if k > 0:  # the measured total against the plan, on top of the measured bar
            for x, r, rd_, wr_ in zip(xs, recs, reads, writes):
                if r.get(rd) is not None and r.get("bytes_model"):
                    diff = (r[rd] + (r.get(wr) or 0)) / r["bytes_model"] - 1
                    ax_b.annotate(f"{diff:+.1%}", (x, rd_ + wr_), ha="center", va="bottom", fontsize=7,
                                  xytext=(0, 2), textcoords="offset points")
    handles = [Patch(color=READ, label="read"), Patch(color=WRITE, label="write")]
    if measured:
        handles += [Patch(facecolor="gray", alpha=0.45, edgecolor="white", hatch="///", label="plan (model)"),
                    Patch(facecolor="gray", label=measured[0])]
    else:
        handles += [Patch(facecolor="white", edgecolor="white", label="plan (model); no measured bytes in this run")]
    ax_b.legend(handles=handles, fontsize=7, loc="upper right")
    ax_b.set_xticks(range(len(recs)), names, rotation=15)
    ax_b.set_ylabel(f"global memory traffic ({unit})")
    style(ax_b, f"bytes moved, {size_label(recs[0])}" if recs else "bytes moved")
    ceiling = meta.get("ceiling_GBs")
    if any(r.get("time_ms") is not None for r in recs):
        times = [r.get("time_ms") or 0 for r in recs]
        err = [[t - (r.get("time_ms_q1") or t) for t, r in zip(times, recs)],
               [(r.get("time_ms_q3") or t) - t for t, r in zip(times, recs)]]
        bars = ax_t.bar(range(len(recs)), times, 0.6, yerr=err, capsize=3,
                        color=[PATTERN_COLORS.get(r["pattern"], "gray") for r in recs])
        for bar, r in zip(bars, recs):
            if r.get("GBs"):
                pct = f" ({r['GBs'] / ceiling:.0%})" if ceiling else ""
                ax_t.annotate(f"{r['GBs']:.0f} GB/s{pct}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
        handles = [Patch(color=PATTERN_COLORS.get(p, "gray"), label=p) for p in dict.fromkeys(r["pattern"] for r in recs)]
        if ceiling:
            floor = [r["bytes_model"] / (ceiling * 1e9) * 1e3 for r in recs]
            ax_t.hlines(floor, [i - 0.38 for i in range(len(recs))], [i + 0.38 for i in range(len(recs))],
                        colors="black", linestyles="--", lw=1.2)
            handles.append(Line2D([], [], color="black", ls="--", lw=1.2,
                                  label=f"planned bytes at the copy ceiling ({ceiling:.0f} GB/s)"))
        ax_t.set_ylim(0, max(times) * 1.18)
        ax_t.legend(handles=handles, fontsize=7, loc="upper right")
        if ceiling and any((r.get("GBs") or 0) > ceiling for r in recs):
            ax_t.annotate("above 100%: GB/s counts the planned bytes, and L2 keeps some of them from DRAM (the last\n"
                          "writes, intermediates read back: Nsight Compute counts fewer DRAM bytes than planned);\n"
                          "the ceiling is a measured copy kernel, not the hardware's peak",
                          (0, -0.2), xycoords="axes fraction", va="top", fontsize=6.5, color="dimgray")
        ax_t.set_ylabel("device time, median (ms)")
        style(ax_t, f"time per variant ({'cold' if meta.get('cold_l2', True) else 'warm'} L2; "
                     f"labels: planned bytes / time)")
    else:
        ax_t.axis("off")
        ax_t.text(0.5, 0.5, "no timings on the CUDA simulator\n(run on a GPU to measure)",
                  ha="center", va="center", fontsize=11, color="gray")
    ax_t.set_xticks(range(len(recs)), names, rotation=15)
    source_note(fig, meta)
    return save(fig, path)


# -- sweeps ------------------------------------------------------------------------------------

def _axis(meta: dict[str, Any]) -> tuple[str, str]:
    """The swept axis and its unit (results before named axes: n, elements)."""
    return meta.get("sweep_axis") or "n", meta.get("sweep_unit") or "elements"


def _x(rec: dict[str, Any], axis: str) -> int:
    return (rec.get("size") or {}).get(axis, rec["n"])


def _by_variant(records: Sequence[dict[str, Any]], axis: str = "n") -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("kind") is None and r.get("time_ms") is not None:
            out.setdefault(r["variant"], []).append(r)
    return {k: sorted(v, key=lambda r: _x(r, axis)) for k, v in out.items()}


def _l2_marker(ax, meta: dict[str, Any], bytes_per_x: float | None) -> None:
    l2 = meta.get("l2_bytes")
    if l2 and bytes_per_x:
        ax.axvline(l2 / bytes_per_x, color="gray", ls=":", lw=1)
        ax.annotate("working set = L2", (l2 / bytes_per_x, 0.98), xycoords=("data", "axes fraction"),
                    fontsize=7, color="gray", ha="right", rotation=90, va="top")


def sweep_time(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Time vs size per variant, log-log: measured medians (points, quartile bars) and the model (lines)."""
    axis, unit = _axis(meta)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    groups = _by_variant(records, axis)
    handles, models = [], {}
    for k, (name, recs) in enumerate(groups.items()):
        color, dash = plt.cm.tab10(k), MODEL_DASHES[k % len(MODEL_DASHES)]
        xs = [_x(r, axis) for r in recs]
        t = [r["time_ms"] for r in recs]
        err = [[r["time_ms"] - r["time_ms_q1"] for r in recs], [r["time_ms_q3"] - r["time_ms"] for r in recs]]
        ax.errorbar(xs, t, yerr=err, fmt="o", ms=4, color=color)
        label = f"{name} ({recs[0]['launches']} launch{'es' if recs[0]['launches'] > 1 else ''})"
        if all("time_ms_model" in r for r in recs):
            model = [r["time_ms_model"] for r in recs]
            ax.plot(xs, model, ls=dash, color=color, alpha=0.8, lw=1.4)
            # variants with the same launches and bytes have the same model: their dashes interleave
            same = next((other for other, (x0, m0) in models.items() if x0 == xs and np.allclose(m0, model)), None)
            label += f", model = {same}'s" if same else ""
            models[name] = (xs, model)
        handles.append(Line2D([], [], color=color, marker="o", ms=4, ls=dash if name in models else "",
                              label=label))
    # L2 holds the working set (inputs + output of a one-kernel variant) up to this size
    single = next((recs for recs in groups.values() if recs[0]["launches"] == 1), None)
    _l2_marker(ax, meta, single[0]["bytes_model"] / _x(single[0], axis) if single else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"{axis} ({unit})")
    ax.set_ylabel("median device time (ms)")
    fit = next((r for r in records if "model_launch_us" in r), None)
    handles += [Line2D([], [], marker="o", ls="", color="black", label="points: measured median (quartile bars)")]
    if fit:
        handles.append(Line2D([], [], color="black", ls="--", label="lines: the model, in each variant's colour"))
        latency = (f", DRAM latency {fit['model_latency_ns']:.0f} ns (Little's law)"
                   if fit.get("model_latency_ns") else "")
        ax.text(0.99, 0.02, f"model: bandwidth <= copy ceiling{latency},\n"
                f"fixed kernel cost {fit['model_fixed_kernel_us']:.1f} us, exposed launch cost "
                f"{fit['model_launch_us']:.1f} us", transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    style(ax, f"{records[0]['workload'] if records else ''}: launch-bound when small, bandwidth-bound when large")
    ax.grid(which="both", alpha=0.2)
    source_note(fig, meta)
    return save(fig, path)


def sweep_bandwidth(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Achieved GB/s (planned bytes / time) per variant against the copy ceiling of the same run."""
    axis, unit = _axis(meta)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, (name, recs) in enumerate(_by_variant(records, axis).items()):
        ax.plot([_x(r, axis) for r in recs], [r["GBs"] for r in recs], "o-", ms=4, color=plt.cm.tab10(k), label=name)
    if meta.get("ceiling_GBs"):
        ax.axhline(meta["ceiling_GBs"], color="black", ls="--", lw=1,
                   label=f"copy ceiling, same run ({meta['ceiling_GBs']:.0f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{axis} ({unit})")
    ax.set_ylabel("achieved GB/s (planned bytes / median time)")
    ax.legend(fontsize=8, loc="upper left")
    style(ax, "bandwidth per variant")
    source_note(fig, meta)
    return save(fig, path)





# -- timelines ---------------------------------------------------------------------------------

def gantt(ax, spans: Sequence[dict[str, Any]], color_of, hatch: str = "") -> None:
    """One bar per span (kernels as rows, top to bottom in launch order)."""
    for row, span in enumerate(spans):
        ax.barh(row, span["end_us"] - span["start_us"], left=span["start_us"], height=0.7,
                color=color_of(span["kernel"]), hatch=hatch, edgecolor="white" if hatch else None, lw=0)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def timeline_chart(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Gantt chart per variant from event (or stamp) spans: launch gaps side by side."""
    recs = [r for r in records if r.get("kind") == "timeline"]
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 1.4 + 0.9 * len(recs) + 0.12 * sum(len(r["spans"]) for r in recs)),
                             sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        gantt(ax, r["spans"], lambda k, p=r.get("pattern", "fused"): PATTERN_COLORS.get(p, "#1f77b4"))
        ax.set_yticks(range(len(r["spans"])), [s["kernel"] for s in r["spans"]], fontsize=6)
        end = max((s["end_us"] for s in r["spans"]), default=0)
        ax.set_title(f"{r['variant']} ({r.get('pattern', '?')}): {len(r['spans'])} span(s), {end:.1f} us from the "
                     f"first start to the last end (one run)", fontsize=9, loc="left")
    src = recs[0]["source"] if recs else ""
    axes[-1, 0].set_xlabel(f"time since the first launch started (us, {src})")
    fig.suptitle(f"{recs[0]['workload']} at {size_label(recs[0])}: one row per launch" if recs else "", fontsize=10)
    source_note(fig, meta)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))  # room above for the legend, below for the source note
    patterns = list(dict.fromkeys(r.get("pattern", "fused") for r in recs))
    fig.legend(handles=[Patch(color=PATTERN_COLORS.get(p, "gray"), label=p) for p in patterns],
               fontsize=7, loc="upper right", ncol=len(patterns), frameon=False, bbox_to_anchor=(1.0, 1.0))
    return save(fig, path, layout=False)



# -- a results file, every figure it supports --------------------------------------------------

def demo_times(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """benchmarks/demo_times.py: seconds per demo, first and second run, with the limit a live class can wait."""
    names = list(dict.fromkeys(r["demo"] for r in records))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
    for k, (attempt, color) in enumerate((("first", "#9ecae1"), ("second", "#1f77b4"))):
        times = {r["demo"]: r["wall_s"] for r in records if r["attempt"] == attempt}
        ys = [i + (k - 0.5) * 0.38 for i in range(len(names))]
        ax.barh(ys, [times.get(n, 0) for n in names], height=0.36, color=color,
                label=f"{attempt} run" + (" (compiles into numba's cache)" if attempt == "first" else ""))
    limit = meta["limit_s"]
    ax.axvline(limit, color="#d62728", ls="--", lw=1, label=f"the limit: {limit:.0f} s")
    ax.set_yticks(range(len(names)), [f"demo {n}" for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("seconds, `kernels-lab demo NAME` start to exit")
    style(ax, "How long each demo takes from the command line")
    ax.legend(fontsize=7, loc="lower right")
    source_note(fig, meta)
    return save(fig, path)


def ceiling_sizes(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """profile/ceiling_sizes.py: the read and copy kernels' GB/s against the size of x, on both clocks."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for what, color in (("read", "#1f77b4"), ("copy", "#ff7f0e")):
        mine = sorted((r for r in records if r["what"] == what), key=lambda r: r["floats"])
        mib = [4 * r["floats"] / 2 ** 20 for r in mine]
        ax.plot(mib, [r["GBs"] for r in mine], "o-", color=color, label=f"{what}: one pass, L2 cold")
        ax.plot(mib, [r["GBs_steady"] for r in mine], "s--", color=color, label=f"{what}: passes back to back")
    ax.axvline(256, color="#888888", ls=":", lw=1, label="a study's x (256 MiB)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("x, MiB (the array read; the copy writes as much again, counted in its GB/s)")
    ax.set_ylabel("GB/s")
    ax.set_ylim(bottom=0)
    style(ax, "The ceilings' own kernels against the size of a pass")
    ax.legend(fontsize=7, loc="lower right")
    source_note(fig, meta)
    return save(fig, path)


def figure_key(record: dict[str, Any]) -> str | None:
    """What a record's figures are declared under in a topic's FIGURES: its kind; a study's records (one kind
    for every topic) under "study:WORKLOAD"."""
    kind = record.get("kind")
    return f"{kind}:{record['workload']}" if kind == "study" else kind


def render(doc: dict[str, Any], out_dir: str | Path, stem: str) -> list[Path]:
    """Every figure a results file supports: the harness's own (below) and those of the topics whose record
    kinds it holds (each topic's figures.py declares FIGURES)."""
    out_dir = Path(out_dir)
    meta, records = doc["meta"], doc["records"]
    made = []
    variant_recs = [r for r in records if r.get("kind") is None]
    axis = _axis(meta)[0]
    sizes = sorted({_x(r, axis) for r in variant_recs})
    if variant_recs:
        largest = [r for r in variant_recs if _x(r, axis) == sizes[-1]]
        made.append(variant_bars(largest, meta, out_dir / f"{stem}_bytes.png"))
    if len(sizes) > 1 and any(r.get("time_ms") is not None for r in variant_recs):
        made.append(sweep_time(variant_recs, meta, out_dir / f"{stem}_time.png"))
        made.append(sweep_bandwidth(variant_recs, meta, out_dir / f"{stem}_bandwidth.png"))
    if any(r.get("kind") == "timeline" for r in records):
        made.append(timeline_chart(records, meta, out_dir / f"{stem}_timeline.png"))
    if any(r.get("kind") == "demo_time" for r in records):
        made.append(demo_times(records, meta, out_dir / f"{stem}_seconds.png"))
    if any(r.get("kind") == "ceiling_size" for r in records):
        made.append(ceiling_sizes([r for r in records if r.get("kind") == "ceiling_size"], meta,
                                  out_dir / f"{stem}_rates.png"))
    from .. import topics
    kinds = {figure_key(r) for r in records}
    for draw in dict.fromkeys(draw for kind, draw in topics.figures().items() if kind in kinds):
        made += draw(doc, out_dir, stem)
    return made
