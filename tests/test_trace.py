import numpy as np
import pytest

from kernels_lab import all_workloads
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.profile.trace import per_array, tracing
from kernels_lab.runtime import ON_SIMULATOR, cuda

pytestmark = pytest.mark.skipif(not ON_SIMULATOR, reason="tracing needs the simulator")


def test_simulator_array_class_is_where_the_tracer_expects_it():
    from numba.cuda.simulator.cudadrv import devicearray
    cls = devicearray.FakeWithinKernelCUDAArray
    assert callable(cls.__getitem__) and callable(cls.__setitem__)


@cuda.jit
def _read_twice(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + a[i]


@cuda.jit
def _via_shared(a, out):
    tile = cuda.shared.array(32, dtype=np.float32)
    scratch = cuda.local.array(2, dtype=np.float32)
    i = cuda.threadIdx.x
    tile[i] = a[i]          # 1 global read, 1 shared write
    cuda.syncthreads()
    scratch[0] = tile[31 - i] * 2  # shared read, local write: not global
    out[i] = scratch[0]     # 1 global write


def test_an_element_read_twice_is_traced_as_two_reads():
    a = cuda.to_device(np.arange(8, dtype=np.float32))
    out = cuda.device_array(8, np.float32)
    with tracing() as trace:
        _read_twice[1, 8](a, out)
    arrays = trace.launches[0].arrays
    assert arrays["a"].reads == 16 and arrays["a"].writes == 0
    assert arrays["out"].writes == 8 and arrays["out"].reads == 0
    assert trace.bytes_read == 64 and trace.bytes_written == 32


def test_shared_and_local_accesses_are_not_global_traffic():
    a = cuda.to_device(np.arange(32, dtype=np.float32))
    out = cuda.device_array(32, np.float32)
    with tracing() as trace:
        _via_shared[1, 32](a, out)
    assert set(trace.launches[0].arrays) == {"a", "out"}
    assert trace.bytes_read == 32 * 4 and trace.bytes_written == 32 * 4
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(32)[::-1])


def test_last_writer_names_block_and_thread():
    out = cuda.device_array(40, np.float32)
    a = cuda.to_device(np.ones(40, np.float32))
    with tracing(writers=True) as trace:
        _read_twice[3, 16](a, out)
    assert trace.last_writer[("out", 37)] == ((2, 0, 0), (5, 0, 0))


def _all_variants():
    return [(w.name, v) for w in all_workloads().values() for v in w.variants]


@pytest.mark.parametrize("workload,variant", _all_variants())
def test_traced_bytes_equal_the_plan_for_every_variant(workload, variant):
    # The check that keeps plans honest: every byte a plan declares, the kernels really move.
    w = all_workloads()[workload]
    for n in (1, 7, 517):
        v = w.variant(variant)
        launch = v.bind(to_device(w.make_inputs(w.size(n), np.random.default_rng(n))), poisoned(w.output_specs(w.size(n))))
        with tracing() as trace:
            launch()
        plan = v.plan(w.size(n))
        assert len(trace.launches) == plan.n_launches
        for traced, planned in zip(trace.launches, plan.launches):
            assert traced.kernel == planned.kernel
            assert (traced.bytes_read, traced.bytes_written) == (planned.bytes_read, planned.bytes_written), \
                f"{variant} n={n} {planned.kernel}: traced {per_array(trace)}"
