"""Real-GPU checks (pytest -m gpu with KERNELS_LAB_BACKEND=gpu). Skipped on the simulator."""

import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.checks import check_variant
from kernels_lab.runtime import cuda

pytestmark = pytest.mark.gpu
W = get_workload("elementwise")


@pytest.mark.parametrize("variant", list(W.variants))
@pytest.mark.parametrize("n", [1, 255, 257, (1 << 20) + 3, (1 << 24) + 1])
def test_variants_match_reference_on_the_gpu(variant, n):
    for seed in (11, 12):
        result = check_variant(W, W.variant(variant), W.size(n), seed)
        assert result.ok, result.explain()


@pytest.mark.parametrize("name", ["fused_kernel", "persistent_kernel", "add_kernel"])
def test_vector_kernels_use_16_byte_accesses(name):
    from numba import types

    from kernels_lab.topics.elementwise import workload as elementwise
    arr = types.Array(types.float32, 1, "C")
    kernel = getattr(elementwise, name)
    ptx = kernel.inspect_asm((arr, arr, types.float32, arr))
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx


def test_launch_hook_sees_gpu_launches():
    from kernels_lab.arrays import poisoned, to_device
    from kernels_lab.instrument.launch_hook import count_launches
    n = 1000
    v = W.variant("unfused")
    launch = v.bind(to_device(W.make_inputs(W.size(n), np.random.default_rng(0))), poisoned(W.output_specs(W.size(n))))
    with count_launches() as seen:
        launch()
    cuda.synchronize()
    assert [r.kernel for r in seen] == [k.kernel for k in v.plan(W.size(n)).launches]


def test_timing_and_ceiling_are_plausible():
    from kernels_lab.profile.ceiling import measure_copy_ceiling
    c = measure_copy_ceiling(n=1 << 26, reps=5)
    assert 500 < c.GBs < 10_000, c


def test_measure_warm_and_cold_on_the_gpu():
    from kernels_lab.profile.measure import measure_workload
    for flush in (True, False):
        recs = measure_workload(W, W.size((1 << 16) + 5), reps=5, flush=flush, show_progress=False)
        assert all(r["time_ms"] > 0 and r["time_ms_q1"] <= r["time_ms"] <= r["time_ms_q3"] for r in recs)
        assert all(r["launches"] == r["launches_planned"] for r in recs)
