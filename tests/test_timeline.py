import json

import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.checks import check_variant
from kernels_lab.cli import main
from kernels_lab.core import all_workloads
from kernels_lab.workloads.quantize_group import group_sizes
from kernels_lab.profile.timeline import variant_timelines


@pytest.mark.parametrize("name", sorted(all_workloads()))
def test_every_variant_of_every_workload_gets_a_well_formed_timeline(name):
    w = all_workloads()[name]
    n = 517
    for rec in variant_timelines(w, w.size(n)):
        spans = rec["spans"]
        plan = w.variant(rec["variant"]).plan(w.size(n))
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


@pytest.mark.parametrize("variant", list(get_workload("quantize_group").variants))
def test_quantize_group_variants_match_the_reference(variant):
    w = get_workload("quantize_group")
    for n, seed in ((13, 1), (517, 2)):
        result = check_variant(w, w.variant(variant), w.size(n), seed)
        assert result.ok, result.explain()


def test_timeline_command_writes_results_and_a_figure(tmp_path):
    out = tmp_path / "tl.json"
    assert main(["timeline", "elementwise", "--n", "300", "--variants", "unfused,fused", "--json", str(out),
                 "--out", str(tmp_path)]) == 0
    doc = json.loads(out.read_text())
    assert [r["variant"] for r in doc["records"]] == ["unfused", "fused"]
    assert (tmp_path / "tl_timeline.png").stat().st_size > 10_000


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
