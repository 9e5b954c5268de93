"""The rnn workload beyond what tests/test_workloads.py checks for every registered workload (each
variant against float64 at the odd test sizes, traced bytes equal to the plan): the persistent
kernel's GPU-shaped tilings, its limit and its barrier bound, argument checks, the exercise, and a
PTX compile for sm_90 where NVVM is installed."""

import warnings

import numpy as np
import pytest

from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.core import get_workload
from kernels_lab.give_up import GiveUpWord
from kernels_lab.runtime import ON_GPU, cuda
from kernels_lab.topics.rnn import workload as rnn
from sources import submission

W = get_workload("rnn")


@pytest.fixture(autouse=True)
def _quiet_graph():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "rnn graph: the simulator has no CUDA graphs")
        yield


def test_per_step_plans_read_w_every_step_and_persistent_once():
    H, B = 37, 3
    size = W.size(hidden=H, batch=B, steps=5)
    assert [W.variant(v).plan(size).n_launches for v in ("unfused", "fused", "graph", "persistent")] == [10, 5, 5, 1]
    one_more = W.size(hidden=H, batch=B, steps=6)
    assert W.variant("fused").plan(one_more).bytes_read - W.variant("fused").plan(size).bytes_read >= 4 * H * H
    # one step: the persistent kernel reads W and u_0 once, nothing else (h_{-1} = 0 is never read)
    grid_sync = next(name for name, barrier in rnn.PERSISTENT_VARIANTS.items() if barrier == "grid")
    one_step = W.size(hidden=H, batch=B, steps=1)
    assert W.variant(grid_sync).plan(one_step).bytes_read == 4 * (H * H + B * H)
    flag = next(name for name, barrier in rnn.PERSISTENT_VARIANTS.items() if barrier == "flag")
    assert 0 < W.variant(flag).plan(one_step).bytes_read - 4 * (H * H + B * H) <= 64  # + the barrier's own words


@pytest.mark.skipif(ON_GPU, reason="simulator shapes")
@pytest.mark.parametrize("hidden,batch,tiling,barrier", [
    (8, 5, rnn.Tiling(128, 4, 2), "grid"),   # 64 lanes per row group: 5 shuffle stages, 2 warps add in shared
    (7, 4, rnn.Tiling(128, 8, 4), "flag"),   # 32 sums per thread, columns not a multiple of the threads
])
def test_gpu_shaped_tilings_on_the_simulator(hidden, batch, tiling, barrier, rng):
    lay = rnn.make_layout(hidden, batch, tiling, 1)
    assert lay.stages == 5 and lay.warps_per_group > 1
    size = W.size(hidden=hidden, batch=batch, steps=3)
    inputs = W.make_inputs(size, rng)
    out = poisoned(W.output_specs(size))
    rnn.bind_persistent_with(to_device(inputs), out, tiling=tiling, barrier=barrier)()
    np.testing.assert_allclose(out["h"].copy_to_host(), W.reference(inputs)["h"], rtol=1e-4, atol=1e-5)


def test_too_large_a_hidden_is_refused_with_the_numbers():
    size = W.size(hidden=200, batch=3, steps=2)
    why = W.variant("persistent").why_not(size)
    largest = 64 if not ON_GPU else None
    assert why is not None and "hidden=200" in why and "bytes" in why and "'graph'" in why
    if largest:
        assert f"The largest hidden that fits is {largest}." in why
        assert W.variant("persistent").why_not(W.size(hidden=largest, batch=3, steps=2)) is None
    assert W.variant("fused").why_not(size) is None
    comparison = next(name for name in rnn.PERSISTENT_VARIANTS if name != "persistent")
    with pytest.raises(rnn.DoesNotFit, match="largest hidden"):
        W.variant(comparison).bind(to_device(W.make_inputs(size, np.random.default_rng(0))),
                                   poisoned(W.output_specs(size)))


@pytest.mark.skipif(ON_GPU, reason="the simulator runs blocks one after another")
def test_a_flag_barrier_that_never_opens_is_an_error_not_a_hang():
    # two blocks on the simulator: block 0 waits for block 1, which only runs after block 0 ends
    size = W.size(hidden=8, batch=2, steps=3)
    lay = rnn.make_layout(8, 2, rnn.Tiling(8, 4, 2), max_blocks=2)
    assert lay.blocks == 2
    inputs, out = to_device(W.make_inputs(size, np.random.default_rng(0))), poisoned(W.output_specs(size))
    gave_up = GiveUpWord()
    args = (inputs["W"], inputs["u"], out["h"], cuda.to_device(np.zeros(3, np.int32)), gave_up.word, np.int32(20))
    launch = rnn.PersistentLaunch(rnn.persistent_kernel(lay, "flag"), lay, args, gave_up, 0)
    launch()
    assert gave_up.at() == 0
    with pytest.raises(rnn.BarrierTimeout, match="timed out at step 0"):
        launch()


@pytest.mark.parametrize("change,message", [
    (lambda i, o: i.update(W=i["W"].copy_to_host()), "host NumPy array"),
    (lambda i, o: i.update(W=cuda.to_device(np.zeros((4, 5), np.float32))), "square"),
    (lambda i, o: i.update(u=cuda.to_device(np.zeros((2, 3, 9), np.float32))), "u: shape"),
    (lambda i, o: o.update(h=cuda.to_device(np.zeros((2, 3, 8), np.float64))), "dtype float64"),
    (lambda i, o: o.update(h=cuda.to_device(np.zeros((3, 3, 8), np.float32))), "h: shape"),
])
@pytest.mark.parametrize("variant", ["fused", "persistent"])
def test_bad_arguments_are_named(variant, change, message):
    size = W.size(hidden=8, batch=3, steps=2)
    inputs, outputs = to_device(W.make_inputs(size, np.random.default_rng(0))), poisoned(W.output_specs(size))
    change(inputs, outputs)
    with pytest.raises(ArgumentError, match=message):
        W.variant(variant).bind(inputs, outputs)


def _grade(name):
    from kernels_lab.grading.exercises import get_exercise
    from kernels_lab.grading.grade import grade
    return grade(get_exercise("rnn_step"), submission(name), name, compile_gate=False,
                 timeout_s=120)


def test_a_transposed_weight_index_loses_correctness():
    g = _grade("rnn_transposed")
    by = {t.name: t for t in g.tests}
    assert by["correct (public)"].score == 0 and by["launch budget"].status == "passed"
    assert "symmetric inputs would have hidden this" in g.summary
