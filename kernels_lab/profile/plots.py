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
HEADLINE_PAYLOAD = 1024  # bytes: the consumer payload the README quotes, drawn in the latency figure


def _style(ax, title: str) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def _save(fig, path: str | Path, layout: bool = True) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _source_note(fig, meta: dict[str, Any]) -> None:
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
        style = {"hatch": "///", "alpha": 0.45} if planned else {}
        ax_b.bar(xs, reads, width, color=READ, edgecolor="white", **style)
        ax_b.bar(xs, writes, width, bottom=reads, color=WRITE, edgecolor="white", **style)
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
    _style(ax_b, f"bytes moved, {size_label(recs[0])}" if recs else "bytes moved")
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
        _style(ax_t, f"time per variant ({'cold' if meta.get('cold_l2', True) else 'warm'} L2; "
                     f"labels: planned bytes / time)")
    else:
        ax_t.axis("off")
        ax_t.text(0.5, 0.5, "no timings on the CUDA simulator\n(run on a GPU to measure)",
                  ha="center", va="center", fontsize=11, color="gray")
    ax_t.set_xticks(range(len(recs)), names, rotation=15)
    _source_note(fig, meta)
    return _save(fig, path)


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
    _style(ax, f"{records[0]['workload'] if records else ''}: launch-bound when small, bandwidth-bound when large")
    ax.grid(which="both", alpha=0.2)
    _source_note(fig, meta)
    return _save(fig, path)


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
    _style(ax, "bandwidth per variant")
    _source_note(fig, meta)
    return _save(fig, path)


# -- launch overhead ---------------------------------------------------------------------------

