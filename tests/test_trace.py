import numpy as np
import pytest

from kernels_lab.instrument.trace import tracing
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


# Traced bytes equal to the plan for every variant of every workload: tests/test_workloads.py.
