"""Every committed figure re-renders from its committed GPU results file, and reads at a glance."""

from pathlib import Path

import sys

import pytest

from kernels_lab.profile import plots, results

ROOT = Path(__file__).parent.parent
FIGURES = ROOT / "figures"
DATA = FIGURES / "data"
FILES = sorted(DATA.glob("*.json"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import render_figures  # noqa: E402  (the script that draws figures/ from figures/data/)


def test_there_are_committed_gpu_results():
    assert FILES, "figures/data/ holds no results"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_results_come_from_a_gpu_and_re_render(path, tmp_path):
    doc = results.load(path)
    meta = doc["meta"]
    assert meta["backend"] == "gpu" and "H200" in meta["device"]
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


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions would save, kept open for inspection."""
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path, layout=True: figs.append(fig) or Path(path))
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
    plots.ladder(records, {}, "unused")
    text = _texts(drawn[0])
    graph = next(r for r in records if r["path"].startswith("CUDA graph replay"))
    assert "none (below the axis)" in text and f"{graph['host_us_per_launch']:.3f} us (below the axis)" in text


def test_the_consumer_latency_figure_draws_the_payload_the_readme_quotes(drawn):
    doc = results.load(DATA / "consumer_h200.json")
    plots.consumer_latency_cdf(doc["records"], doc["meta"], "unused")
    assert "payload 1 KiB" in drawn[0].axes[0].get_title("left")


def test_pdl_timelines_mark_the_wrong_variants_and_title_what_is_drawn(drawn):
    doc = results.load(DATA / "pdl_h200.json")
    plots.pdl_timeline(doc["records"], doc["meta"], "unused", "large")
    titles = [ax.get_title("left") for ax in drawn[0].axes]
    assert all("this run" in t and "median" in t for t in titles)
    wrong = [t for t in titles if t.startswith("WRONG")]
    assert len(wrong) == 2 and all("before the group ended" in t for t in wrong)
    assert "WRONG variant (kept to show why)" in _texts(drawn[0])