def ladder(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Host us per launch and device us per boundary, per launch path (log scale). Values below the
    axis floor are written at the axis, not drawn as stubs."""
    rungs = [r for r in records if r.get("kind") == "launch"]
    fig, ax = plt.subplots(figsize=(9.5, 0.62 * len(rungs) + 2.4))
    floor = 0.1  # us: the axis starts here; smaller values are written, not drawn
    biggest = max([r["host_us_per_launch"] for r in rungs] + [r["device_us_per_boundary"] for r in rungs] + [1])
    host_bound = False
    for y, r in enumerate(rungs):
        # the GPU runs each tiny kernel in far less than the host takes to launch the next: it waits, and
        # the spacing it sees between kernels is the host's time per launch
        waits = (r["host_us_per_launch"] >= floor
                 and abs(r["device_us_per_boundary"] / r["host_us_per_launch"] - 1) < 0.02)
        host_bound |= waits
        for dy, key, color in ((-0.2, "host_us_per_launch", READ), (0.2, "device_us_per_boundary", WRITE)):
            v = r[key]
            if v >= floor:
                ax.barh(y + dy, v - floor, 0.38, left=floor, color=color, hatch="..." if waits and dy > 0 else None,
                        edgecolor="white" if waits and dy > 0 else None, lw=0)
                note = " (= host)" if waits and dy > 0 else ""
                ax.annotate(f"{v:.2f} us{note}", (v, y + dy), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize=7)
            else:
                text = "none" if v == 0 else f"{v:.3f} us"
                ax.annotate(f"{text} (below the axis)", (floor, y + dy), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize=7, color=color, style="italic")
    ax.set_yticks(range(len(rungs)), [r["path"] for r in rungs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(floor, biggest * 3)
    ax.set_xlabel("microseconds (log)")
    handles = [Patch(color=READ, label="host us per launch (Python and driver)"),
               Patch(color=WRITE, label="device us per kernel boundary (CUDA events over the launches)")]
    if host_bound:
        handles.append(Patch(facecolor=WRITE, edgecolor="white", hatch="...",
                             label="host-bound: the device spacing is the host's launch time"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.1), frameon=False)
    # below the axes: the bars of the last rungs reach the lower right
    _style(ax, "what one kernel boundary costs")
    _source_note(fig, meta)
    return _save(fig, path)


# -- the persistent consumer -------------------------------------------------------------------

MODE_COLORS = {"ideal": "gray", "persistent-ll": "#2ca02c", "persistent-seq": "#98df8a", "launch": "#d62728",
               "batch8": "#ff7f0e"}


def middle_payload_bytes(records: Sequence[dict[str, Any]]) -> int:
    """The middle payload size of a consumer benchmark."""
    sizes = sorted({r["payload_bytes"] for r in records if r.get("kind") == "consumer"})
    return sizes[len(sizes) // 2]


def headline_payload_bytes(records: Sequence[dict[str, Any]]) -> int:
    """The payload the README quotes (1 KiB) when the benchmark has it, else the middle one."""
    sizes = {r["payload_bytes"] for r in records if r.get("kind") == "consumer"}
    return HEADLINE_PAYLOAD if HEADLINE_PAYLOAD in sizes else middle_payload_bytes(records)


def _bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def consumer_latency_cdf(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Round-trip latency CDF per mode at the headline payload size, one producer."""
    recs = [r for r in records if r.get("kind") == "consumer" and r["producers"] == 1]
    size = headline_payload_bytes(recs)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in (r for r in recs if r["payload_bytes"] == size):
        q = r["latency_quantiles_us"]
        ax.plot(q, np.linspace(0, 1, len(q)), color=MODE_COLORS.get(r["mode"], "black"),
                lw=2 if r["mode"] != "ideal" else 1, ls="--" if r["mode"] == "ideal" else "-",
                label=f"{r['mode']}: p50 {r['p50_us']:.1f} us, p99 {r['p99_us']:.1f} us")
    ax.set_xscale("log")
    ax.set_xlabel("round trip per request (us, log)")
    ax.set_ylabel("fraction of requests")
    ax.legend(fontsize=8, loc="lower right")
    _style(ax, f"latency, one producer, payload {_bytes(size)} (ideal = host write seen by GPU and back)")
    _source_note(fig, meta)
    return _save(fig, path)


def consumer_throughput(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Answers per second vs producer threads, per mode (colour), one line style per payload size."""
    recs = [r for r in records if r.get("kind") == "consumer"]
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    sizes = sorted({r["payload_bytes"] for r in recs})
    styles = ["-", "--", ":"]
    for mode, color in MODE_COLORS.items():
        for k, size in enumerate(sizes):
            pts = sorted((r["producers"], r["throughput_rps"]) for r in recs
                         if r["mode"] == mode and r["payload_bytes"] == size)
            if pts:
                ax.plot(*zip(*pts), styles[k % 3], marker="o", ms=4, color=color, label=f"{mode}, {_bytes(size)}")
    ax.set_yscale("log")
    ax.set_xlabel("producer threads")
    ax.set_xticks(sorted({r["producers"] for r in recs}))
    ax.set_ylabel("answers per second (log)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    _style(ax, "throughput: colour = mode, line style = payload")
    _source_note(fig, meta)
    return _save(fig, path)


def consumer_breakdown(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Where a round trip goes: p50 per queue protocol and mode, the GPU's own share marked."""
    recs = [r for r in records if r.get("kind") == "consumer_poll"]
    payloads = sorted({r.get("payload_bytes", 0) for r in recs})
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.45 * len(recs)))
    for row, r in enumerate(recs):
        gpu = r.get("gpu_us_p50") or 0.0
        ax.barh(row, gpu, color=PATTERN_COLORS["persistent"])
        ax.barh(row, r["p50_us"] - gpu, left=gpu, color="#c7c7c7")
        ax.text(r["p50_us"], row, f" {r['p50_us']:.2f} us (p99 {r['p99_us']:.2f})", va="center", fontsize=7)
    ax.set_yticks(range(len(recs)), [f"{r['protocol']}: {r['mode']}" for r in recs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median round trip (us)")
    ax.set_xlim(0, 1.35 * max((r["p50_us"] for r in recs), default=1))
    ax.legend(handles=[Patch(color=PATTERN_COLORS["persistent"], label="GPU: request seen -> answer stored"),
                       Patch(color="#c7c7c7", label="host code + PCIe both ways + poll delay")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2,
              frameon=False)  # below the axes: the bars' labels need the space on the right
    payload = ", ".join(_bytes(p) for p in payloads if p) or "?"
    _style(ax, f"persistent consumer: where a round trip goes ({payload} payload, one producer)\n"
               f"(a run of its own: a latency table from another run differs by run-to-run noise)")
    _source_note(fig, meta)
    return _save(fig, path)


# -- timelines ---------------------------------------------------------------------------------

def _gantt(ax, spans: Sequence[dict[str, Any]], color_of, hatch: str = "") -> None:
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
        _gantt(ax, r["spans"], lambda k, p=r.get("pattern", "fused"): PATTERN_COLORS.get(p, "#1f77b4"))
        ax.set_yticks(range(len(r["spans"])), [s["kernel"] for s in r["spans"]], fontsize=6)
        end = max((s["end_us"] for s in r["spans"]), default=0)
        ax.set_title(f"{r['variant']} ({r.get('pattern', '?')}): {len(r['spans'])} span(s), {end:.1f} us from the "
                     f"first start to the last end (one run)", fontsize=9, loc="left")
    src = recs[0]["source"] if recs else ""
    axes[-1, 0].set_xlabel(f"time since the first launch started (us, {src})")
    fig.suptitle(f"{recs[0]['workload']} at {size_label(recs[0])}: one row per launch" if recs else "", fontsize=10)
    _source_note(fig, meta)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))  # room above for the legend, below for the source note
    patterns = list(dict.fromkeys(r.get("pattern", "fused") for r in recs))
    fig.legend(handles=[Patch(color=PATTERN_COLORS.get(p, "gray"), label=p) for p in patterns],
               fontsize=7, loc="upper right", ncol=len(patterns), frameon=False, bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path, layout=False)


def pdl_timeline(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path,
                 size_class: str = "tiny", g: int = 8) -> Path:
    """Gantt chart per variant (kernels as rows, us on x) from the %globaltimer block stamps of one run
    of the group of g kernels; the wrong variants are marked, and so is a consumer that started before
    the group had finished."""
    recs = [r for r in records if r.get("kind") == "pdl" and r.get("timeline") and r["size_class"] == size_class
            and r["G"] == g]
    row_in = max(1.1, 0.05 * (g + 2))  # a bar per kernel stays visible at G = 32
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 2.0 + row_in * len(recs)), sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        tl = r["timeline"]
        wrong = not r.get("correct_set", True)
        uses_pdl = "pdl" in r["variant"] or wrong
        group = tl[1:-1]
        group_end = max(s["end_us"] for s in group)
        early = tl[-1]["start_us"] < group_end  # the consumer started before the group was done

        def color(k, pdl=uses_pdl):
            if k == "consumer" and early:
                return WRONG
            return NEIGHBOUR if k in ("producer", "consumer") else PATTERN_COLORS["pdl" if pdl else "fused"]

        _gantt(ax, tl, color, hatch="xx" if wrong else "")
        ax.set_yticks([0, len(tl) - 1], ["producer", "consumer"], fontsize=7)
        run_us = tl[-1]["end_us"] - tl[0]["start_us"]
        title = (f"{r['variant']}: this run {run_us:.0f} us from producer start to consumer end; "
                 f"median of the timed runs {r['e2e_us']:.0f} us")
        if wrong:
            title = f"WRONG {r['variant']}: this run {run_us:.0f} us, median {r['e2e_us']:.0f} us"
            if early:
                ax.axvline(group_end, color=WRONG, lw=1, ls="--")
                title += f"; its consumer started {group_end - tl[-1]['start_us']:.0f} us before the group ended"
            else:
                title += "; in this run its consumer happened to start after the group (nothing makes it wait)"
            for side in ax.spines.values():
                side.set_edgecolor(WRONG)
                side.set_linewidth(1.5)
        ax.set_title(title, fontsize=9, loc="left", color=WRONG if wrong else "black")
    axes[-1, 0].set_xlabel("time since the producer started (us, %globaltimer)")
    handles = [Patch(color=NEIGHBOUR, label="producer / consumer (the unknown work around the group)"),
               Patch(color=PATTERN_COLORS["fused"], label="group kernel, plain launch"),
               Patch(color=PATTERN_COLORS["pdl"], label="group kernel, PDL launch"),
               Patch(facecolor="white", edgecolor="gray", hatch="xx", label="WRONG variant (kept to show why)"),
               Patch(color=WRONG, label="consumer started before the group ended")]
    fig.suptitle(f"G = {g} {size_class} tensors: one row per kernel, one run per variant",
                 fontsize=10)
    _source_note(fig, meta)
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # room below for the legend
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, 0.005))
    return _save(fig, path, layout=False)


