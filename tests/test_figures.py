"""Every committed figure re-renders from its committed GPU results file, and reads at a glance."""

from pathlib import Path

import sys

import pytest

from kernels_lab import topics
from kernels_lab.profile import plots, results

ROOT = Path(__file__).parent.parent
FIGURES = ROOT / "figures"
DATA = FIGURES / "data"
FILES = sorted(DATA.glob("*.json"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import render_figures  # noqa: E402  (the script that draws figures/ from figures/data/)
from kernels_lab.topics.consumer.figures import consumer_latency_cdf  # noqa: E402
from kernels_lab.topics.launch.figures import ladder  # noqa: E402
from kernels_lab.topics.pdl.figures import pdl_timeline  # noqa: E402


def test_there_are_committed_gpu_results():
    assert FILES, "figures/data/ holds no results"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_results_come_from_a_gpu_and_re_render(path, tmp_path):
    doc = results.load(path)
    meta = doc["meta"]
    assert meta["backend"] == "gpu" and any(gpu in meta["device"] for gpu in ("H100", "H200"))
    assert meta["command"] and meta["date"] and meta["versions"].get("numba-cuda")
    made = render_figures.render_file(path, tmp_path)
    assert made and all(p.stat().st_size > 10_000 for p in made)
    drawn, committed = {p.name for p in made}, {p.name for p in FIGURES.glob(f"{path.stem}_*.png")}
    assert committed <= drawn, f"committed figures this results file no longer draws: {committed - drawn}"
    if committed:  # a results file kept as raw data (a superseded run) may have none committed
        assert drawn <= committed, f"figures/ is missing a figure of this results file: {drawn - committed}"


def test_every_committed_figure_comes_from_a_results_file():
    stems = [p.stem for p in FILES]
    orphans = [p.name for p in FIGURES.glob("*.png") if not any(p.name.startswith(s + "_") for s in stems)]
    assert not orphans, f"figures without a results file in figures/data/: {orphans}"


def _instead_of_save(monkeypatch, keep) -> None:
    """`keep(fig, path, layout)` instead of plots.save, in the harness's plots and in every topic's figures.py
    (which import save by name)."""
    for module in [plots, *topics.modules("figures")]:
        if hasattr(module, "save"):
            monkeypatch.setattr(module, "save", keep)


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions would save, kept open for inspection."""
    figs = []
    _instead_of_save(monkeypatch, lambda fig, path, layout=True: figs.append(fig) or Path(path))
    yield figs
    for f in figs:
        plots.plt.close(f)


def _texts(fig):
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_title("left"), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for legend in fig.legends:
        out += [t.get_text() for t in legend.get_texts()]
    return "\n".join(out)


def _sweep_records():
    recs = []
    for cols in (1024, 2048, 4096):
        for variant, pattern, launches in (("unfused", "unfused", 3), ("fused", "fused", 1)):
            recs.append({"workload": "softmax", "variant": variant, "pattern": pattern, "n": 64 * cols,
                         "size": {"rows": 64, "cols": cols}, "launches": launches, "bytes_model": 8 * 64 * cols,
                         "bytes_model_read": 4 * 64 * cols, "bytes_model_write": 4 * 64 * cols,
                         "time_ms": 0.01 * cols / 1024, "time_ms_q1": 0.009 * cols / 1024,
                         "time_ms_q3": 0.011 * cols / 1024, "GBs": 100.0})
    return recs


def test_a_sweep_is_drawn_against_its_swept_axis_with_the_ceiling(drawn):
    meta = {"device": "test", "date": "2026", "ceiling_GBs": 4000.0, "sweep_axis": "cols",
            "sweep_unit": "row length"}
    plots.render({"meta": meta, "records": _sweep_records()}, "unused", "s")
    bytes_fig, time_fig, bw_fig = drawn
    assert "rows = 2^6, cols = 2^12" in _texts(bytes_fig)
    assert "planned bytes at the copy ceiling (4000 GB/s)" in _texts(bytes_fig)
    assert time_fig.axes[0].get_xlabel() == "cols (row length)" == bw_fig.axes[0].get_xlabel()
    assert "copy ceiling, same run (4000 GB/s)" in _texts(bw_fig)


def test_measured_bytes_are_drawn_beside_the_plan_when_the_records_have_them(drawn):
    doc = results.load(DATA / "profile_elementwise_h200.json")
    plots.render(doc, "unused", "p")
    text = _texts(drawn[0])
    assert "plan (model)" in text and "Nsight Compute DRAM (measured)" in text and "-1.9%" in text


def test_near_zero_ladder_rungs_are_written_not_drawn_as_stubs(drawn):
    records = results.load(DATA / "ladder_h200.json")["records"]
    ladder(records, {}, "unused")
    text = _texts(drawn[0])
    graph = next(r for r in records if r["path"].startswith("CUDA graph replay"))
    assert "none (below the axis)" in text and f"{graph['host_us_per_launch']:.3f} us (below the axis)" in text


def test_the_consumer_latency_figure_draws_the_payload_the_readme_quotes(drawn):
    doc = results.load(DATA / "consumer_h200.json")
    consumer_latency_cdf(doc["records"], doc["meta"], "unused")
    assert "payload 1 KiB" in drawn[0].axes[0].get_title("left")


def test_pdl_timelines_mark_the_wrong_variants_and_title_what_is_drawn(drawn):
    doc = results.load(DATA / "pdl_h200.json")
    pdl_timeline(doc["records"], doc["meta"], "unused", "large")
    titles = [ax.get_title("left") for ax in drawn[0].axes]
    assert all("this run" in t and "median" in t for t in titles)
    wrong = [t for t in titles if t.startswith("WRONG")]
    assert len(wrong) == 2 and all("before the group ended" in t for t in wrong)
    assert "WRONG variant (kept to show why)" in _texts(drawn[0])


# -- what a lesson says beside a figure, against what the figure draws ----------------------------------

import colorsys  # noqa: E402
import re  # noqa: E402

LESSON_SOURCES = sorted((ROOT / "notebooks" / "lessons").glob("[0-9][0-9]_*.py"))
IMAGE = re.compile(r"!\[[^\]]*\]\(\.\./figures/([\w.-]+\.png)\)")
VERSION = re.compile(r"\bv(\d+)\b(?: to v(\d+)\b)?")
COLOUR = re.compile(r"\b(dark red|grey|gray|red|blue|green|orange|purple)\b")


def _markdown_cells(path):
    """The markdown cells of a lesson source (Jupytext percent format), comment marks removed."""
    cells, current = [], None
    for line in path.read_text().splitlines():
        if line.startswith("# %%"):
            current = [] if "[markdown]" in line else None
            if current is not None:
                cells.append(current)
        elif current is not None:
            current.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    return ["\n".join(c) for c in cells]


def _said_beside_figures():
    """(lesson, figure, the markdown cell that shows it) for every cell that names a version or a colour."""
    out = []
    for path in LESSON_SOURCES:
        for cell in _markdown_cells(path):
            for name in IMAGE.findall(cell):
                text = IMAGE.sub("", cell)
                if VERSION.search(text) or COLOUR.search(text):
                    out.append((path.stem, name, text))
    return out


def _versions(text):
    """{"v2", "v3", ...}: single versions and ranges ("v3 to v7")."""
    found = set()
    for first, last in VERSION.findall(text):
        found |= {f"v{k}" for k in range(int(first), int(last or first) + 1)}
    return found


def _colour_family(rgba):
    r, g, b, a = rgba
    if a == 0:
        return set()
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    if s < 0.15:
        return {"grey"} if 0.3 < v < 0.92 else set()
    if h < 0.05 or h > 0.95:
        return {"red", "dark red"} if v < 0.8 else {"red"}
    return {name for name, lo, hi in (("orange", 0.05, 0.12), ("green", 0.2, 0.45), ("blue", 0.5, 0.7),
                                      ("purple", 0.7, 0.85)) if lo <= h < hi}


def _drawn(fig):
    """The colour families a figure draws (its legends' swatches left out: they are checked apart) and the
    labels of its ticks and legends."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba
    colours, ticks = set(), set()
    for ax in fig.axes:
        for artist in ax.patches:
            if artist.get_visible():
                colours |= _colour_family(to_rgba(artist.get_facecolor()))
        for line in ax.lines:
            colours |= _colour_family(to_rgba(line.get_color()))
        for coll in ax.collections:
            # a LineCollection (hlines, vlines) draws with its edge colours; its face is empty
            drawn_with = coll.get_edgecolors() if isinstance(coll, LineCollection) else coll.get_facecolors()
            for c in drawn_with:
                colours |= _colour_family(tuple(c))
        ticks |= {t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()}
        if ax.get_legend():  # a version drawn as a line or a bar colour is named in the legend, not a tick
            ticks |= {t.get_text() for t in ax.get_legend().get_texts()}
    for legend in fig.legends:
        ticks |= {t.get_text() for t in legend.get_texts()}
    return colours, ticks


SAID = _said_beside_figures()


@pytest.mark.parametrize("lesson,figure,text", SAID, ids=[f"{lesson}:{fig}" for lesson, fig, _ in SAID])
def test_a_lesson_names_only_the_versions_and_colours_its_figure_draws(lesson, figure, text, tmp_path, monkeypatch):
    figs = {}
    _instead_of_save(monkeypatch, lambda fig, path, layout=True: figs.setdefault(Path(path).name, fig) and Path(path))
    results_file = max((p for p in FILES if figure.startswith(p.stem + "_")), key=lambda p: len(p.stem))
    render_figures.render_file(results_file, tmp_path)
    try:
        colours, ticks = _drawn(figs[figure])
    finally:
        for f in figs.values():
            plots.plt.close(f)
    named = {"grey" if c == "gray" else c for c in COLOUR.findall(text)}
    assert named <= colours, f"{lesson} names {sorted(named - colours)} beside {figure}, which draws {sorted(colours)}"
    drawn_versions = _versions(" ".join(ticks))
    if drawn_versions or _versions(text):
        said = _versions(text)
        assert said == drawn_versions, (f"{lesson} beside {figure}: versions drawn but not explained "
                                        f"{sorted(drawn_versions - said)}, named but not drawn "
                                        f"{sorted(said - drawn_versions)}")
    for anchor in ("softmax", "compile"):
        if anchor in ticks:
            assert f"`{anchor}`" in text, f"{lesson} does not say what the {anchor!r} bars of {figure} are"


# -- figures that read at a glance -----------------------------------------------------------------------

def test_the_sweep_draws_a_model_line_per_variant_and_says_which_share_one(drawn):
    doc = results.load(DATA / "profile_elementwise_h200.json")
    plots.sweep_time([r for r in doc["records"] if r.get("kind") is None], doc["meta"], "unused")
    ax = drawn[0].axes[0]
    variants = {r["variant"] for r in doc["records"] if r.get("kind") is None}
    models = [line for line in ax.lines if line.get_linestyle() not in ("None", "") and len(line.get_xdata()) > 2]
    assert len(models) == len(variants) and len(set(plots.MODEL_DASHES)) >= len(variants)  # a dash each
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "persistent (1 launch), model = fused's" in legend
    assert all(h.get_linestyle() not in ("None", "") for h in ax.get_legend().legend_handles[:len(variants)])


def test_the_ladder_says_why_host_and_device_bars_are_equal(drawn):
    records = results.load(DATA / "ladder_h200.json")["records"]
    ladder(records, {}, "unused")
    text = _texts(drawn[0])
    equal = [r for r in records if r["host_us_per_launch"] >= 0.1
             and abs(r["device_us_per_boundary"] / r["host_us_per_launch"] - 1) < 0.02]
    assert equal and text.count("(= host)") == len(equal)
    assert "host-bound: the device spacing is the host's launch time" in text


def test_the_timeline_legend_keeps_clear_of_the_source_note(drawn):
    doc = results.load(DATA / "timeline_elementwise_h200.json")
    meta = {**doc["meta"], "device": "numba CUDA simulator (no GPU: correctness, launches and bytes only; no timings)"}
    plots.timeline_chart(doc["records"], meta, "unused")
    fig = drawn[0]
    fig.canvas.draw()
    note = next(t for t in fig.texts if "simulator" in t.get_text()).get_window_extent()
    assert not fig.legends[0].get_window_extent().overlaps(note)
