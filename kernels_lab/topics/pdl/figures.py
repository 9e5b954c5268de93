"""What the PDL study's results draw: `kernels-lab bench pdl` (record kind pdl) and window.py (kind
pdl_window); `kernels-lab plot` and benchmarks/render_figures.py find them in FIGURES.

  STEM_e2e.png               end to end and host time per variant against G
  STEM_timeline_CLASS.png    one run's kernels from their own %globaltimer stamps (G = 8; _gG for others)
  STEM_gantt.png             window.py: how many host-launched PDL kernels run at once, per setting
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...profile.plots import NEIGHBOUR, PATTERN_COLORS, WRONG, Patch, gantt, plt, save, source_note, style

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

        gantt(ax, tl, color, hatch="xx" if wrong else "")
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
    source_note(fig, meta)
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # room below for the legend
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, 0.005))
    return save(fig, path, layout=False)


def pdl_window(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """benchmarks/pdl_window.py: the same PDL group under each CUDA_DEVICE_MAX_CONNECTIONS, one
    Gantt panel per (setting, variant): how many members run at once."""
    recs = sorted((r for r in records if r.get("kind") == "pdl_window"),
                  key=lambda r: (r["variant"] != "pdl", r["max_connections"] or 0))  # pdl first, the default first
    fig, axes = plt.subplots(len(recs), 1, figsize=(10, 1.6 + 1.3 * len(recs)), sharex=True, squeeze=False)
    def color(kernel):
        return NEIGHBOUR if kernel in ("producer", "consumer") else PATTERN_COLORS["pdl"]

    for ax, r in zip(axes[:, 0], recs):
        gantt(ax, r["timeline"], color)
        ax.set_yticks([])
        setting = r["max_connections"] or "unset (the default)"
        ax.set_title(f"{r['variant']}, CUDA_DEVICE_MAX_CONNECTIONS={setting}: at most {r['members_at_once']} of "
                     f"{r['G']} members at once; median end to end {r['e2e_us']:,.0f} us", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the producer started (us, %globaltimer); one row per kernel, one run")
    fig.suptitle(f"G = {recs[0]['G'] if recs else '?'} {recs[0]['size_class'] if recs else ''} tensors, "
                 f"host-launched PDL against a graph, under each setting", fontsize=10)
    source_note(fig, meta)
    return save(fig, path)


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
        style(ax, f"{cls} tensors")
    axes[0, 0].set_ylabel("end to end, producer start to consumer end,\nmedian (us)")
    axes[0, 0].legend(fontsize=7)
    source_note(fig, meta)
    return save(fig, path)


def pdl_figures(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    out, records, meta = Path(out), doc["records"], doc["meta"]
    made = []
    if any(r.get("kind") == "pdl" for r in records):
        made.append(pdl_summary(records, meta, out / f"{stem}_e2e.png"))
        kept = dict.fromkeys((r["G"], r["size_class"]) for r in records if r.get("kind") == "pdl" and r.get("timeline"))
        for g, cls in kept:  # G = 8 keeps the plain name lesson 06 and the README show
            name = f"{stem}_timeline_{cls}.png" if g == 8 else f"{stem}_timeline_{cls}_g{g}.png"
            made.append(pdl_timeline(records, meta, out / name, cls, g))
    if any(r.get("kind") == "pdl_window" for r in records):
        made.append(pdl_window(records, meta, out / f"{stem}_gantt.png"))
    return made


FIGURES = {"pdl": pdl_figures, "pdl_window": pdl_figures}
