"""The read ceiling's kernels (profile/ceiling.py) really read and sum every vector they are given: their one
store fires exactly when the impossible value is the sum a thread computes, and never otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from kernels_lab.profile.ceiling import BLOCK, read4_kernel, read_kernel
from kernels_lab.runtime import cuda

VECTORS = 3 * BLOCK + 5  # not a multiple of the block: the last block partly idle, thread 4 of read4 reading 4


def _fires(kernel, grid: int, src: np.ndarray, never: float) -> float:
    out = cuda.to_device(np.zeros(1, np.float32))
    kernel[grid, BLOCK](cuda.to_device(src), np.float32(never), out)
    return float(out.copy_to_host()[0])


@pytest.mark.parametrize("kernel,grid,per_thread", [(read_kernel, 4, 1), (read4_kernel, 1, 4)])
def test_the_store_fires_only_on_a_sum_a_thread_computes(kernel, grid, per_thread):
    src = np.random.default_rng().standard_normal(4 * VECTORS).astype(np.float32)
    vectors = src.reshape(-1, 4)
    threads = grid * BLOCK
    # thread t's sum: its vectors t, t + threads, ... (read4's threads 0-4 read four, the others three)
    t = int(np.random.default_rng().integers(5))
    own = vectors[t::threads][:per_thread]
    assert len(own) == per_thread
    total = np.float32(0)
    for a in own:
        total += (a[0] + a[1]) + (a[2] + a[3])
    assert _fires(kernel, grid, src, total) == total
    assert _fires(kernel, grid, src, np.finfo(np.float32).max) == 0.0


def test_a_read_study_divides_by_the_read_ceiling_and_keeps_both_in_its_meta(monkeypatch, tmp_path):
    """cross-entropy's study (ceiling="read") on the timed path, its clocks and ceilings replaced by fixed values:
    of_ceiling is GBs_useful over the read ceiling; the meta holds the copy ceiling and the read ceiling."""
    import dataclasses

    from kernels_lab.instrument.timing import Timing
    from kernels_lab.profile import results, study as st
    from kernels_lab.profile.ceiling import Ceiling
    from kernels_lab.topics.softmax.cross_entropy_study import STUDY

    monkeypatch.setattr(st, "why_untimed", lambda: None)
    monkeypatch.setattr(st, "time_launchers", lambda launchers, **kw: [Timing(2.0, 2.0, 2.0, 1, 5.0) for _ in launchers])
    monkeypatch.setattr(st, "time_steady", lambda launchers, **kw: [Timing(1.0, 1.0, 1.0, 1, 5.0) for _ in launchers])
    monkeypatch.setattr(st, "measure_copy_ceiling", lambda: Ceiling(3000.0, "copy kernel", {"copy kernel": 3000.0}))
    monkeypatch.setattr(st, "measure_read_ceiling", lambda: Ceiling(3500.0, "read kernel", {"read kernel": 3500.0}))
    size = STUDY.workload.size(rows=3, cols=67)
    small = dataclasses.replace(STUDY, groups=(st.Group("g", (size,)),), anchors=(), check_size=None)
    doc = results.load(st.run_study(small, tmp_path / "ce.json", command="test", say=lambda _: None).path)
    assert doc["meta"]["ceiling_GBs"] == 3000.0 and doc["meta"]["read_ceiling_GBs"] == 3500.0
    assert doc["meta"]["of_ceiling"] == "read"
    lines = [r for r in doc["records"] if r["time_ms"]]
    assert {r["line"] for r in lines} == set(STUDY.workload.variants)
    for r in lines:
        assert r["bytes_useful"] == 4 * 3 * 67 and r["checked"] is True
        assert r["of_ceiling"] == pytest.approx(r["GBs_useful"] / 3500.0)


def test_the_launchers_cover_the_whole_array_and_their_checks_pass(rng):
    """The launchers the ceilings and ceiling_sizes share: the copy of a length no multiple of 4 or of the
    block is exact, a copy left undone is caught, and both read kernels leave out[0] alone."""
    from kernels_lab.profile.ceiling import check_copy, check_read, copy_launcher, read_launchers
    src = cuda.to_device(rng.standard_normal(4 * VECTORS + 3).astype(np.float32))
    dst = cuda.to_device(np.full(4 * VECTORS + 3, np.nan, np.float32))
    with pytest.raises(RuntimeError, match="copy of"):
        check_copy(src, dst)
    copy_launcher(src, dst)()
    check_copy(src, dst)
    out = cuda.to_device(np.zeros(1, np.float32))
    whole = cuda.to_device(rng.standard_normal(4 * VECTORS).astype(np.float32))
    for launch in read_launchers(whole, out).values():
        launch()
    check_read(out)
