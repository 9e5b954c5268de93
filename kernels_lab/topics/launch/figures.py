"""What the launch ladder's results draw (bench.py, record kind launch): `kernels-lab plot` and
benchmarks/render_figures.py find it in FIGURES.

  STEM_ladder.png  host and device microseconds per kernel boundary, launch path by launch path
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...profile.plots import READ, WRITE, Patch, plt, save, source_note, style


def ladder_figure(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    return [ladder(doc["records"], doc["meta"], Path(out) / f"{stem}_ladder.png")]


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
    style(ax, "what one kernel boundary costs")
    source_note(fig, meta)
    return save(fig, path)


FIGURES = {"launch": ladder_figure}
