"""What the RNN's study draws (study.py, `kernels-lab bench rnn`: record kind study; the committed file's older
kind rnn alike, as_drawn): `kernels-lab plot RESULTS.json` and benchmarks/render_figures.py find them in FIGURES.

  STEM_us_per_step.png  us per step per variant and anchor against batch, one panel per hidden size
                        (the persistent kernel wins at small batch and loses at large batch: both show)
  STEM_bytes.png        the bytes each variant moves (W read at every step vs once)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...profile import plots

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
        plots.style(ax, f"hidden {hidden}: time per step (median)")
    axes[0][0].set_ylabel("us per step (log)")
    axes[0][-1].legend(fontsize=7, title="variant (solid) / anchor (dashed)", title_fontsize=7,
                       loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    plots.source_note(fig, meta)
    return plots.save(fig, path)


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
    plots.style(ax, f"bytes per run: hidden {hidden}, batch {batch}, {size['steps']} steps")
    plots.source_note(fig, meta)
    return plots.save(fig, path)


def as_drawn(doc: dict[str, Any]) -> dict[str, Any]:
    """A results file in the shape these figures (and the demo's table, lesson 05) read: a study's records as the
    older kind rnn, "variant" the line's name, "version" a numbered tiling's (None for a registered variant or an
    anchor); a file of the older kind unchanged."""
    if not any(r.get("kind") == "study" for r in doc["records"]):
        return doc
    records = [{**r, "kind": "rnn", "variant": r["line"],
                "version": None if r["registered"] or r["pattern"] == "anchor" else r["line"]}
               for r in doc["records"] if r.get("kind") == "study"]
    return {**doc, "records": records}


def figures(doc: dict[str, Any], out_dir: str | Path, stem: str = "rnn") -> list[Path]:
    """The figures a results file supports (no time per step without timings)."""
    doc = as_drawn(doc)
    out_dir, records, meta = Path(out_dir), doc["records"], doc["meta"]
    made = [bytes_figure(records, meta, out_dir / f"{stem}_bytes.png")]
    if any(r.get("us_per_step") is not None for r in records):
        made.insert(0, step_figure(records, meta, out_dir / f"{stem}_us_per_step.png"))
    return made


FIGURES = {"rnn": figures, "study:rnn": figures}
