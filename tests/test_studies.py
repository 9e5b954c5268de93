"""Every topic's study at its check sizes on the simulator (what `kernels-lab bench NAME` runs there), and the
harness's timed path with its two clocks replaced by a fixed timing (the simulator has none): the checks,
the re-check after timing, the anchors and the record schema are the GPU's own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernels_lab.core import Variant
from kernels_lab.instrument.timing import Timing
from kernels_lab.profile import plots, results, study as st
from kernels_lab.profile.ceiling import Ceiling
from kernels_lab.profile.study import Anchor, Group, StudyError, run_study, studies, version, recheck, row_inputs

STUDIES = studies()


@pytest.fixture(scope="module", params=list(STUDIES))
def checked(request, tmp_path_factory):
    """(study, its results file) after a run at its check sizes: what CI and `bench` on the simulator do."""
    s = STUDIES[request.param]
    run = run_study(s, tmp_path_factory.mktemp(s.name) / f"{s.name}.json", command="test", say=lambda _: None)
    return s, results.load(run.path)


def test_every_line_checked_at_the_check_sizes(checked):
    s, doc = checked
    ran = {r["line"] for r in doc["records"]}
    assert ran == {line.name for line in s.lines()}, f"lines no check size runs: {set(s.line_names()) - ran}"
    wrong = [(r["line"], r["size"], r["problem"]) for r in doc["records"] if r["checked"] is not True]
    assert not wrong
    assert all(r["time_ms"] is None and r["GBs_useful"] is None for r in doc["records"])
    assert "GPU" in doc["meta"]["skipped"]["timing"] and doc["meta"]["ceiling_GBs"] is None
    assert doc["meta"]["study"] == s.name and set(doc["meta"]["gbs"]) == {"GBs_model", "GBs_useful", "GBs_weight"}


def test_the_topic_draws_its_study(checked, tmp_path):
    """The topic's figures.py draws a study's records (here the check run's, given times)."""
    s, doc = checked
    timed = [{**r, "time_ms": 1.0, "time_ms_steady": 0.5, "GBs_useful": r["bytes_useful"] / 1e6,
              "GBs_model": r["bytes_model"] / 1e6, "group": s.groups[0].name} for r in doc["records"]]
    made = plots.render({**doc, "records": timed}, tmp_path, s.name)
    assert made and all(p.stat().st_size > 10_000 for p in made)


# -- the timed path, clocks replaced -------------------------------------------------------------------

LN = STUDIES["layernorm"]


@pytest.fixture
def clocks(monkeypatch):
    """A fixed timing for every launcher: 2 ms one-pass, 1 ms steady."""
    def fixed(ms):
        return lambda launchers, **kw: [Timing(ms, ms, ms, 1, 5.0) for _ in launchers]
    monkeypatch.setattr(st, "why_untimed", lambda: None)
    monkeypatch.setattr(st, "time_launchers", fixed(2.0))
    monkeypatch.setattr(st, "time_steady", fixed(1.0))
    monkeypatch.setattr(st, "measure_copy_ceiling", lambda: Ceiling(4000.0, "copy kernel", {"copy kernel": 4000.0}))


def _numpy_anchor(corrupt: bool = False) -> Anchor:
    """An anchor computing the float64 reference on the host (and, corrupt, one wrong element)."""
    def make(dev_in, size):
        held = {}

        def launch():
            host = {k: (v.copy_to_host() if hasattr(v, "copy_to_host") else v) for k, v in dev_in.items()}
            out = LN.workload.reference(host)["out"].astype(np.float32)
            if corrupt:
                out[-1, -1] += 1.0
            held["out"] = out
        return launch, lambda: dict(held)
    return Anchor("numpy", "the float64 reference, rounded", make, launches=0)


def _wrong_when_large(base: Variant) -> Variant:
    """fused, writing one wrong element past 3 rows: right at the check size, wrong at the timed one."""
    def bind(inputs, outputs, stream=0):
        launch = base.bind(inputs, outputs, stream)

        def run():
            launch()
            if outputs["out"].shape[0] > 3:
                outputs["out"][0:1, 0:1] = np.full((1, 1), 7.0, np.float32)
        return run
    return dataclasses.replace(base, name="drifts", bind=bind)


def test_timed_path_records(clocks, tmp_path):
    size = LN.workload.size(rows=9, cols=67)
    s = dataclasses.replace(LN, groups=(Group("shapes", (size,)),), check_size=lambda z: z.replace(rows=3),
                            versions=(), anchors=(_numpy_anchor(),), weight_bytes=lambda z: 8 * z.cols)
    run = run_study(s, tmp_path / "ln.json", command="test", say=lambda _: None)
    by = {r["line"]: r for r in results.load(run.path)["records"]}
    assert set(by) == {"unfused", "fused", "persistent", "cluster", "numpy"} and not run.problems
    fused, anchor = by["fused"], by["numpy"]
    assert fused["checked"] is True and anchor["checked"] is True and anchor["pattern"] == "anchor"
    assert fused["launches"] == 1 and by["unfused"]["launches"] == 3
    assert fused["time_ms"] == 2.0 and fused["time_ms_steady"] == 1.0
    assert fused["GBs_useful"] == pytest.approx(8 * size.elements / 2e-3 / 1e9)
    assert fused["GBs_model"] == pytest.approx(fused["bytes_model"] / 2e-3 / 1e9)
    assert fused["GBs_weight"] == pytest.approx(8 * 67 / 2e-3 / 1e9)
    assert anchor["GBs_model"] is None and fused["vs_anchor"] == 1.0
    assert fused["of_ceiling"] == pytest.approx(fused["GBs_useful"] / 4000.0) and run.skipped == {}


def test_wrong_after_timing_and_wrong_anchor_are_reported(clocks, tmp_path):
    # the lines asserted on (the other registered ones take this path in test_timed_path_records, same size)
    size = LN.workload.size(rows=9, cols=67)
    s = dataclasses.replace(LN, groups=(Group("shapes", (size,), lines=("fused", "v2", "numpy")),), rows_axis=None,
                            check_size=lambda z: z.replace(rows=3),
                            versions=(version("v2", _wrong_when_large(LN.workload.variant("fused")), "drifts"),),
                            anchors=(_numpy_anchor(corrupt=True),))
    run = run_study(s, tmp_path / "ln.json", command="test", say=lambda _: None)
    by = {r["line"]: r for r in run.records}
    assert by["fused"]["checked"] is True
    assert by["v2"]["checked"] is False and "after timing" in by["v2"]["problem"] and "out[0, 0]" in by["v2"]["problem"]
    assert by["numpy"]["checked"] is False and "out[8, 66]" in by["numpy"]["problem"]
    assert [r["line"] for r in run.wrong] == ["v2"]


def test_a_wrong_line_is_not_timed(clocks, tmp_path):
    base = LN.workload.variant("fused")

    def bind(inputs, outputs, stream=0):
        return lambda: None  # writes nothing: the poison stays
    s = dataclasses.replace(LN, groups=(Group("shapes", (LN.workload.size(rows=4, cols=67),), lines=("fused", "v9")),),
                            anchors=(), check_size=None,
                            versions=(version("v9", dataclasses.replace(base, name="lazy", bind=bind), "no-op"),))
    run = run_study(s, tmp_path / "ln.json", command="test", say=lambda _: None)
    lazy = next(r for r in run.records if r["line"] == "v9")
    assert lazy["checked"] is False and lazy["time_ms"] is None and "unwritten" in lazy["problem"]
    assert any("v9" in p and "not timed" in p for p in run.problems)


def test_harder_inputs_are_checked_for_the_variants_named(tmp_path):
    s = dataclasses.replace(LN, check_sizes=(LN.workload.size(rows=2, cols=67),), harder_for=("fused",),
                            harder={"x poisoned with nan": lambda i: {**i, "x": np.full_like(i["x"], np.nan)}})
    run = run_study(s, tmp_path / "ln.json", command="test", say=lambda _: None)
    by = {r["line"]: r for r in run.records}
    assert by["fused"]["checked"] is False and by["fused"]["problem"].startswith("x poisoned with nan")
    assert by["unfused"]["checked"] is True and by["persistent"]["checked"] is True


def test_a_group_naming_an_unknown_line_is_refused(tmp_path):
    s = dataclasses.replace(LN, groups=(Group("shapes", LN.groups[0].sizes, lines=("fused", "fussed")),))
    with pytest.raises(StudyError, match="fussed"):
        run_study(s, tmp_path / "x.json", command="test")


def test_the_readme_numbers_read_a_study(clocks, tmp_path):
    """elementwise's README numbers from a study's results file (what a GPU run of `kernels-lab bench elementwise`
    writes over the committed demo run): GB/s there are the planned bytes' rate, as the demo's were."""
    from kernels_lab.topics.elementwise import numbers
    s = STUDIES["elementwise"]
    size = s.workload.size(1027)
    s = dataclasses.replace(s, groups=(Group("n", (size,)),), anchors=())
    run_study(s, tmp_path / numbers.ELEMENTWISE, command="test", say=lambda _: None)
    e = numbers.elementwise(tmp_path)
    assert e["time_ratio"] == 1.0 and e["bytes_ratio"] > 2 and e["ceiling"] == 4000.0
    fused = s.workload.variant("fused").plan(size).bytes_total
    assert e["GBs"]["fused"] == pytest.approx(fused / 2e-3 / 1e9)
    assert "on 1,027 float32 elements" in numbers.elementwise_caption(tmp_path)


# -- kernels-lab bench ----------------------------------------------------------------------------------

def test_bench_lists_every_study_and_fixed_measurement(capsys):
    from kernels_lab.cli import main
    assert main(["bench", "--list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert set(STUDIES) | {"launch", "consumer", "pdl"} <= listed


def test_bench_runs_a_study_here_and_says_what_it_skipped(tmp_path, capsys, monkeypatch):
    """`bench` on the simulator: the study at its check sizes, untimed (here one small check size: layernorm's
    own check sizes run in test_every_line_checked_at_the_check_sizes)."""
    from kernels_lab.cli import main
    monkeypatch.setattr(st, "studies", lambda: {"layernorm": dataclasses.replace(
        LN, check_sizes=(LN.workload.size(rows=2, cols=67),))})
    out = tmp_path / "ln.json"
    assert main(["bench", "layernorm", "--json", str(out), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "skipped timing: timings need a GPU" in text and "WRONG" not in text
    assert {r["line"] for r in results.load(out)["records"]} == {line.name for line in LN.lines()}  # every one


@pytest.mark.parametrize("argv,message", [
    (["bench", "launch", "--reps", "3"], "needs a GPU"),
    (["bench", "sofmax"], "unknown bench 'sofmax'; studies: "),
    (["bench", "softmax", "--ncu"], "--ncu measures DRAM bytes on a GPU"),
])
def test_bench_refuses_with_a_reason(argv, message, tmp_path, capsys):
    from kernels_lab.cli import main
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_bench_refuses_a_topic_without_a_study_and_a_group_the_study_lacks(tmp_path, capsys):
    from kernels_lab.cli import main
    assert main(["bench", "block_sums", "--out", str(tmp_path)]) == 2
    assert "topic block_sums publishes no numbers: it has no study" in capsys.readouterr().err
    assert main(["bench", "decode", "--group", "targets,nope", "--out", str(tmp_path)]) == 2
    assert "study decode has the groups targets, deficit, sweep" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_bench_runs_the_groups_named(clocks, tmp_path, monkeypatch):
    """--group cuts the study to those groups (here timed on the fixed clocks, the layernorm study's two
    smallest shapes standing in as groups of their own)."""
    from kernels_lab.cli import main
    small = (LN.workload.size(rows=4, cols=67), LN.workload.size(rows=3, cols=33))
    s = dataclasses.replace(LN, groups=(Group("a", small[:1]), Group("b", small[1:])), anchors=(),
                            check_size=None)
    monkeypatch.setattr(st, "studies", lambda: {"layernorm": s})
    assert main(["bench", "layernorm", "--group", "b", "--json", str(tmp_path / "ln.json"), "--out", str(tmp_path)]) == 0
    recs = results.load(tmp_path / "ln.json")["records"]
    assert {r["group"] for r in recs} == {"b"} and {r["size"]["cols"] for r in recs} == {33}


def test_decode_records_read_as_the_committed_kind(clocks, tmp_path):
    """decode's study records, drawn by its figures and table as the older kind decode: the steady clock as us per
    pass, the one-pass clock beside it, the weights' floor and fraction of the copy ceiling from the weight bytes."""
    from kernels_lab.topics.decode import figures, study as ds
    size = ds.W.size(hidden=13, layers=2, batch=1)
    s = dataclasses.replace(STUDIES["decode"], groups=(Group("targets", (size,)),), versions=ds.MEGA_VERSIONS[:1],
                            anchors=())
    run = run_study(s, tmp_path / "decode.json", command="test", say=lambda _: None)
    assert not run.problems
    doc = results.load(run.path)
    by = {r["variant"]: r for r in figures.as_drawn(doc)["records"]}
    weights = 4 * 2 * 13 ** 2
    mega, version_name = by["megakernel"], ds.MEGA_VERSIONS[0].name
    assert set(by) == {*ds.W.variants, version_name}
    assert mega["us_per_pass"] == 1000.0 and mega["latency_us"] == 2000.0  # fixed clocks: steady 1 ms, one pass 2
    assert mega["weight_bytes"] == weights and mega["GBs_weight"] == pytest.approx(weights / 2e-3 / 1e9)
    assert mega["floor_us"] == pytest.approx(weights / 4000e9 * 1e6)
    assert mega["of_ceiling"] == pytest.approx(weights / 1e-3 / 4000e9)
    assert mega["bytes_useful"] == 4 * (2 * 13 * 14 + 2 * 13) and mega["blocks"] >= 1
    assert mega["version"] is None and by[version_name]["version"] == version_name.removeprefix("megakernel_")
    assert [p.name for p in plots.render(doc, tmp_path, "decode")] == ["decode_us_per_pass.png"]
    row = next(line for line in figures.table(doc).splitlines() if line.split()[:1] == ["megakernel"])
    assert row.split()[1:] == ["1000.0"]  # the demo's table: us per pass, the steady clock


def test_the_recheck_cuts_only_the_inputs_indexed_by_row_even_at_a_square_size():
    # layernorm at rows == cols: gamma and beta are as long as the rows are many, and must not be cut to a
    # window (the H100's first run of the study stopped there: "operands could not be broadcast")
    size = LN.workload.size(rows=40, cols=40)
    inputs = LN.workload.make_inputs(size, np.random.default_rng(3))
    right = LN.workload.reference(inputs)["out"].astype(np.float32)
    assert row_inputs(LN, size) == {"x"}
    assert recheck(LN, size, inputs, lambda w: {"out": right[w]}, np.random.default_rng(0), None) is None
    wrong = right.copy()
    wrong[-1, 5] += 1  # the last window always includes the last row
    assert "out[" in recheck(LN, size, inputs, lambda w: {"out": wrong[w]}, np.random.default_rng(0), None)


def test_best_registered_is_the_fastest_checked_registered_line_at_each_size():
    from kernels_lab.profile.study import best_registered

    def rec(line, cols, ms, registered=True, checked=True, group="g"):
        return {"line": line, "size": {"rows": 4, "cols": cols}, "time_ms": ms, "registered": registered,
                "checked": checked, "group": group}
    records = [rec("fused", 8, 2.0), rec("split", 8, 1.5), rec("v16", 8, 1.0, registered=False),
               rec("wrong", 8, 0.5, checked=False), rec("torch", 8, 0.1, registered=False),
               rec("fused", 16, 3.0), rec("split", 16, None), rec("split", 16, 0.2, group="other")]
    best = best_registered(records, "g")
    assert {size: r["line"] for size, r in best.items()} == {(4, 8): "split", (4, 16): "fused"}
    assert best_registered(records)[4, 16]["line"] == "split"  # every group


def test_the_ceiling_sizes_say_why_they_cannot_run_on_the_simulator(tmp_path, capsys):
    from kernels_lab.profile import ceiling_sizes
    assert ceiling_sizes.main([str(tmp_path / "c.json")]) == 2
    assert "need a GPU" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
    assert ceiling_sizes.main([]) == 2 and "OUT.json" in capsys.readouterr().out  # its usage


def test_the_committed_cross_entropy_waves_are_the_studys_sizes_and_their_arithmetic():
    import json
    from kernels_lab import lessons
    from kernels_lab.instrument.ptxas import blocks_per_sm
    from kernels_lab.topics.softmax.ce_waves import SMS
    from kernels_lab.topics.softmax.cross_entropy_study import VOCAB
    doc = json.loads((lessons.DATA / "compiled" / "cross_entropy_waves_sm90.json").read_text())
    assert {(r["size"]["rows"], r["size"]["cols"]) for r in doc["records"]} == {(s.rows, s.cols) for s in VOCAB}
    for r in doc["records"]:
        assert (r["blocks_per_sm"], r["limited_by"]) == blocks_per_sm(r["registers"], r["threads"], r["shared_bytes"])
        assert r["blocks"] == r["size"]["rows"] * r["slices"] and r["waves"] == r["blocks"] / (SMS * r["blocks_per_sm"])


_WAVES_CHILD = """
import json
from kernels_lab.topics.softmax.cross_entropy import ce_kernel, shape_for
from kernels_lab.topics.softmax.cross_entropy_study import VOCAB
print(json.dumps([[s.cols, v, shape_for(s.cols, v == "split").slices, shape_for(s.cols, v == "split").threads,
                   ce_kernel(shape_for(s.cols, v == "split")).py_func.__name__] for s in VOCAB for v in ("fused", "split")]))
"""


def test_the_committed_cross_entropy_waves_are_todays_layouts():
    """The layouts (slices, threads, kernel) the committed waves file counted are the ones a GPU launches today,
    asked of the PTX-only back-end (the GPU's layouts, no GPU); their registers need ptxas:
    `python -m kernels_lab.topics.softmax.ce_waves` recounts them."""
    import json
    import os
    import subprocess
    import sys
    from kernels_lab import capabilities, lessons
    if not capabilities.ptx_libraries().available:
        pytest.skip("needs numba's compiler (the cu13 extra) for the PTX-only back-end")
    doc = json.loads((lessons.DATA / "compiled" / "cross_entropy_waves_sm90.json").read_text())
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    got = subprocess.run([sys.executable, "-c", _WAVES_CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    today = {tuple(row) for row in json.loads(got.stdout.strip().splitlines()[-1])}
    committed = {(r["size"]["cols"], r["variant"], r["slices"], r["threads"], r["kernel"]) for r in doc["records"]}
    assert committed == today, "the layouts changed: rerun " + doc["meta"]["command"]
