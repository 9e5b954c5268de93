"""What layernorm's results draw (its study's records, kind "study", and the committed file's older kind
"layernorm"); benchmarks/render_figures.py finds them in FIGURES.

  STEM_shapes.png  GB/s of every variant and of torch's layer_norm (eager and torch.compile) at each
                   shape, with the copy ceiling measured in the same run
Every GB/s counts one read and one write of x (8 bytes per element).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...profile.plots import plt, save, source_note, style
from ...profile.study import as_before
from .study import named_today

COLORS = {"unfused": "#d62728", "fused": "#1f77b4", "persistent": "#2ca02c", "cluster": "#9467bd",
          "v1": "#e3d7ee", "v2": "#c5b0d5", "v3": "#5b2c83", "v4": "#8c564b", "v5": "#c49c94", "v8": "#ff7f0e",
          "v9": "#bcbd22",
          "v10": "#17becf", "v11": "#e377c2",
          "torch.layer_norm": "#333333", "torch.compile": "#999999"}


def shapes_figure(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    doc = as_before(named_today(doc))  # an older run's lines under today's names
    records, meta = doc["records"], doc["meta"]
    shapes: dict[tuple[int, int], dict[str, dict]] = {}
    for r in records:
        shapes.setdefault((r["size"]["rows"], r["size"]["cols"]), {})[r["variant"]] = r
    names = [n for n in COLORS if any(n in got for got in shapes.values())]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(names)
    for k, n in enumerate(names):
        xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(shapes))]
        ax.bar(xs, [got[n]["GBs"] if n in got else 0 for got in shapes.values()], width, color=COLORS[n], label=n)
    ceiling = meta.get("ceiling_GBs")
    if ceiling:
        ax.axhline(ceiling, color="black", lw=1, ls="--", label=f"copy ceiling {ceiling:.0f} GB/s")
    ax.set_xticks(range(len(shapes)), [f"{r} x {c}" for r, c in shapes])
    ax.set_xlabel("rows x cols (float32)")
    ax.set_ylabel("GB/s (one read + one write of x)")
    style(ax, "layernorm: every variant against torch, one run, cold L2")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    source_note(fig, meta)
    return [save(fig, Path(out) / f"{stem}_shapes.png")]


FIGURES = {"layernorm": shapes_figure, "study:layernorm": shapes_figure}
