import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument import launch_hook as launches
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.runtime import ON_GPU, cuda


def test_numba_internals_the_hook_relies_on_are_there():
    # If numba-cuda moves these, the launch hook is silently blind: fail loudly instead.
    from importlib.metadata import version
    assert version("numba-cuda").startswith(launches.SUPPORTED_NUMBA_CUDA)
    if ON_GPU:
        from numba.cuda import dispatcher
        assert callable(dispatcher._Kernel.launch)
    else:
        from numba.cuda.simulator import kernel as simkernel
        assert callable(simkernel.FakeCUDAKernel.__call__) and callable(simkernel._get_kernel_context)


@cuda.jit
def _touch(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


@cuda.jit(device=True)
def _helper(a, i):
    a[i] = 2


@cuda.jit
def _calls_device_function(a):
    i = cuda.grid(1)
    if i < a.size:
        _helper(a, i)


def test_counter_sees_every_launch_and_only_those():
    a = cuda.to_device(np.zeros(10, np.float32))
    _touch[1, 16](a)  # outside: not counted
    with count_launches() as seen:
        _touch[2, 8](a)
        _calls_device_function[1, 16](a)  # the device function call is not a launch
        _touch[(1, 1), (4, 4)](a)
    _touch[1, 16](a)
    assert [r.kernel for r in seen] == ["_touch", "_calls_device_function", "_touch"]
    assert seen[0].grid == (2, 1, 1) and seen[0].block == (8, 1, 1)
    assert seen[2].block == (4, 4, 1)


def test_nested_counters_both_see_launches():
    a = cuda.to_device(np.zeros(4, np.float32))
    with count_launches() as outer:
        _touch[1, 4](a)
        with count_launches() as inner:
            _touch[1, 4](a)
    assert len(outer) == 2 and len(inner) == 1


def test_a_dry_run_is_heard_but_runs_nothing_and_only_inside():
    a = cuda.to_device(np.zeros(10, np.float32))
    if ON_GPU:
        with pytest.raises(RuntimeError, match="simulator only"), launches.dry_run():
            pass
        return
    with count_launches() as seen:
        with launches.dry_run():
            _touch[1, 16](a)
            _calls_device_function[1, 16](a)
        _touch[1, 16](a)  # after it: runs again
    assert [r.kernel for r in seen] == ["_touch", "_calls_device_function", "_touch"]
    assert (a.copy_to_host() == 1).all()


@pytest.mark.parametrize("variant", ["unfused", "fused_naive", "fused", "persistent"])
def test_plans_give_the_launches_the_code_performs(variant):
    w = get_workload("elementwise")
    n = 777
    v = w.variant(variant)
    launch = v.bind(to_device(w.make_inputs(w.size(n), np.random.default_rng(3))), poisoned(w.output_specs(w.size(n))))
    with count_launches() as seen:
        launch()
    plan = v.plan(w.size(n))
    assert [(r.kernel, r.grid[0], r.block[0]) for r in seen] == \
        [(k.kernel, k.grid, k.block) for k in plan.launches]
