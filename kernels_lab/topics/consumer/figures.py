"""What the consumer's results draw: `kernels-lab bench consumer` (record kind consumer) and polls.py
(kind consumer_poll); `kernels-lab plot` and benchmarks/render_figures.py find them in FIGURES.

  STEM_latency.png     round-trip latency CDFs, persistent consumer against one launch per request
  STEM_throughput.png  answers per second against producer threads
  STEM_breakdown.png   where a request's microseconds go (host code, PCIe, the GPU's own work)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...profile.plots import PATTERN_COLORS, Patch, plt, save, source_note, style

MODE_COLORS = {"ideal": "gray", "persistent-ll": "#2ca02c", "persistent-seq": "#98df8a", "launch": "#d62728",
               "batch8": "#ff7f0e"}


HEADLINE_PAYLOAD = 1024  # bytes: the consumer payload the README quotes, drawn in the latency figure


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
    style(ax, f"latency, one producer, payload {_bytes(size)} (ideal = host write seen by GPU and back)")
    source_note(fig, meta)
    return save(fig, path)


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
    style(ax, "throughput: colour = mode, line style = payload")
    source_note(fig, meta)
    return save(fig, path)


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
    style(ax, f"persistent consumer: where a round trip goes ({payload} payload, one producer)\n"
               f"(a run of its own: a latency table from another run differs by run-to-run noise)")
    source_note(fig, meta)
    return save(fig, path)


def consumer_figures(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    out, records, meta = Path(out), doc["records"], doc["meta"]
    made = []
    if any(r.get("kind") == "consumer_poll" for r in records):
        made.append(consumer_breakdown(records, meta, out / f"{stem}_breakdown.png"))
    if any(r.get("kind") == "consumer" for r in records):
        made.append(consumer_latency_cdf(records, meta, out / f"{stem}_latency.png"))
        made.append(consumer_throughput(records, meta, out / f"{stem}_throughput.png"))
    return made


FIGURES = {"consumer": consumer_figures, "consumer_poll": consumer_figures}
