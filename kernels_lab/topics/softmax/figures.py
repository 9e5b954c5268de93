"""What softmax's study draws (study.py, `kernels-lab bench softmax`: record kind study; the committed file's
older kinds softmax_shape and softmax_sweep alike, as_drawn): `kernels-lab plot RESULTS.json` and
benchmarks/render_figures.py find them in FIGURES.

  softmax_versions.png  GB/s of every version at each shape, the copy ceiling and torch.softmax beside
  softmax_vs_torch.png  torch.softmax's time over each registered variant's, per shape (> 1: faster than torch)
  softmax_cols.png      GB/s against the row width at fixed bytes: the registered fused, online, split and
                        torch.softmax (solid), other swept layouts (dashed), the ceiling, where fused stops fitting
                        on chip, and (the band along the bottom) which registered variant is fastest at each width
  STEM_clusters.png     (cluster_probe.py's records) the fraction of the copy ceiling against the row width: the
                        best layout of each cluster size, the registered split and torch.softmax
  STEM_read.png         (cross-entropy's study) the fraction of the read ceiling against the row width: every
                        variant and torch's cross_entropy, eager and compiled
Every softmax GB/s counts one read and one write of x (8 bytes per element); cross-entropy's one read (4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...profile.plots import plt, save, source_note, style
from ...profile.study import as_before
from .workload import FUSED_MAX_COLS

COLORS = {"unfused": "#d62728", "fused_shared": "#ff7f0e", "fused": "#1f77b4", "persistent": "#2ca02c",
          "online": "#9467bd", "split": "#17becf", "cluster": "#bcbd22", "cluster_staged": "#8c564b",
          "cluster_staged_held": "#e377c2",
          "torch.softmax": "#333333",
          "torch.cross_entropy": "#333333",
          "torch.compile": "#999999"}


def colour(variant: str) -> str:
    """A variant's colour; a variant named after another (an exploration's `cluster_staged_s3`) takes its
    family's, the longest name in COLORS it starts with."""
    return COLORS.get(variant) or COLORS[max((n for n in COLORS if variant.startswith(n)), key=len)]


REGISTERED = ("unfused", "fused_shared", "fused", "persistent", "online", "split", "cluster")


def as_drawn(doc: dict[str, Any]) -> dict[str, Any]:
    """A results file in the shape these figures (the demo's table, lesson 04) read: the study's timed records
    as the older kinds (softmax_sweep in the sweep, softmax_shape elsewhere), "variant" the family a
    version is a layout of, "version" its number, "vs_torch" torch.softmax's time over its own; a file of the
    older kinds unchanged."""
    before = as_before(doc)
    if before is doc:
        return doc
    records = [{**r, "kind": "softmax_sweep" if r["group"] == "sweep" else "softmax_shape",
                "variant": r.get("family") or r["line"], "version": r.get("number") or r["line"],
                "vs_torch": r["vs_anchor"]} for r in before["records"]]
    sizes = list(dict.fromkeys((r["group"], str(r["size"])) for r in records))
    number = lambda v: int(v[1:]) if v[:1] == "v" and v[1:].isdigit() else 1000  # noqa: E731  (unnumbered last)
    records.sort(key=lambda r: (sizes.index((r["group"], str(r["size"]))), number(r["version"])))  # as v1, v2, ...
    return {**doc, "records": records}


