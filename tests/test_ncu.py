"""The ncu CSV parser on a real capture: `ncu --csv --print-units base` on an H200 (tests/data)."""

from pathlib import Path

import pytest

from kernels_lab import get_workload
from kernels_lab.instrument import ncu

CSV = Path(__file__).parent / "data" / "ncu_elementwise_h200.csv"
VARIANTS = ["unfused", "fused_naive", "fused", "persistent"]
N = 134217728  # the size the capture ran at (8.5x L2 per array)


def test_python_names_from_numba_symbols():
    assert ncu.python_name("kernels_lab::bias_add_vec4[v2,cw51cXTLS](Array<float, 1, C, mutable, aligned>)") \
        == "bias_add_vec4"
    assert ncu.python_name("__main__::ncu_variant_marker[v1,cw51](Array<int, 1, C, mutable, aligned>)") \
        == ncu.MARKER
    assert ncu.python_name("_ZN11kernels_lab8patterns11elementwise10chain_vec4B3v52B116cw51cXTLSE5Array") \
        == "chain_vec4"


def test_parses_the_captured_csv_into_kernels_per_variant():
    groups = ncu.split_by_variant(ncu.parse_csv(CSV.read_text()), VARIANTS)
    w = get_workload("elementwise")
    for name, kernels in groups.items():
        plan = w.variant(name).plan(w.size(N))
        assert [k.kernel for k in kernels] == [k.kernel for k in plan.launches]
        measured = sum(k.dram_read + k.dram_write for k in kernels)
        assert abs(measured / plan.bytes_total - 1) < 0.05, (name, measured, plan.bytes_total)
        assert all(1e-5 < k.time_s < 1e-2 for k in kernels)  # units: ns -> s


def test_garbage_is_a_clear_error():
    with pytest.raises(ncu.NcuError, match="no CSV rows"):
        ncu.parse_csv("==PROF== nothing profiled\n")
    with pytest.raises(ncu.NcuError, match="variant groups"):
        ncu.split_by_variant(ncu.parse_csv(CSV.read_text()), VARIANTS[:2])


def test_missing_ncu_is_reported(monkeypatch):
    monkeypatch.setattr(ncu.shutil, "which", lambda name: None)
    with pytest.raises(ncu.NcuError, match="not on PATH"):
        ncu.measure("elementwise", get_workload("elementwise").size(10), ["fused"])


def test_the_children_run_variants_and_study_lines_and_name_what_they_lack():
    from kernels_lab.profile import ncu_lines
    assert ncu._child(["layernorm", "rows=3,cols=67", "fused"]) == 0
    with pytest.raises(SystemExit, match="kernels_lab.profile.ncu_lines"):
        ncu._child(["layernorm", "rows=3,cols=67", "v2"])
    assert ncu_lines.main(["layernorm", "rows=3,cols=67", "fused", "v2"]) == 0
    with pytest.raises(SystemExit, match="no variant or study line"):
        ncu_lines.main(["layernorm", "rows=3,cols=67", "v99"])


def test_section_metrics_reads_every_metric_of_a_committed_run_and_leaves_the_markers_out():
    text = (Path(__file__).resolve().parents[1] / "figures" / "data" / "ncu_layernorm_8192x8192_h100.csv").read_text()
    found = ncu.section_metrics(text)
    assert list(found) == ["layernorm_fused_block512x4_b512_vec4", "layernorm_cluster1_256x8_v3",
                           "layernorm_cluster1_256x8", "layernorm_cluster1_256x8_v2"]  # launch order; no marker
    cluster = found["layernorm_cluster1_256x8"]
    assert cluster["Registers Per Thread"] > 0 and cluster["Block Size"] == 256.0
    assert isinstance(cluster["Cluster Scheduling Policy"], str)  # text stays text
    assert "" not in cluster  # a rule's row names no metric
    with pytest.raises(ncu.NcuError, match="no kernel"):
        ncu.section_metrics("# command: ncu ...\n")