def pdl_window(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """benchmarks/pdl_window.py: the same PDL group under each CUDA_DEVICE_MAX_CONNECTIONS, one
    Gantt panel per (setting, variant): how many members run at once."""
    recs = sorted((r for r in records if r.get("kind") == "pdl_window"),
                  key=lambda r: (r["variant"] != "pdl", r["max_connections"] or 0))  # pdl first, the default first
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 1.6 + 1.3 * len(recs)), sharex=True, squeeze=False)
    def color(kernel):
        return NEIGHBOUR if kernel in ("producer", "consumer") else PATTERN_COLORS["pdl"]

    for ax, r in zip(axes[:, 0], recs):
        _gantt(ax, r["timeline"], color)
        ax.set_yticks([])
        setting = r["max_connections"] or "unset (the default)"
        ax.set_title(f"{r['variant']}, CUDA_DEVICE_MAX_CONNECTIONS={setting}: at most {r['members_at_once']} of "
                     f"{r['G']} members at once; median end to end {r['e2e_us']:,.0f} us", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the producer started (us, %globaltimer); one row per kernel, one run")
    fig.suptitle(f"G = {recs[0]['G'] if recs else '?'} {recs[0]['size_class'] if recs else ''} tensors, "
                 f"host-launched PDL against a graph, under each setting", fontsize=10)
    _source_note(fig, meta)
    return _save(fig, path)


def pdl_summary(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """End-to-end time per variant vs G, one panel per size class; wrong variants dotted and marked."""
    recs = [r for r in records if r.get("kind") == "pdl"]
    classes = list(dict.fromkeys(r["size_class"] for r in recs))
    fig, axes = plt.subplots(1, len(classes), figsize=(4.2 * len(classes), 4.3), squeeze=False)
    variants = list(dict.fromkeys(r["variant"] for r in recs))
    for ax, cls in zip(axes[0], classes):
        for k, variant in enumerate(variants):
            pts = sorted((r["G"], r["e2e_us"]) for r in recs if r["variant"] == variant and r["size_class"] == cls)
            wrong = "wrong" in variant
            ax.plot(*zip(*pts), marker="x" if wrong else "o", ms=4 if wrong else 3, color=plt.cm.tab10(k),
                    label=f"{variant} (WRONG)" if wrong else variant, ls=":" if wrong else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("G (kernels in the group)")
        _style(ax, f"{cls} tensors")
    axes[0, 0].set_ylabel("end to end, producer start to consumer end,\nmedian (us)")
    axes[0, 0].legend(fontsize=7)
    _source_note(fig, meta)
    return _save(fig, path)


# -- a results file, every figure it supports --------------------------------------------------

def render(doc: dict[str, Any], out_dir: str | Path, stem: str) -> list[Path]:
    """Every figure a results file supports."""
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
    if any(r.get("kind") == "launch" for r in records):
        made.append(ladder(records, meta, out_dir / f"{stem}_ladder.png"))
    if any(r.get("kind") == "pdl" for r in records):
        made.append(pdl_summary(records, meta, out_dir / f"{stem}_e2e.png"))
        kept = dict.fromkeys((r["G"], r["size_class"]) for r in records if r.get("kind") == "pdl" and r.get("timeline"))
        for g, cls in kept:  # G = 8 keeps the plain name lesson 06 and the README show
            name = f"{stem}_timeline_{cls}.png" if g == 8 else f"{stem}_timeline_{cls}_g{g}.png"
            made.append(pdl_timeline(records, meta, out_dir / name, cls, g))
    if any(r.get("kind") == "pdl_window" for r in records):
        made.append(pdl_window(records, meta, out_dir / f"{stem}_gantt.png"))
    if any(r.get("kind") == "timeline" for r in records):
        made.append(timeline_chart(records, meta, out_dir / f"{stem}_timeline.png"))
    if any(r.get("kind") == "consumer_poll" for r in records):
        made.append(consumer_breakdown(records, meta, out_dir / f"{stem}_breakdown.png"))
    if any(r.get("kind") == "consumer" for r in records):
        made.append(consumer_latency_cdf(records, meta, out_dir / f"{stem}_latency.png"))
        made.append(consumer_throughput(records, meta, out_dir / f"{stem}_throughput.png"))
    return made
