"""Plots, one look everywhere; headless (Agg) so demos and CI can draw without a screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PATTERN_COLORS = {"unfused": "#d62728", "fused": "#1f77b4", "persistent": "#2ca02c",
                  "graph": "#9467bd", "pdl": "#ff7f0e"}
READ, WRITE = "#4c72b0", "#dd8452"


def _style(ax, title: str) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _source_note(fig, meta: dict[str, Any]) -> None:
    fig.text(0.01, 0.005, f"{meta.get('device', '?')} · {meta.get('date', '')[:10]}", fontsize=7, color="gray")


def variant_bars(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Bytes per variant (model / traced / ncu, read and write stacked) and time per variant."""
    recs = [r for r in records if r.get("kind") is None]
    names = [r["variant"] for r in recs]
    sources = [("model", "bytes_model_read", "bytes_model_write"),
               ("traced", "bytes_traced_read", "bytes_traced_write"),
               ("ncu", "bytes_dram_read", "bytes_dram_write")]
    sources = [s for s in sources if any(r.get(s[1]) is not None for r in recs)]
    fig, (ax_b, ax_t) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(sources)
    biggest = max((r.get("bytes_model") or 0) for r in recs) if recs else 0
    scale, unit = next((s, u) for s, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
                       if biggest >= 2 * s or s == 1)
    for k, (label, rd, wr) in enumerate(sources):
        xs = [i + (k - (len(sources) - 1) / 2) * width for i in range(len(recs))]
        reads = [(r.get(rd) or 0) / scale for r in recs]
        writes = [(r.get(wr) or 0) / scale for r in recs]
        hatch = ("", "//", "..")[k]
        ax_b.bar(xs, reads, width, color=READ, hatch=hatch, edgecolor="white", label=f"{label}: read")
        ax_b.bar(xs, writes, width, bottom=reads, color=WRITE, hatch=hatch, edgecolor="white",
                 label=f"{label}: write")
    ax_b.set_xticks(range(len(recs)), names, rotation=15)
    ax_b.set_ylabel(f"global memory traffic ({unit})")
    ax_b.legend(fontsize=7, ncol=len(sources))
    _style(ax_b, f"bytes moved, n = {recs[0]['n']:,}" if recs else "bytes moved")
    if any(r.get("time_ms") is not None for r in recs):
        times = [r.get("time_ms") or 0 for r in recs]
        err = [[t - (r.get("time_ms_q1") or t) for t, r in zip(times, recs)],
               [(r.get("time_ms_q3") or t) - t for t, r in zip(times, recs)]]
        bars = ax_t.bar(range(len(recs)), times, 0.6, yerr=err, capsize=3,
                        color=[PATTERN_COLORS.get(r["pattern"], "gray") for r in recs])
        for bar, r in zip(bars, recs):
            if r.get("GBs"):
                ax_t.annotate(f"{r['GBs']:.0f} GB/s", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
        ax_t.set_ylabel("device time, median (ms)")
        _style(ax_t, "time per variant (cold L2)")
    else:
        ax_t.axis("off")
        ax_t.text(0.5, 0.5, "no timings on the CUDA simulator\n(run on a GPU to measure)",
                  ha="center", va="center", fontsize=11, color="gray")
    ax_t.set_xticks(range(len(recs)), names, rotation=15)
    _source_note(fig, meta)
    return _save(fig, path)


def _by_variant(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("kind") is None and r.get("time_ms") is not None:
            out.setdefault(r["variant"], []).append(r)
    return {k: sorted(v, key=lambda r: r["n"]) for k, v in out.items()}


def _l2_marker(ax, meta: dict[str, Any], bytes_per_element: float | None) -> None:
    l2 = meta.get("l2_bytes")
    if l2 and bytes_per_element:
        ax.axvline(l2 / bytes_per_element, color="gray", ls=":", lw=1)
        ax.annotate("L2 full", (l2 / bytes_per_element, 0.98), xycoords=("data", "axes fraction"),
                    fontsize=7, color="gray", ha="right", rotation=90, va="top")


def sweep_time(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Time vs size per variant, log-log: measured medians (points, quartile bars) and the model (lines)."""
    fig, ax = plt.subplots(figsize=(7.5, 5))
    groups = _by_variant(records)
    for k, (name, recs) in enumerate(groups.items()):
        color = plt.cm.tab10(k)
        ns = [r["n"] for r in recs]
        t = [r["time_ms"] for r in recs]
        err = [[r["time_ms"] - r["time_ms_q1"] for r in recs], [r["time_ms_q3"] - r["time_ms"] for r in recs]]
        ax.errorbar(ns, t, yerr=err, fmt="o", ms=4, color=color, label=f"{name} ({recs[0]['launches']} launch)")
        if all("time_ms_model" in r for r in recs):
            ax.plot(ns, [r["time_ms_model"] for r in recs], "-", color=color, alpha=0.6, lw=1.2)
    # L2 holds the working set (inputs + output of the one-kernel variants) up to this n
    single = next((recs for recs in groups.values() if recs[0]["launches"] == 1), None)
    _l2_marker(ax, meta, single[0]["bytes_model"] / single[0]["n"] if single else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (elements)")
    ax.set_ylabel("median device time (ms)")
    fit = next((r for r in records if "model_launch_us" in r), None)
    if fit:
        latency = (f", DRAM latency {fit['model_latency_ns']:.0f} ns (Little's law)"
                   if fit.get("model_latency_ns") else "")
        ax.text(0.99, 0.02, f"points: measured (quartile bars)\nlines: model, bandwidth <= copy ceiling{latency},\n"
                f"fixed kernel cost {fit['model_fixed_kernel_us']:.1f} us, exposed launch cost "
                f"{fit['model_launch_us']:.1f} us", transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
    ax.legend(fontsize=8)
    _style(ax, f"{records[0]['workload'] if records else ''}: launch-bound at small n, bandwidth-bound at large n")
    ax.grid(which="both", alpha=0.2)
    _source_note(fig, meta)
    return _save(fig, path)


def sweep_bandwidth(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Achieved GB/s (planned bytes / time) per variant against the copy ceiling of the same run."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, (name, recs) in enumerate(_by_variant(records).items()):
        ax.plot([r["n"] for r in recs], [r["GBs"] for r in recs], "o-", ms=4, color=plt.cm.tab10(k), label=name)
    if meta.get("ceiling_GBs"):
        ax.axhline(meta["ceiling_GBs"], color="black", ls="--", lw=1)
        ax.annotate(f"copy ceiling {meta['ceiling_GBs']:.0f} GB/s", (0.01, meta["ceiling_GBs"]),
                    xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (elements)")
    ax.set_ylabel("achieved GB/s (planned bytes / median time)")
    ax.legend(fontsize=8)
    _style(ax, "bandwidth per variant")
    _source_note(fig, meta)
    return _save(fig, path)


def ladder(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Host us per launch and device us per boundary, per launch path (log scale)."""
    rungs = [r for r in records if r.get("kind") == "launch"]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rungs) + 1.5))
    ys = range(len(rungs))
    floor = 0.05  # draw zero (the fused kernel) at the axis floor
    host = [max(r["host_us_per_launch"], floor) for r in rungs]
    dev = [max(r["device_us_per_boundary"], floor) for r in rungs]
    ax.barh([y - 0.2 for y in ys], host, 0.4, color=READ, label="host us per launch")
    ax.barh([y + 0.2 for y in ys], dev, 0.4, color=WRITE, label="device us per kernel boundary")
    for y, r in zip(ys, rungs):
        ax.annotate(f"{r['host_us_per_launch']:.2f} / {r['device_us_per_boundary']:.2f} us", (max(host[y], dev[y]), y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(list(ys), [r["path"] for r in rungs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("microseconds (log)")
    ax.legend(fontsize=8, loc="lower right")
    _style(ax, "what one kernel boundary costs")
    _source_note(fig, meta)
    return _save(fig, path)


MODE_COLORS = {"ideal": "gray", "persistent-ll": "#2ca02c", "persistent-seq": "#98df8a", "launch": "#d62728",
               "batch8": "#ff7f0e"}


def middle_payload_bytes(records: Sequence[dict[str, Any]]) -> int:
    """The middle payload size of a consumer benchmark: the one the latency figure shows."""
    sizes = sorted({r["payload_bytes"] for r in records if r.get("kind") == "consumer"})
    return sizes[len(sizes) // 2]


def consumer_latency_cdf(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Round-trip latency CDF per mode at the middle payload size, one producer."""
    recs = [r for r in records if r.get("kind") == "consumer" and r["producers"] == 1]
    size = middle_payload_bytes(recs)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in (r for r in recs if r["payload_bytes"] == size):
        q = r["latency_quantiles_us"]
        ax.plot(q, np.linspace(0, 1, len(q)), color=MODE_COLORS.get(r["mode"], "black"), lw=2 if r["mode"] != "ideal" else 1,
                ls="--" if r["mode"] == "ideal" else "-",
                label=f"{r['mode']}: p50 {r['p50_us']:.1f} us, p99 {r['p99_us']:.1f} us")
    ax.set_xscale("log")
    ax.set_xlabel("round trip per request (us, log)")
    ax.set_ylabel("fraction of requests")
    ax.legend(fontsize=8, loc="lower right")
    _style(ax, f"latency, one producer, payload {size // 1024} KiB (ideal = host write seen by GPU and back)")
    _source_note(fig, meta)
    return _save(fig, path)


def consumer_throughput(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Answers per second vs producer threads, per mode, one line per payload size."""
    recs = [r for r in records if r.get("kind") == "consumer"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    sizes = sorted({r["payload_bytes"] for r in recs})
    styles = ["-", "--", ":"]
    for mode, color in MODE_COLORS.items():
        for k, size in enumerate(sizes):
            pts = sorted((r["producers"], r["throughput_rps"]) for r in recs if r["mode"] == mode and r["payload_bytes"] == size)
            if pts:
                ax.plot(*zip(*pts), styles[k % 3], marker="o", ms=4, color=color,
                        label=f"{mode}, {size // 1024} KiB" if size >= 1024 else f"{mode}, {size} B")
    ax.set_yscale("log")
    ax.set_xlabel("producer threads")
    ax.set_ylabel("answers per second (log)")
    ax.legend(fontsize=7, ncol=2)
    _style(ax, "throughput")
    _source_note(fig, meta)
    return _save(fig, path)


def consumer_breakdown(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Where a round trip goes: p50 per queue protocol and mode, the GPU's own share marked."""
    recs = [r for r in records if r.get("kind") == "consumer_poll"]
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.45 * len(recs)))
    for row, r in enumerate(recs):
        gpu = r.get("gpu_us_p50") or 0.0
        ax.barh(row, gpu, color=PATTERN_COLORS["persistent"], label="GPU: request seen -> answer stored" if row == 0 else None)
        ax.barh(row, r["p50_us"] - gpu, left=gpu, color="#c7c7c7",
                label="host code + PCIe both ways + poll delay" if row == 0 else None)
        ax.text(r["p50_us"], row, f" {r['p50_us']:.1f} us (p99 {r['p99_us']:.1f})", va="center", fontsize=7)
    ax.set_yticks(range(len(recs)), [f"{r['protocol']}: {r['mode']}" for r in recs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median round trip (us)")
    ax.set_xlim(0, 1.35 * max((r["p50_us"] for r in recs), default=1))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2,
              frameon=False)  # below the axes: the bars' labels need the space on the right
    _style(ax, "persistent consumer: where a round trip goes (1 KiB payload, one producer)")
    _source_note(fig, meta)
    return _save(fig, path)


def _gantt(ax, spans: Sequence[dict[str, Any]], color_of) -> None:
    """One bar per span (kernels as rows, top to bottom in launch order)."""
    for row, span in enumerate(spans):
        ax.barh(row, span["end_us"] - span["start_us"], left=span["start_us"], height=0.7,
                color=color_of(span["kernel"]))
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def timeline_chart(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Gantt chart per variant from event (or stamp) spans: launch gaps side by side."""
    recs = [r for r in records if r.get("kind") == "timeline"]
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 1.0 + 0.9 * len(recs) + 0.12 * sum(len(r["spans"]) for r in recs)),
                             sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        _gantt(ax, r["spans"], lambda k, p=r.get("pattern", "fused"): PATTERN_COLORS.get(p, "#1f77b4"))
        ax.set_yticks(range(len(r["spans"])), [s["kernel"] for s in r["spans"]], fontsize=6)
        end = max((s["end_us"] for s in r["spans"]), default=0)
        ax.set_title(f"{r['variant']}: {len(r['spans'])} span(s), {end:.1f} us first start to last end",
                     fontsize=9, loc="left")
    src = recs[0]["source"] if recs else ""
    axes[-1, 0].set_xlabel(f"time since the first launch started (us, {src})")
    fig.suptitle(f"{recs[0]['workload']} n = {recs[0]['n']:,}: one row per launch" if recs else "", fontsize=10)
    _source_note(fig, meta)
    return _save(fig, path)


def pdl_timeline(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path,
                 size_class: str = "tiny") -> Path:
    """Gantt chart per variant (kernels as rows, us on x) from the %globaltimer block stamps."""
    recs = [r for r in records if r.get("kind") == "pdl" and r.get("timeline") and r["size_class"] == size_class]
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 1.2 + 1.1 * len(recs)), sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        tl = r["timeline"]
        uses_pdl = "pdl" in r["variant"] or r["variant"].startswith("wrong")
        _gantt(ax, tl, lambda k: "#7f7f7f" if k in ("producer", "consumer") else
               PATTERN_COLORS["pdl" if uses_pdl else "fused"])
        ax.set_yticks([0, len(tl) - 1], ["producer", "consumer"], fontsize=7)
        label = r["variant"] + ("  (WRONG: consumer may start early)" if not r.get("correct_set", True) else "")
        ax.set_title(f"{label}: end to end {r['e2e_us']:.1f} us", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the producer started (us, %globaltimer)")
    fig.suptitle(f"G = {recs[0]['G'] if recs else '?'} {size_class} tensors: one row per kernel", fontsize=10)
    _source_note(fig, meta)
    return _save(fig, path)


def pdl_summary(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """End-to-end time per variant vs G, one panel per size class."""
    recs = [r for r in records if r.get("kind") == "pdl"]
    classes = list(dict.fromkeys(r["size_class"] for r in recs))
    fig, axes = plt.subplots(1, len(classes), figsize=(4.2 * len(classes), 4), squeeze=False)
    for ax, cls in zip(axes[0], classes):
        for k, variant in enumerate(dict.fromkeys(r["variant"] for r in recs)):
            pts = sorted((r["G"], r["e2e_us"]) for r in recs if r["variant"] == variant and r["size_class"] == cls)
            ax.plot(*zip(*pts), marker="o", ms=3, color=plt.cm.tab10(k), label=variant, ls=":" if "wrong" in variant else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("G (kernels in the group)")
        _style(ax, f"{cls} tensors")
    axes[0, 0].set_ylabel("end to end, producer to consumer (us)")
    axes[0, 0].legend(fontsize=7)
    _source_note(fig, meta)
    return _save(fig, path)


def render(doc: dict[str, Any], out_dir: str | Path, stem: str) -> list[Path]:
    """Every figure a results file supports."""
    out_dir = Path(out_dir)
    meta, records = doc["meta"], doc["records"]
    made = []
    variant_recs = [r for r in records if r.get("kind") is None]
    sizes = sorted({r["n"] for r in variant_recs})
    if variant_recs:
        largest = [r for r in variant_recs if r["n"] == sizes[-1]]
        made.append(variant_bars(largest, meta, out_dir / f"{stem}_bytes.png"))
    if len(sizes) > 1 and any(r.get("time_ms") is not None for r in variant_recs):
        made.append(sweep_time(variant_recs, meta, out_dir / f"{stem}_time.png"))
        made.append(sweep_bandwidth(variant_recs, meta, out_dir / f"{stem}_bandwidth.png"))
    if any(r.get("kind") == "launch" for r in records):
        made.append(ladder(records, meta, out_dir / f"{stem}_ladder.png"))
    if any(r.get("kind") == "pdl" for r in records):
        made.append(pdl_summary(records, meta, out_dir / f"{stem}_e2e.png"))
        for cls in dict.fromkeys(r["size_class"] for r in records if r.get("kind") == "pdl" and r.get("timeline")):
            made.append(pdl_timeline(records, meta, out_dir / f"{stem}_timeline_{cls}.png", cls))
    if any(r.get("kind") == "timeline" for r in records):
        made.append(timeline_chart(records, meta, out_dir / f"{stem}_timeline.png"))
    if any(r.get("kind") == "consumer_poll" for r in records):
        made.append(consumer_breakdown(records, meta, out_dir / f"{stem}_breakdown.png"))
    if any(r.get("kind") == "consumer" for r in records):
        made.append(consumer_latency_cdf(records, meta, out_dir / f"{stem}_latency.png"))
        made.append(consumer_throughput(records, meta, out_dir / f"{stem}_throughput.png"))
    return made
