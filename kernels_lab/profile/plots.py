"""Plots, one look everywhere; headless (Agg) so demos and CI can draw without a screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

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
    recs = [r for r in records if r.get("kind") != "launch"]
    names = [r["variant"] for r in recs]
    sources = [("model", "bytes_model_read", "bytes_model_write"),
               ("traced", "bytes_traced_read", "bytes_traced_write"),
               ("ncu", "bytes_dram_read", "bytes_dram_write")]
    sources = [s for s in sources if any(r.get(s[1]) is not None for r in recs)]
    fig, (ax_b, ax_t) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(sources)
    scale = 2**20
    for k, (label, rd, wr) in enumerate(sources):
        xs = [i + (k - (len(sources) - 1) / 2) * width for i in range(len(recs))]
        reads = [(r.get(rd) or 0) / scale for r in recs]
        writes = [(r.get(wr) or 0) / scale for r in recs]
        hatch = ("", "//", "..")[k]
        ax_b.bar(xs, reads, width, color=READ, hatch=hatch, edgecolor="white", label=f"{label}: read")
        ax_b.bar(xs, writes, width, bottom=reads, color=WRITE, hatch=hatch, edgecolor="white",
                 label=f"{label}: write")
    ax_b.set_xticks(range(len(recs)), names, rotation=15)
    ax_b.set_ylabel("global memory traffic (MiB)")
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
