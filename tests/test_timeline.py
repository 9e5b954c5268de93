import json

import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.checks import check_variant
from kernels_lab.cli import main
from kernels_lab.core import all_workloads
from kernels_lab.topics.pdl.workload import group_sizes
from kernels_lab.profile.timeline import variant_timelines


def _smallest_size(w):
    """The smallest size every variant runs (a timeline's shape does not depend on the size)."""
    sizes = list(getattr(w, "test_sizes", lambda: [])()) + [w.default_size(False)]
    runnable = [s for s in sizes if all(v.why_not(s) is None for v in w.variants.values())] or sizes
    return min(runnable, key=lambda s: s.elements)


@pytest.mark.parametrize("name", sorted(all_workloads()))
def test_every_variant_of_every_workload_gets_a_well_formed_timeline(name):
    w = all_workloads()[name]
    size = _smallest_size(w)
    for rec in variant_timelines(w, size, show_progress=False):
        spans = rec["spans"]
        plan = w.variant(rec["variant"]).plan(size)
        assert rec["size"] == dict(size)
        assert [s["kernel"] for s in spans] == [k.kernel for k in plan.launches]
        assert spans[0]["start_us"] == 0
        assert all(s["end_us"] >= s["start_us"] for s in spans)
        assert all(a["end_us"] <= b["start_us"] for a, b in zip(spans, spans[1:]))  # one at a time here


@pytest.mark.parametrize("n", [1, 5, 8, 9, 1031])
def test_group_sizes_split_n_into_different_nonempty_tensors(n):
    sizes = group_sizes(n)
    assert sum(sizes) == n and len(sizes) == min(8, n) and min(sizes) >= 1
    if n >= 64:
        assert len(set(sizes)) == len(sizes)


def test_timeline_command_names_its_files_after_the_workload_inside_out(tmp_path, capsys):
    # default: OUT/WORKLOAD_timeline.json and OUT/WORKLOAD_timeline.png
    assert main(["timeline", "elementwise", "--n", "40", "--variants", "unfused,fused", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "elementwise_timeline.json").read_text())
    assert [r["variant"] for r in doc["records"]] == ["unfused", "fused"]
    assert (tmp_path / "elementwise_timeline.png").stat().st_size > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elementwise_timeline.json", "elementwise_timeline.png"]
    err = capsys.readouterr().err
    assert "timeline elementwise" in err and "2/2" in err  # the progress bar, on stderr
    # an explicit --json: the figure is named after it (figures/ keeps RESULTS_timeline.png)
    assert main(["timeline", "elementwise", "--n", "40", "--variants", "fused", "--json", str(tmp_path / "tl.json"),
                 "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "tl_timeline.png").exists() and (tmp_path / "tl.json").exists()


@pytest.mark.gpu
def test_gpu_timelines_come_from_events_and_graphs_are_one_replay():
    w = get_workload("quantize_group")
    recs = {r["variant"]: r for r in variant_timelines(w, w.size(1 << 14))}
    assert recs["plain"]["source"] == "CUDA events" and len(recs["plain"]["spans"]) == 8
    assert [s["kernel"] for s in recs["graph"]["spans"]] == ["graph replay"]
    assert all(0 <= s["end_us"] - s["start_us"] < 1e4 for r in recs.values() for s in r["spans"])


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(get_workload("quantize_group").variants))
def test_gpu_quantize_group_variants_match_the_reference(variant):
    w = get_workload("quantize_group")
    for n in (8, 1031, (1 << 18) + 3):
        result = check_variant(w, w.variant(variant), w.size(n), int(np.log2(n)))
        assert result.ok, result.explain()
