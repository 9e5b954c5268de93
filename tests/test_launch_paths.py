import numpy as np
import pytest

from kernels_lab import launch_paths as paths
from kernels_lab.runtime import ON_GPU, cuda


@cuda.jit
def _add_into(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += a[i] + b[i]


@pytest.mark.skipif(ON_GPU, reason="simulator behaviour")
def test_gpu_only_paths_say_so_on_the_simulator():
    a = cuda.to_device(np.ones(4, np.float32))
    with pytest.raises(paths.LaunchPathUnavailable, match="needs a GPU"):
        paths.PreboundLaunch(_add_into, 1, 4, (a, a, a))
    with pytest.raises(paths.LaunchPathUnavailable, match="needs a GPU"):
        paths.CapturedGraph(lambda s: None)


@pytest.mark.gpu
def test_numba_internals_for_prebinding_are_there():
    from numba.cuda import dispatcher
    from numba.cuda.cudadrv import driver
    assert callable(dispatcher._Kernel._prepare_args) and callable(driver._to_core_stream)


@pytest.mark.gpu
def test_prebound_launch_and_graph_replay_compute_what_numba_does(rng):
    from kernels_lab.instrument.launch_hook import count_launches
    n = 1000 + 7
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.uniform(-3, 1, n).astype(np.float32)
    da, db = cuda.to_device(a), cuda.to_device(b)
    out = cuda.to_device(np.zeros(n, np.float32))
    pre = paths.PreboundLaunch(_add_into, (n + 127) // 128, 128, (da, db, out))
    with count_launches() as seen:
        pre()
        pre()
    cuda.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), 2 * (a + b), rtol=1e-6)
    assert [r.via for r in seen] == ["cuda.core", "cuda.core"]
    graph = paths.CapturedGraph(lambda s: [_add_into[(n + 127) // 128, 128, s](da, db, out) for _ in range(3)])
    graph()
    graph()
    cuda.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), 8 * (a + b), rtol=1e-5)
