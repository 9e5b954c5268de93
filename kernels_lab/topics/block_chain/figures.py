"""What the block chain draws: STEM_time.png, us per pass of every line (ours and torch's) at each hidden size,
from the study's records (study.py, bench.py: the steady clock, passes back to back);
benchmarks/render_figures.py finds it in FIGURES."""

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
    for k, line in enumerate(lines):
        ys = [next((_us(r) for r in recs if r.get("line", r["variant"]) == line
                    and (r["size"]["hidden"], r["size"]["layers"]) == s), np.nan) for s in sizes]
        ax.bar(np.arange(len(sizes)) + (k - (len(lines) - 1) / 2) * width, ys, width, label=line)
    ax.set_xticks(np.arange(len(sizes)), [f"hidden {h}\n{l} layer{'s' * (l > 1)}" for h, l in sizes])
    ax.set_yscale("log")  # torch's eager path is ~25x the rest: on a linear axis the others are slivers
    ax.set_ylabel("us per pass (steady state, log)")
    ax.legend(fontsize=7, ncols=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    style(ax, "block chain: a kernel boundary per layer against a counter per tile")
    source_note(fig, doc["meta"])
    return [save(fig, Path(out) / f"{stem}_time.png")]


FIGURES = {"study:block_chain": time_figure}