def _shapes(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return list(dict.fromkeys((r["size"]["rows"], r["size"]["cols"]) for r in records))


def _legend_for(ax, names, ceiling: float | None, extra=()) -> None:
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour(n)) for n in names]
    labels = list(names)
    if ceiling:
        handles.append(plt.Line2D([], [], color="black", ls="--", lw=1))
        labels.append(f"copy ceiling {ceiling:.0f} GB/s")
    for handle, label in extra:
        handles.append(handle)
        labels.append(label)
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def versions(records: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> Path:
    recs = [r for r in records if r["kind"] == "softmax_shape"]
    shapes = _shapes(recs)
    fig, axes = plt.subplots(len(shapes), 1, figsize=(10, 2.4 * len(shapes)), squeeze=False)
    ceiling = meta.get("ceiling_GBs")
    for ax, (rows, cols) in zip(axes[:, 0], shapes):
        here = [r for r in recs if (r["size"]["rows"], r["size"]["cols"]) == (rows, cols)]
        bars = ax.bar(range(len(here)), [r["GBs"] for r in here], color=[colour(r["variant"]) for r in here],
                      hatch=None)
        for bar, r in zip(bars, here):
            if not r.get("correct", True):
                bar.set_hatch("xx")
            ax.annotate(f"{r['GBs']:.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=6)
        if ceiling:
            ax.axhline(ceiling, color="black", ls="--", lw=1)
        ax.set_xticks(range(len(here)), [r["version"].replace("torch.", "") for r in here], fontsize=7)
        ax.set_ylabel("GB/s")
        style(ax, f"{rows} x {cols}")
    _legend_for(axes[0, 0], [n for n in COLORS if any(r["variant"] == n for r in recs)], ceiling)
    wrong = any(not r.get("correct", True) for r in recs)  # promise the hatching only where it is drawn
    fig.suptitle("every version (v1..: the benchmark's kernels; softmax, compile: torch.softmax and torch.compile), "
                 "one read + one write counted" + (" (x-hatched: wrong after timing)" if wrong else ""),
                 fontsize=10, x=0.01, ha="left")
    source_note(fig, meta)
    return save(fig, path)


def vs_torch(records: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> Path:
    recs = [r for r in records if r["kind"] == "softmax_shape" and r.get("vs_torch")
            and (r.get("registered") and r["variant"] in REGISTERED or r["variant"] == "torch.compile")]
    shapes = _shapes(recs)
    names = [n for n in (*REGISTERED, "torch.compile") if any(r["variant"] == n for r in recs)]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        for s, shape in enumerate(shapes):
            r = next((r for r in recs if r["variant"] == name and (r["size"]["rows"], r["size"]["cols"]) == shape),
                     None)
            if r is not None:
                ax.bar(s + (k - (len(names) - 1) / 2) * width, r["vs_torch"], width, color=colour(name))
    ax.axhline(1.0, color=colour("torch.softmax"), lw=1)
    ax.set_xticks(range(len(shapes)), [f"{rows} x {cols}" for rows, cols in shapes])
    ax.set_ylabel("torch.softmax time / variant time")
    style(ax, "registered variants against torch.softmax (above 1: faster)")
    _legend_for(ax, names, None, [(plt.Line2D([], [], color=colour("torch.softmax"), lw=1), "torch.softmax = 1")])
    source_note(fig, meta)
    return save(fig, path)


def by_cols(records: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> Path:
    recs = [r for r in records if r["kind"] == "softmax_sweep"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = [n for n in ("fused", "online", "split", "torch.softmax") if any(r["variant"] == n for r in recs)]
    for name in names:  # the registered layouts (and torch) as solid lines
        mine = sorted((r for r in recs if r["variant"] == name and r.get("correct", True)
                       and (r.get("registered") or name not in REGISTERED)), key=lambda r: r["size"]["cols"])
        ax.plot([r["size"]["cols"] for r in mine], [r["GBs"] for r in mine], "o-", ms=4, color=colour(name))
    others = []  # the other layouts the benchmark swept (e.g. split's smaller or more slices): dashed, each its own
    for dashes, version in zip(("--", ":", "-."), sorted({r["version"] for r in recs if r["variant"] in REGISTERED
                                                        and not r.get("registered")}, key=lambda v: int(v[1:]))):
        mine = sorted((r for r in recs if r.get("version") == version and r.get("correct", True)),
                      key=lambda r: r["size"]["cols"])
        ax.plot([r["size"]["cols"] for r in mine], [r["GBs"] for r in mine], dashes, marker="o", ms=3, lw=1,
                color=colour(mine[0]["variant"]), alpha=0.7)
        others.append((plt.Line2D([], [], color=colour(mine[0]["variant"]), ls=dashes, lw=1),
                       f"{mine[0]['variant']} {version} ({_layout(mine[0])})"))
    ceiling = meta.get("ceiling_GBs")
    if ceiling:
        ax.axhline(ceiling, color="black", ls="--", lw=1)
    ax.axvline(FUSED_MAX_COLS, color="gray", ls=":", lw=1)
    # which registered variant is fastest at each width: a band along the bottom, one cell per width
    for cols, winner in fastest_by_cols(recs).items():
        ax.axvspan(cols / 2 ** 0.5, cols * 2 ** 0.5, ymin=0, ymax=0.04, color=colour(winner), lw=0)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("cols (row length, float32); rows = fixed bytes / row")
    ax.set_ylabel("GB/s (one read + one write)")
    total = recs[0]["n"] * 4 if recs else 0
    style(ax, f"softmax by row width, {total / 2**20:.0f} MiB of x at every point")
    ax.set_ylim(bottom=0)
    _legend_for(ax, names, ceiling, others + [(plt.Line2D([], [], color="gray", ls=":", lw=1),
                                      f"fused's widest row on chip ({FUSED_MAX_COLS})"),
                                     (plt.Rectangle((0, 0), 1, 1, color="lightgray"),
                                      "band: the fastest variant there")])
    source_note(fig, meta)
    return save(fig, path)


def _layout(r: dict[str, Any]) -> str:
    """A split layout in words: threads x chunks a block (the slice it holds)."""
    lay = r.get("layout") or {}
    if "threads" not in lay:
        return "its own layout"
    return f"slices of {lay['threads'] * lay['chunks'] * 4} floats"


def fastest_by_cols(recs: list[dict[str, Any]]) -> dict[int, str]:
    """cols -> the registered variant with the shortest time there (anchors and wrong results left out)."""
    best: dict[int, dict[str, Any]] = {}
    for r in recs:
        if r["variant"] in REGISTERED and r.get("registered", True) and r.get("correct", True):
            c = r["size"]["cols"]
            if c not in best or r["time_ms"] < best[c]["time_ms"]:
                best[c] = r
    return {c: best[c]["variant"] for c in sorted(best)}


def figures(doc: dict[str, Any], out_dir: str | Path, stem: str = "softmax") -> list[Path]:
    """Every figure a results file of bench.py supports, named STEM_WHAT.png."""
    out = Path(out_dir)
    doc = as_drawn(doc)
    meta, records = doc["meta"], doc["records"]
    made = []
    if any(r.get("kind") == "softmax_shape" for r in records):
        made.append(versions(records, meta, out / f"{stem}_versions.png"))
    if any(r.get("kind") == "softmax_shape" and r.get("vs_torch") for r in records):
        made.append(vs_torch(records, meta, out / f"{stem}_vs_torch.png"))
    if any(r.get("kind") == "softmax_sweep" for r in records):
        made.append(by_cols(records, meta, out / f"{stem}_cols.png"))
    return made


def cluster_widths(doc: dict[str, Any], out_dir: str | Path, stem: str = "softmax_cluster") -> list[Path]:
    """The fraction of the copy ceiling against the row width: one line per cluster size (its best layout at
    each width, the layout named at the point), the registered split and torch.softmax; only layouts whose
    outputs were right after timing."""
    recs = [r for r in doc["records"] if r.get("kind") == "cluster_probe" and r["workload"] == "softmax"
            and r.get("rechecked_ok", True)]
    lines: dict[str, dict[int, dict[str, Any]]] = {}
    for r in recs:
        name = r["version"].split("_")[0] if r["version"].startswith("cluster") else r["version"].split(" ")[0]
        best = lines.setdefault(name, {})
        if r["cols"] not in best or r["GBs"] > best[r["cols"]]["GBs"]:
            best[r["cols"]] = r
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sizes = sorted((n for n in lines if n.startswith("cluster")), key=lambda n: int(n[len("cluster"):]))
    cmap = plt.get_cmap("viridis")
    for i, name in enumerate(sizes):
        pts = sorted(lines[name].values(), key=lambda r: r["cols"])
        ax.plot([r["cols"] for r in pts], [r["of_ceiling"] for r in pts], "o-", ms=4, lw=1.2,
                color=cmap(i / max(1, len(sizes) - 1)), label=f"{name[len('cluster'):]} block(s) a cluster")
    for name, color, ls in (("split", colour("split"), "--"), ("torch.softmax", colour("torch.softmax"), ":")):
        pts = sorted(lines.get(name, {}).values(), key=lambda r: r["cols"])
        if pts:
            ax.plot([r["cols"] for r in pts], [r["of_ceiling"] for r in pts], ls, marker="s", ms=3, color=color,
                    label=name + (" (registered, exchange through global memory)" if name == "split" else ""))
    ax.axhline(1.0, color="black", ls="--", lw=1, label=f"copy ceiling {doc['meta']['ceiling_GBs']:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("cols (row length, float32); about 256 MiB of x at every width")
    ax.set_ylabel("fraction of the copy ceiling")
    style(ax, "softmax split across a thread-block cluster (DSMEM exchange): best layout per cluster size")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    source_note(fig, doc["meta"])
    return [save(fig, Path(out_dir) / f"{stem}_clusters.png")]


def read_widths(doc: dict[str, Any], out_dir: str | Path, stem: str = "cross_entropy") -> list[Path]:
    """Cross-entropy: each line's fraction of the read ceiling (measured in the same run) against the width,
    only outputs that were right after timing."""
    meta = doc["meta"]
    recs = [r for r in doc["records"] if r.get("kind") == "study" and r["workload"] == "cross_entropy"
            and r["time_ms"] is not None and r["checked"] is not False]
    read = meta.get("read_ceiling_GBs")  # absent (a run without one): GB/s, no fractions
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for name in dict.fromkeys(r["line"] for r in recs):
        pts = sorted((r for r in recs if r["line"] == name), key=lambda r: r["size"]["cols"])
        anchor = pts[0]["pattern"] == "anchor"
        ax.plot([r["size"]["cols"] for r in pts], [r["GBs_useful"] / (read or 1) for r in pts],
                ls=":" if anchor else "-", marker="s" if anchor else "o", ms=4, lw=1.2,
                color=COLORS.get(name, "#999999"), label=name)
    if read:
        ax.axhline(1.0, color="black", ls="--", lw=1, label=f"read ceiling {read:.0f} GB/s")
        ax.axhline(0.9, color="black", ls=":", lw=0.8, label="0.90 of it")
        ax.set_ylim(0, 1.1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("cols (vocabulary, float32 logits); 256 MiB of x at every width")
    ax.set_ylabel("fraction of the read ceiling" if read else "GB/s (x read once)")
    style(ax, "cross-entropy: x read once, a loss per row; every variant against torch")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    source_note(fig, meta)
    return [save(fig, Path(out_dir) / f"{stem}_read.png")]


FIGURES = {"softmax_shape": figures, "softmax_sweep": figures, "study:softmax": figures,
           "cluster_probe": cluster_widths, "study:cross_entropy": read_widths}
