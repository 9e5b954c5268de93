"""What decode's results draw and print: a study's records (`kernels-lab bench decode`, study.py) and the
committed files' older kind decode alike (as_drawn). `kernels-lab plot RESULTS.json` and
benchmarks/render_figures.py find the figures in FIGURES; the demo prints `table`; `deficit_table` and `targets`
read a run against the issue's aims.

The DRAM floor (weight bytes at the copy ceiling) binds only where a pass's weights exceed L2: where they fit
(hidden 1024, 8 layers: 32 MB in the H200's 60 MiB), back-to-back passes read them from L2, and the figures
draw no DRAM floor there.

  STEM_us_per_pass.png  us per pass of every variant and anchor against the weight bytes one pass streams,
                        with the DRAM floor those bytes set at the copy ceiling of the same run (a panel per batch)
  STEM_batch1.png       batch 1, 8 layers: the time per pass in steady state beside one pass alone
  STEM_timeline.png     the megakernel's own timeline (%globaltimer stamps), when the run kept one
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from ...profile import plots

ORDER = ("unfused", "fused", "graph", "graph_pdl", "persistent", "megakernel", "megakernel_db", "megakernel_db_p0",
         "megakernel_marked", "torch_eager", "torch_graph", "torch_compile")
STYLE = {"unfused": ("#d62728", "-", "o"), "fused": ("#1f77b4", "-", "o"), "graph": ("#9467bd", "-", "o"),
         "graph_pdl": ("#ff7f0e", "-", "D"), "persistent": ("#2ca02c", "-", "s"), "megakernel": ("#17becf", "-", "*"),
         "megakernel_db": ("#e377c2", "-", "P"), "megakernel_db_p0": ("#bcbd22", "-", "X"),
         "megakernel_marked": ("#393b79", "-", "h"),
         "torch_eager": ("#7f7f7f", "--", "^"), "torch_graph": ("#000000", "--", "^"),
         "torch_compile": ("#8c564b", "--", "v")}


ONE_PASS = "one pass with its launch (median)"  # the older kind's clock: host time from the call to a synchronize
STUDY_ONE_PASS = "one pass, cold L2 (median)"  # a study's: CUDA events around one pass after an L2 flush


def as_drawn(doc: dict[str, Any]) -> dict[str, Any]:
    """A results file in the shape these figures and tables read: a study's records as the older kind decode
    ("variant" the line's name, "version" a numbered shape's, us_per_pass the steady clock, latency_us the
    one-pass clock, of_ceiling the weights' bytes at the steady clock against the copy ceiling, floor_us those
    bytes at the ceiling, weights_in_l2 from the run's L2), the meta naming the one-pass clock; a file of the
    older kind unchanged."""
    if not any(r.get("kind") == "study" for r in doc["records"]):
        return doc
    meta = doc["meta"]
    ceiling, l2 = meta.get("ceiling_GBs"), meta.get("l2_bytes")
    records = []
    for r in (r for r in doc["records"] if r.get("kind") == "study"):
        steady, weights = r["time_ms_steady"], r["bytes_weight"]
        numbered = not r["registered"] and r["pattern"] != "anchor"
        records.append({**r, "kind": "decode", "variant": r["line"], "about": r["what"],
                        "version": r["line"].removeprefix("megakernel_") if numbered else None,
                        "us_per_pass": steady * 1e3 if steady else None,
                        "latency_us": r["time_ms"] * 1e3 if r["time_ms"] else None, "weight_bytes": weights,
                        "floor_us": weights / (ceiling * 1e3) if ceiling else None,
                        "of_ceiling": weights / (steady * 1e-3) / (ceiling * 1e9) if ceiling and steady else None,
                        "weights_in_l2": bool(l2) and weights <= l2, "correct": r["checked"] is not False})
    return {"meta": {**meta, "one_pass": STUDY_ONE_PASS}, "records": records}


def _timed(records: Sequence[dict[str, Any]], versions: bool = False) -> list[dict[str, Any]]:
    """Timed records; the benchmark's extra versions (other blocks per SM) only when asked for."""
    return [r for r in records if r.get("kind") == "decode" and r.get("us_per_pass") is not None
            and (versions or r.get("version") is None)]


def _names(recs: Sequence[dict[str, Any]]) -> list[str]:
    present = {r["variant"] for r in recs}
    return [n for n in ORDER if n in present] + sorted(present - set(ORDER))


def _at(recs, hidden: int, layers: int, batch: int) -> dict[str, dict[str, Any]]:
    return {r["variant"]: r for r in recs
            if (r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"]) == (hidden, layers, batch)}


def in_l2(record: dict[str, Any], meta: dict[str, Any]) -> bool:
    """Whether a pass's weights fit in the run's L2 (then back-to-back passes read them from L2, not DRAM)."""
    if "weights_in_l2" in record:
        return bool(record["weights_in_l2"])
    l2 = meta.get("l2_bytes")
    if l2 is None and (said := re.search(r"(\d+) MiB L2", meta.get("device", ""))):  # runs before l2_bytes was kept
        l2 = int(said.group(1)) * 2 ** 20
    return l2 is not None and record["weight_bytes"] <= l2


def table(doc: dict[str, Any]) -> str:
    """us per pass (steady state, median) of every variant and anchor at every size, with the DRAM floor
    where the weights exceed L2: a block of columns per hidden, so that it fits a page."""
    doc = as_drawn(doc)
    recs = _timed(doc["records"], versions=True)
    if not recs:
        return "(nothing timed)"
    configs = sorted({(r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"]) for r in recs})
    lines = ["us per pass, steady state (median); columns: layers / batch"]
    for hidden in sorted({h for h, _, _ in configs}):
        cols = [c for c in configs if c[0] == hidden]
        here = [r for r in recs if r["size"]["hidden"] == hidden]
        lines += ["", f"  {f'hidden {hidden}':<19}" + "".join(f"{f'{l}/{b}':>9}" for _, l, b in cols)]
        for name in _names(here):
            at = {c: _at(here, *c).get(name) for c in cols}
            lines.append(f"  {name:<19}" + "".join(f"{at[c]['us_per_pass']:>9.1f}" if at[c] else f"{'-':>9}"
                                                  for c in cols))
        first = {c: next(iter(_at(here, *c).values())) for c in cols}
        lines.append(f"  {'DRAM floor':<19}" + "".join(
            f"{'in L2':>9}" if in_l2(first[c], doc["meta"]) else f"{first[c]['floor_us'] or 0:>9.1f}" for c in cols))
    return "\n".join(lines)


def deficit_table(doc: dict[str, Any], hidden: int = 4096, layers: int = 8) -> str:
    """At one size, batch 1: every kernel's residency (from the compiled kernel) beside its time: blocks,
    threads, registers, blocks an SM holds, weight bytes an SM has in flight at most, and the fraction of
    the copy ceiling reached."""
    doc = as_drawn(doc)
    recs = [r for r in _at(_timed(doc["records"], versions=True), hidden, layers, 1).values() if r.get("residency")]
    if not recs:
        return ""
    lines = [f"hidden {hidden}, {layers} layers, batch 1: residency and bytes in flight (model) against the time",
             f"  {'variant':<19}{'blocks':>7}{'thr':>5}{'regs':>6}{'res/SM':>7}{'blk/SM':>7}{'tile KB':>8}"
             f"{'held':>6}{'KB/SM':>7}{'us':>8}{'of ceil':>8}"]
    for r in sorted(recs, key=lambda r: r["us_per_pass"]):
        h = r["residency"]
        lines.append(f"  {r['variant']:<19}{r.get('blocks', '-'):>7}{h['threads']:>5}{h['regs_per_thread']:>6}"
                     f"{h['resident_per_sm']:>7}{h['blocks_per_sm']:>7.2f}{h['tile_bytes'] / 1024:>8.0f}"
                     f"{h['tiles_in_registers']:>4}+{h['tiles_prefetched']}{h['in_flight_per_sm'] / 1024:>7.0f}"
                     f"{r['us_per_pass']:>8.1f}{r['of_ceiling']:>8.2f}")
    lines.append("  held: tiles a block holds in registers + tiles it asks of L2; KB/SM: blk/SM x tile x held")
    return "\n".join(lines)


def layer_gaps(recs: Sequence[dict[str, Any]], hidden: int, layers: int = 8) -> dict[str, float]:
    """Per layer at batch 1, from the steady-state times, each difference named for what it measures:
    host_issue = fused - graph (the time the host's launch path adds per kernel when it cannot keep ahead of
    the GPU; the GPU's own boundary between two kernels is in both); pdl_overlap = graph - graph_pdl (the part
    of each boundary PDL hides: the next layer launched and loading its weights while this one drains);
    boundary_left = graph_pdl - megakernel (what the megakernel's counters save on what PDL leaves; negative:
    the megakernel is slower)."""
    at = _at(_timed(recs), hidden, layers, 1)
    per = {n: at[n]["us_per_pass"] / layers for n in ("fused", "graph", "graph_pdl", "megakernel") if n in at}
    gaps = {}
    for name, (a, b) in {"host_issue": ("fused", "graph"), "pdl_overlap": ("graph", "graph_pdl"),
                         "boundary_left": ("graph_pdl", "megakernel")}.items():
        if a in per and b in per:
            gaps[name] = per[a] - per[b]
    return gaps


def targets(recs: Sequence[dict[str, Any]]) -> str:
    """The issue's targets, as reached in this run (the benchmark's report; no lesson or demo prints them)."""
    recs = _timed(recs, versions=True)
    lines = []
    here = _at(recs, 1024, 8, 1)
    mega = here.get("megakernel")
    if mega:
        for anchor, want in (("torch_graph", 2.0), ("graph", 1.3)):
            if anchor in here:
                got = here[anchor]["us_per_pass"] / mega["us_per_pass"]
                lines.append(f"hidden 1024, 8 layers, batch 1: megakernel {mega['us_per_pass']:.1f} us per pass "
                             f"(one pass with its launch {mega['latency_us']:.1f} us) = {got:.2f}x {anchor} "
                             f"({here[anchor]['us_per_pass']:.1f}); target {want}x: {'MET' if got >= want else 'missed'}")
    big = {n: r for n, r in _at(recs, 4096, 8, 1).items() if n.startswith("megakernel")}
    if big:
        best = max(big.values(), key=lambda r: r["of_ceiling"])
        pdl = _at(recs, 4096, 8, 1).get("graph_pdl")
        lines.append(f"hidden 4096, 8 layers, batch 1: best megakernel {best['variant']} {best['us_per_pass']:.1f} us = "
                     f"{best['of_ceiling']:.2f} of the copy ceiling (weight bytes)"
                     + (f", graph_pdl {pdl['of_ceiling']:.2f}" if pdl else "")
                     + f"; target 0.85: {'MET' if best['of_ceiling'] >= 0.85 else 'missed'}")
    for hidden in (1024, 2048, 4096):
        here = _at(recs, hidden, 8, 1)
        if {"megakernel", "megakernel_db"} <= set(here):
            ratio = here["megakernel"]["us_per_pass"] / here["megakernel_db"]["us_per_pass"]
            lines.append(f"hidden {hidden}, 8 layers, batch 1: megakernel / megakernel_db = {ratio:.2f}x "
                         f"({here['megakernel']['us_per_pass']:.1f} / {here['megakernel_db']['us_per_pass']:.1f} us)")
    configs = sorted({(r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"]) for r in recs})
    pdl = [(c, at["graph"]["us_per_pass"] / at["graph_pdl"]["us_per_pass"])
           for c in configs if {"graph", "graph_pdl"} <= set(at := _at(recs, *c))]
    if pdl:
        faster = sum(g > 1 for _, g in pdl)
        lines.append(f"graph_pdl faster than graph at {faster} of {len(pdl)} sizes (graph / graph_pdl: "
                     + ", ".join(f"{h}/{l}/{b} {g:.2f}x" for (h, l, b), g in pdl) + ")")
    return "\n".join(lines)


# -- figures ---------------------------------------------------------------------------------------

def floor_figure(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """us per pass against the weight bytes of one pass, one panel per batch: every variant and anchor, and
    the floor (weight bytes at the copy ceiling) as a line."""
    recs = _timed(records)
    batches = sorted({r["size"]["batch"] for r in recs})
    fig, axes = plots.plt.subplots(1, len(batches), figsize=(5.0 * len(batches), 4.6), squeeze=False, sharey=True)
    for ax, batch in zip(axes[0], batches):
        here = [r for r in recs if r["size"]["batch"] == batch]
        for name in _names(here):
            pts = sorted((r["weight_bytes"] / 1e6, r["us_per_pass"]) for r in here if r["variant"] == name)
            color, line, marker = STYLE.get(name, ("gray", ":", "x"))
            ax.plot(*zip(*pts), line, color=color, marker=marker, ms=5, lw=1.2, label=name)
        floor = sorted({(r["weight_bytes"] / 1e6, r["floor_us"]) for r in here
                        if not in_l2(r, meta) and r["floor_us"] is not None})
        if floor:  # only where the weights exceed L2: where they fit, passes read them from L2
            ax.plot(*zip(*floor), color="black", lw=2.5, alpha=0.25,
                    label="DRAM floor: weights at the copy ceiling (weights larger than L2)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("weight MB per pass (log)")
        plots.style(ax, f"batch {batch}: us per pass (median, steady state)")
    axes[0][0].set_ylabel("us per pass (log)")
    axes[0][-1].legend(fontsize=7, title="variant (solid) / torch anchor (dashed)", title_fontsize=7,
                       loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    note = "points: hidden 1024 / 2048 / 4096 x 8 or 16 layers of float32 weights"
    note += f"; copy ceiling {meta['ceiling_GBs']:.0f} GB/s, same run" if meta.get("ceiling_GBs") else ""
    fig.text(0.99, 0.005, note, fontsize=7, color="gray", ha="right")
    plots.source_note(fig, meta)
    return plots.save(fig, path)


def batch1_figure(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path,
                  layers: int = 8) -> Path:
    """Batch 1, `layers` layers, one panel per hidden: us per pass in steady state (solid) and one pass
    with its launch (light), per variant and anchor, with the floor as a line."""
    recs = [r for r in _timed(records) if r["size"]["batch"] == 1 and r["size"]["layers"] == layers]
    hiddens = sorted({r["size"]["hidden"] for r in recs})
    fig, axes = plots.plt.subplots(1, len(hiddens), figsize=(4.6 * len(hiddens), 4.4), squeeze=False)
    for ax, hidden in zip(axes[0], hiddens):
        here = _at(recs, hidden, layers, 1)
        names = _names(list(here.values()))
        for i, name in enumerate(names):
            r = here[name]
            color = STYLE.get(name, ("gray",))[0]
            ax.barh(i, r["latency_us"], 0.8, color=color, alpha=0.3)
            ax.barh(i, r["us_per_pass"], 0.8, color=color)
            ax.annotate(f"{r['us_per_pass']:.1f}", (r["us_per_pass"], i), xytext=(3, -3), textcoords="offset points",
                        fontsize=7)
        first = next(iter(here.values()))
        if in_l2(first, meta):
            ax.text(0.98, 0.02, "weights fit in L2: no DRAM floor", transform=ax.transAxes, ha="right",
                    fontsize=7, color="gray")
        elif first["floor_us"] is not None:  # None: no copy ceiling in this run
            ax.axvline(first["floor_us"], color="black", lw=1.5, ls=":")
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(r["latency_us"] for r in here.values()) * 1.12)
        ax.set_xlabel("us")
        plots.style(ax, f"hidden {hidden}, {layers} layers, batch 1")
        ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=[plots.Patch(color="gray", label="steady state: us per pass (median)"),
                                plots.Patch(color="gray", alpha=0.3, label=meta.get("one_pass", ONE_PASS)),
                        plots.Line2D([], [], color="black", ls=":", label="DRAM floor: weights at the copy ceiling")],
               fontsize=8, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    plots.source_note(fig, meta)
    return plots.save(fig, path, layout=False)


def timeline_figure(records: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """The megakernel's own %globaltimer stamps, one pass, one panel per size that has them: per layer, from its
    first tile's start to the first tile let past its wait (weights loading, waiting on the layer before),
    then to the last tile counted (working); a tick where its last tile was let go."""
    recs = [r for r in records if r.get("timeline")]
    fig, axes = plots.plt.subplots(1, len(recs), figsize=(5.6 * len(recs), 3.8), squeeze=False)
    for ax, r in zip(axes[0], recs):
        for span in r["timeline"]:
            y = span["layer"]
            ax.barh(y, span["first_go_us"] - span["start_us"], 0.6, left=span["start_us"], color="#c7c7c7")
            ax.barh(y, span["end_us"] - span["first_go_us"], 0.6, left=span["first_go_us"], color=STYLE["megakernel"][0])
            ax.plot([span["last_go_us"]] * 2, [y - 0.3, y + 0.3], color="black", lw=1)
        size = r["size"]
        ax.set_yticks(range(len(r["timeline"])), [f"layer {s['layer']}" for s in r["timeline"]], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("us from the first tile's start (one warm pass)")
        plots.style(ax, f"megakernel, hidden {size['hidden']}, {size['layers']} layers, batch {size['batch']}")
    fig.legend(handles=[plots.Patch(color="#c7c7c7", label="first tile started: weights loading, waiting"),
                        plots.Patch(color=STYLE["megakernel"][0], label="first tile let past its wait -> last counted"),
                        plots.Line2D([], [], color="black", label="last tile let past its wait")],
               fontsize=8, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    plots.source_note(fig, meta)
    return plots.save(fig, path, layout=False)


def figures(doc: dict[str, Any], out_dir: str | Path, stem: str = "decode") -> list[Path]:
    """The figures a results file supports (none without timings; batch 1 only with 8 layers at batch 1, the
    timeline only with stamps)."""
    doc = as_drawn(doc)
    out_dir, records, meta = Path(out_dir), doc["records"], doc["meta"]
    if not _timed(records):
        return []
    made = [floor_figure(records, meta, out_dir / f"{stem}_us_per_pass.png")]
    if any((r["size"]["layers"], r["size"]["batch"]) == (8, 1) for r in _timed(records)):
        made.append(batch1_figure(records, meta, out_dir / f"{stem}_batch1.png"))
    if any(r.get("timeline") for r in records):
        made.append(timeline_figure(records, meta, out_dir / f"{stem}_timeline.png"))
    return made


FIGURES = {"decode": figures, "study:decode": figures}
