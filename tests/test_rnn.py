"""The rnn workload beyond what tests/test_workloads.py checks for every registered workload (each
variant against float64 at the odd test sizes, traced bytes equal to the plan): the persistent
kernel's GPU-shaped tilings, its limit and its barrier bound, argument checks, the exercise, and a
PTX compile for sm_90 where NVVM is installed."""

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.core import get_workload
from kernels_lab.runtime import ON_GPU, cuda, host_view
from kernels_lab.workloads import rnn

W = get_workload("rnn")
SUBMISSIONS = Path(__file__).parent / "submissions"


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
    status = cuda.mapped_array(1, np.int32)
    host_view(status)[0] = 0
    args = (inputs["W"], inputs["u"], out["h"], cuda.to_device(np.zeros(3, np.int32)), status, np.int32(20))
    launch = rnn.PersistentLaunch(rnn.persistent_kernel(lay, "flag"), lay, args, status, 0)
    launch()
    assert launch.timed_out_at() == 0
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
    return grade(get_exercise("rnn_step"), (SUBMISSIONS / f"{name}.py").read_text(), name, compile_gate=False,
                 timeout_s=120)


def test_the_exercise_gives_full_marks_to_a_correct_step_kernel():
    g = _grade("rnn_correct")
    assert g.outcome == "graded" and g.score == g.max_score > 0, g.summary


def test_a_transposed_weight_index_loses_correctness():
    g = _grade("rnn_transposed")
    by = {t.name: t for t in g.tests}
    assert by["correct (public)"].score == 0 and by["launch budget"].status == "passed"
    assert "symmetric inputs would have hidden this" in g.summary


_PTX_CHECK = textwrap.dedent("""
    import re, sys
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        for lib in ("nvvm", "nvrtc"):
            load_nvidia_dynamic_lib(lib)
    except Exception:
        print("NO_NVVM"); sys.exit(0)
    from kernels_lab.runtime import cuda
    from numba import types
    from numba.cuda import dispatcher
    class SM90:
        compute_capability = (9, 0)
    # numba compiles device functions for the current device's compute capability; with no GPU there
    # is none, so say sm_90 (compile_ptx itself is told cc=(9, 0) as well)
    dispatcher.get_current_device = SM90
    from kernels_lab.workloads import rnn
    A = lambda nd, ty=types.float32: types.Array(ty, nd, "C")
    flags = (A(1, types.int32), A(1, types.int32), types.int32)
    tiling = rnn.TILINGS[rnn.GPU_TILING]
    lay = rnn.make_layout(2048, 4, tiling, 132)
    for barrier in rnn.BARRIERS:
        kernel = rnn.persistent_kernel(lay, barrier)
        ptx, _ = cuda.compile_ptx(kernel.py_func, (A(2), A(3), A(3)) + flags, cc=(9, 0),
                                  launch_bounds=(tiling.threads, 1))
        assert "__local_depot" not in ptx, f"{barrier}: W went to local memory"
    matvec, step = rnn.step_kernels(3)
    cuda.compile_ptx(matvec.py_func, (A(2), A(3), A(3), types.int64, A(2)), cc=(9, 0))
    cuda.compile_ptx(step.py_func, (A(2), A(3), A(3), types.int64), cc=(9, 0))
    cuda.compile_ptx(rnn.rnn_tanh.py_func, (A(2), A(3), types.int64), cc=(9, 0))
    print("compiled")
""")


def test_the_gpu_kernels_compile_for_sm_90():
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = subprocess.run([sys.executable, "-c", _PTX_CHECK], capture_output=True, text=True, env=env, timeout=600,
                         cwd=Path(__file__).parents[1])
    if "NO_NVVM" in out.stdout:
        pytest.skip("no NVVM here")
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]
