"""The launch-overhead ladder: what one kernel boundary costs on each launch path.

Every rung launches the same tiny kernel N times back to back on one stream and reports
  host_us_per_launch:   host wall time to issue one launch (Python + driver);
  device_us_per_boundary: event time for the N launches over N: the spacing the GPU sees.
When the host is slower than the GPU the two agree (launch-bound); when the host is faster
(graph replay), device time shows the GPU's own cost per kernel boundary.

Rungs: numba dispatch with 0, 1 and 4 array arguments; cuda.core's launch() with the
arguments flattened once (it still packs them on every call); the pre-bound launch (packed
once, one cuLaunchKernelEx per call); CuPy's RawKernel as an outside anchor, when CuPy is
installed (kernels-lab never needs it); replay of a captured CUDA graph; one step of a
persistent kernel (a grid-wide barrier instead of a relaunch); and a fused kernel, which has
no boundary.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ...backend import BACKEND
from ...launch_paths import CapturedGraph, PreboundLaunch
from ...runtime import cuda, device_facts
from ...instrument.timing import TimingUnavailable
from ...profile.runs import Bench

BLOCK = 128


@cuda.jit
def tiny0():
    pass


@cuda.jit
def tiny1(a):
    if cuda.grid(1) == 0:
        a[0] += 1.0


@cuda.jit
def tiny4(a, b, c, d):
    if cuda.grid(1) == 0:
        a[0] += b[0] + c[0] + d[0]


@cuda.jit
def persistent_steps(a, steps):
    # Each step would be one kernel in a relaunch design; here it is one grid-wide barrier.
    grid = cuda.cg.this_grid()
    for _ in range(steps):
        if cuda.grid(1) == 0:
            a[0] += 1.0
        grid.sync()


def _rung(path: str, launches: int, host_s: float, device_ms: float, note: str) -> dict[str, Any]:
    return {"kind": "launch", "path": path, "launches": launches,
            "host_us_per_launch": host_s / launches * 1e6,
            "device_us_per_boundary": device_ms * 1e3 / launches, "note": note}


def _measure(path: str, issue: Callable[[], None], launches: int, note: str, repeats: int = 5) -> dict[str, Any]:
    """Median over repeats of (host time to issue, device time to run) one batch of launches."""
    issue()  # warm-up: compile, load, first-launch costs
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    hosts, devices = [], []
    for _ in range(repeats):
        start.record()
        t0 = time.perf_counter()
        issue()
        hosts.append(time.perf_counter() - t0)
        end.record()
        end.synchronize()
        devices.append(start.elapsed_time(end))
    return _rung(path, launches, float(np.median(hosts)), float(np.median(devices)), note)


_CUPY_TINY4 = r'''
extern "C" __global__ void tiny4(float* a, const float* b, const float* c, const float* d) {
    if (blockIdx.x * blockDim.x + threadIdx.x == 0) a[0] += b[0] + c[0] + d[0];
}'''


def _cupy_rung(grid: int, loop, n_launches: int) -> dict[str, Any] | None:
    """The same tiny kernel as a CuPy RawKernel (an anchor: what another launcher pays), or None."""
    try:
        import cupy
    except ImportError:
        return None
    kernel = cupy.RawKernel(_CUPY_TINY4, "tiny4")
    arrays = tuple(cupy.zeros(4, cupy.float32) for _ in range(4))
    return _measure("CuPy RawKernel, 4 array args", loop(lambda: kernel((grid,), (BLOCK,), arrays)), n_launches,
                    "anchor: CuPy's own launcher, same kernel in CUDA C, same (default) stream")


def measure_ladder(n_launches: int = 2000) -> list[dict[str, Any]]:
    if not BACKEND.can_time:
        raise TimingUnavailable("the launch ladder measures microseconds: it needs a GPU")
    arrays = [cuda.to_device(np.zeros(4, np.float32)) for _ in range(4)]
    a = arrays[0]
    g = device_facts().sm_count  # one block per SM: a small grid, as for a tiny kernel
    rungs = []

    def loop(fn):
        def issue():
            for _ in range(n_launches):
                fn()
        return issue

    k0, k1, k4 = tiny0[g, BLOCK], tiny1[g, BLOCK], tiny4[g, BLOCK]
    rungs.append(_measure("numba dispatch, 0 array args", loop(lambda: k0()), n_launches,
                          "kernel[grid, block]() each time"))
    rungs.append(_measure("numba dispatch, 1 array arg", loop(lambda: k1(a)), n_launches,
                          "argument typed and flattened on every call"))
    rungs.append(_measure("numba dispatch, 4 array args", loop(lambda: k4(*arrays)), n_launches,
                          "7 parameters per array, every call"))
    pre = PreboundLaunch(tiny4, g, BLOCK, tuple(arrays))
    from cuda.core import LaunchConfig, launch
    config, stream = LaunchConfig(grid=g, block=BLOCK), pre.stream
    rungs.append(_measure("cuda.core launch, arguments flattened once, 4 array args",
                          loop(lambda: launch(stream, config, pre.kernel, *pre.params)), n_launches,
                          f"{len(pre.params)} parameters packed on every call"))
    rungs.append(_measure("pre-bound cuda.core launch, 4 array args", loop(pre), n_launches,
                          "arguments flattened and packed once; one cuLaunchKernelEx per call"))
    if (cupy_rung := _cupy_rung(g, loop, n_launches)) is not None:
        rungs.append(cupy_rung)
    graph = CapturedGraph(lambda s: [tiny4[g, BLOCK, s](*arrays) for _ in range(n_launches)])
    rungs.append(_measure("CUDA graph replay, 4 array args", lambda: graph(), n_launches,
                          f"{n_launches} kernels captured once, replayed with one call"))
    steps = n_launches
    from numba import types
    BACKEND.require_coresident(persistent_steps, (types.Array(types.float32, 1, "C"), types.int64), g, BLOCK)
    coop = persistent_steps[g, BLOCK]
    rungs.append(_measure("persistent kernel, one grid-sync step", lambda: coop(a, steps), steps,
                          f"one launch, {steps} steps separated by grid.sync()"))
    rungs.append({"kind": "launch", "path": "fused (no boundary)", "launches": 1, "host_us_per_launch": 0.0,
                  "device_us_per_boundary": 0.0, "note": "the stages share one kernel: nothing to pay"})
    return rungs


BENCH = Bench("the launch-overhead ladder: numba dispatch, pre-bound, graph replay, grid-sync step", measure_ladder)  # `kernels-lab bench launch`
